// JSON Schema -> GBNF (json_schema.h). Written for this project (llama.cpp's
// json-schema-to-grammar is the model for the approach, not the code).
#include "grammar/json_schema.h"

#include "grammar/digit_ranges.h"
#include "grammar/schema_pattern.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace triad::grammar {
namespace {

using json = nlohmann::ordered_json;
using digits::alternation;
using digits::Dec;
using digits::DecBound;
using digits::int_range;
using digits::kIntLimit;

[[noreturn]] void fail(const std::string& msg) { throw GrammarError("json_schema: " + msg); }

// A GBNF string literal for raw text (UTF-8 kept, quotes, backslashes and controls escaped).
std::string lit(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789ABCDEF";
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "contentEncoding", "contentMediaType", "$anchor", "strict", "name", "discriminator"};

class Compiler {
 public:
  Compiler(const json& root, const SchemaOptions& o) : root_(root), o_(o) {}

  std::string run() {
    const std::string top = visit(root_, 0);
    std::string out = o_.root_name + " ::= " + top + "\n";
    for (const auto& [name, body] : rules_) {
      out += name + " ::= " + body + "\n";
      if (out.size() > o_.max_bytes) fail("the schema compiles to more than " + std::to_string(o_.max_bytes) + " bytes of grammar");
    }
    return out;
  }

 private:
  // A keyword the grammar cannot enforce: an error under `strict`; otherwise dropped (the grammar
  // admits more than the schema there) and reported.
  void unenforceable(const std::string& keyword, const std::string& why) {
    if (o_.strict) fail(why);
    if (o_.dropped && std::find(o_.dropped->begin(), o_.dropped->end(), keyword) == o_.dropped->end())
      o_.dropped->push_back(keyword);
  }

  std::string add_rule(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    if (rules_.size() >= o_.max_rules) fail("the schema needs more than " + std::to_string(o_.max_rules) + " grammar rules");
    const std::string name = o_.prefix + hint + "-" + std::to_string(rules_.size());
    bytes_ += body.size() + name.size();
    if (bytes_ > o_.max_bytes) fail("the schema compiles to more than " + std::to_string(o_.max_bytes) + " bytes of grammar");
    rules_.emplace_back(name, body);
    by_body_.emplace(body, name);
    return name;
  }

  const json& resolve(const std::string& ref) {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) fail("$ref '" + ref + "' is not a local reference (#/...)");
    try {
      const json& t = root_.at(json::json_pointer(ref.substr(1)));
      return t;
    } catch (const std::exception&) {
      fail("$ref '" + ref + "' points to nothing");
    }
  }

  std::string visit(const json& s, int depth) {
    if (depth > o_.max_depth) fail("subschemas nest more than " + std::to_string(o_.max_depth) + " deep");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("schema 'false' matches nothing");
      return "json-value";
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean");
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
        "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "format", "pattern",
        "multipleOf", "uniqueItems"};
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k)) continue;
      if (!known.count(k)) unenforceable(k, "unsupported keyword '" + k + "'");
    }
    auto has = [&](const char* k) { return s.contains(k); };
    auto validation_siblings = [&](std::initializer_list<const char*> allowed) {
      for (const auto& [k, v] : s.items()) {
        if (kAnnotations.count(k) || k == "$defs" || k == "definitions") continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || k == a;
        if (!ok && known.count(k)) unenforceable(k, "keyword '" + k + "' next to '" + std::string(*allowed.begin()) + "' is not supported");
      }
    };
    if (has("$ref")) {
      validation_siblings({"$ref"});
      if (!s["$ref"].is_string()) fail("$ref must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      auto it = refs_.find(ref);
      if (it != refs_.end()) return it->second;
      const std::string name = o_.prefix + "ref-" + std::to_string(refs_.size());
      refs_[ref] = name;
      const std::string body = visit(resolve(ref), depth + 1);
      rules_.emplace_back(name, body);  // by name, so recursion works (not merged by body)
      if (rules_.size() > o_.max_rules) fail("the schema needs more than " + std::to_string(o_.max_rules) + " grammar rules");
      return name;
    }
    if (has("const") || has("enum")) {
      const char* k = has("const") ? "const" : "enum";
      validation_siblings({k, "type"});
      const std::vector<json> values = typed_values(s);
      std::string o = "(";
      for (size_t i = 0; i < values.size(); ++i) o += (i ? " | " : "") + lit(values[i].dump());
      return values.size() == 1 ? lit(values[0].dump()) : add_rule("enum", o + ")");
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!has(k)) continue;
      validation_siblings({k});
      const json& list = s[k];
      if (!list.is_array() || list.empty()) fail(std::string("'") + k + "' must be a non-empty array");
      std::string o = "(";
      for (size_t i = 0; i < list.size(); ++i) o += (i ? " | " : "") + visit(list[i], depth + 1);
      return add_rule("alt", o + ")");
    }
    if (has("allOf")) {
      validation_siblings({"allOf"});
      if (!s["allOf"].is_array() || s["allOf"].empty()) fail("'allOf' must be a non-empty array");
      if (s["allOf"].size() != 1) unenforceable("allOf", "'allOf' is supported with exactly one schema");  // else: the first
      return visit(s["allOf"][0], depth + 1);
    }
    std::vector<std::string> types;
    if (has("type")) {
      if (s["type"].is_string()) {
        types.push_back(s["type"].get<std::string>());
      } else if (s["type"].is_array() && !s["type"].empty()) {
        for (const json& t : s["type"]) {
          if (!t.is_string()) fail("'type' entries must be strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        fail("'type' must be a string or a non-empty array of strings");
      }
    } else if (has("properties") || has("additionalProperties") || has("required")) {
      types = {"object"};
    } else if (has("items") || has("prefixItems") || has("minItems") || has("maxItems") || has("uniqueItems")) {
      types = {"array"};
    } else if (has("minLength") || has("maxLength") || has("pattern") || has("format")) {
      types = {"string"};
    } else if (has("minimum") || has("maximum") || has("exclusiveMinimum") || has("exclusiveMaximum") || has("multipleOf")) {
      types = {"number"};
    } else {
      return "json-value";
    }
    std::string o;
    for (size_t i = 0; i < types.size(); ++i) o += (i ? " | " : "") + typed(s, types[i], depth);
    return types.size() == 1 ? o : add_rule("types", "(" + o + ")");
  }

  std::string typed(const json& s, const std::string& t, int depth) {
    if (t == "object") return object(s, depth);
    if (t == "array") return array(s, depth);
    if (t == "string") return string(s);
    if (t == "integer") return integer(s);
    if (t == "number") return number(s);
    if (t == "boolean") return "(\"true\" | \"false\")";
    if (t == "null") return "\"null\"";
    fail("unknown type '" + t + "'");
  }

  static int64_t count_of(const json& s, const char* k, int64_t dflt) {
    if (!s.contains(k)) return dflt;
    const json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000)
      fail(std::string("'") + k + "' must be an integer in 0..100000");
    return v.get<int64_t>();
  }

  std::string object(const json& s, int depth) {
    std::vector<std::pair<std::string, std::string>> props;  // name, value expression
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail("'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail("'properties' must be an object");
      for (const auto& [k, v] : s["properties"].items()) props.push_back({k, visit(v, depth + 1)});
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found) fail("required property '" + r + "' is not in 'properties'");
    }
    // Extra keys: only for maps (no declared properties), so they can never repeat a declared key.
    std::string extra_value;
    if (props.empty()) {
      if (!s.contains("additionalProperties") || (s["additionalProperties"].is_boolean() && s["additionalProperties"].get<bool>())) {
        extra_value = "json-value";
      } else if (s["additionalProperties"].is_object()) {
        extra_value = visit(s["additionalProperties"], depth + 1);
      } else if (!s["additionalProperties"].is_boolean()) {
        fail("'additionalProperties' must be a boolean or a schema");
      }
    } else if (s.contains("additionalProperties") && !s["additionalProperties"].is_boolean() &&
               !s["additionalProperties"].is_object()) {
      fail("'additionalProperties' must be a boolean or a schema");
    }
    // rest(i, first): properties i.. given whether one was written already.
    const size_t n = props.size();
    std::vector<std::string> rest_first(n + 1), rest_more(n + 1);
    if (!extra_value.empty()) {
      const std::string kv = "json-string ws \":\" ws " + extra_value + " ws";
      rest_first[n] = add_rule("map", "( " + kv + " ( \",\" ws " + kv + " )* )?");
      rest_more[n] = "";
    }
    for (size_t i = n; i-- > 0;) {
      const std::string kv = lit(json(props[i].first).dump()) + " ws \":\" ws " + props[i].second + " ws";
      const std::string more_after = rest_more[i + 1];
      const std::string with_first = kv + (more_after.empty() ? "" : " " + more_after);
      const std::string with_more = "\",\" ws " + kv + (more_after.empty() ? "" : " " + more_after);
      if (required.count(props[i].first)) {
        rest_first[i] = add_rule("props", with_first);
        rest_more[i] = add_rule("props", with_more);
      } else {
        rest_first[i] = add_rule("props", "( " + with_first + (rest_first[i + 1].empty() ? "" : " | " + rest_first[i + 1]) +
                                              (rest_first[i + 1].empty() ? " )?" : " )"));
        rest_more[i] = add_rule("props", "( " + with_more + (rest_more[i + 1].empty() ? " )?" : " | " + rest_more[i + 1] + " )"));
      }
    }
    const std::string body = rest_first[0];
    return add_rule("object", "\"{\" ws " + (body.empty() ? "" : body + " ") + "\"}\"");
  }

  static bool is_of_type(const json& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    if (t == "number") return v.is_number();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    fail("unknown type '" + t + "'");
  }

  // The values of a const / enum schema that its `type` (when given) admits, without
  // duplicates as JSON Schema compares them (object keys in any order, 1 == 1.0).
  std::vector<json> typed_values(const json& s) {
    json list;
    if (s.contains("const")) {
      list = json::array({s["const"]});
    } else {
      if (!s["enum"].is_array() || s["enum"].empty()) fail("'enum' must be a non-empty array");
      list = s["enum"];
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
      else if (s["type"].is_array())
        for (const json& t : s["type"])
          if (t.is_string()) types.push_back(t.get<std::string>());
    }
    std::vector<json> out;
    std::vector<nlohmann::json> seen;  // unordered objects: key order does not matter
    for (const json& v : list) {
      bool ok = types.empty();
      for (const std::string& t : types) ok = ok || is_of_type(v, t);
      if (!ok) continue;
      const nlohmann::json canon = nlohmann::json::parse(v.dump());
      bool dup = false;
      for (const nlohmann::json& w : seen)
        dup = dup || w == canon || (w.is_number() && canon.is_number() && !w.is_boolean() && w.get<double>() == canon.get<double>());
      if (dup) continue;
      seen.push_back(canon);
      out.push_back(v);
    }
    if (out.empty()) fail(s.contains("const") ? "'const' is not of the schema's type" : "no 'enum' value is of the schema's type");
    return out;
  }

  // uniqueItems over an enum (or const) of at most 10 values: a state per set of values
  // written, so none repeats. Each value is a rule of its own, named by the states.
  std::string unique_array(const json& s) {
    const std::vector<json> values = typed_values(s["items"]);
    const size_t m = values.size();
    std::vector<std::string> value_rule(m);
    for (size_t e = 0; e < m; ++e) value_rule[e] = add_rule("uval", lit(values[e].dump()));
    const int64_t min_items = count_of(s, "minItems", 0);
    const int64_t max_items = std::min<int64_t>(count_of(s, "maxItems", -1) < 0 ? static_cast<int64_t>(m) : count_of(s, "maxItems", -1),
                                                static_cast<int64_t>(m));
    if (min_items > max_items) fail("uniqueItems with minItems above the number of distinct values admits nothing");
    std::vector<std::string> names(size_t{1} << m);
    for (size_t set = names.size(); set-- > 0;) {
      const int64_t count = std::popcount(set);
      if (count > max_items) continue;
      std::vector<std::string> alts;
      if (count >= min_items) alts.push_back("\"]\"");
      if (count < max_items)
        for (size_t e = 0; e < m; ++e) {
          if (set >> e & 1) continue;
          const std::string next = names[set | size_t{1} << e];
          if (next.empty()) continue;
          alts.push_back((count ? "\",\" ws " : "") + value_rule[e] + " ws " + next);
        }
      if (alts.empty()) continue;
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
      names[set] = add_rule("uniq", body);
    }
    if (names[0].empty()) fail("the array bounds admit no value");
    return add_rule("array", "\"[\" ws " + names[0]);
  }

  std::string array(const json& s, int depth) {
    if (s.contains("uniqueItems")) {
      if (!s["uniqueItems"].is_boolean()) fail("'uniqueItems' must be a boolean");
      if (s["uniqueItems"].get<bool>()) {
        bool enum_items = s.contains("items") && s["items"].is_object() && !s.contains("prefixItems") &&
                          (s["items"].contains("enum") || s["items"].contains("const"));
        if (enum_items)  // nothing else may constrain the items (it would go unchecked here)
          for (const auto& [k, v] : s["items"].items())
            enum_items = enum_items && (k == "enum" || k == "const" || k == "type" || kAnnotations.count(k));
        if (enum_items && (s["items"].contains("enum") && s["items"]["enum"].is_array() ? s["items"]["enum"].size() : 1) <= 10)
          return unique_array(s);
        unenforceable("uniqueItems", "'uniqueItems' is supported for items that are an enum or const of at most 10 values");
      }
    }
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail("'prefixItems' must be an array");
      for (const json& p : s["prefixItems"]) prefix.push_back(visit(p, depth + 1));
    }
    std::string item = "json-value";
    bool more = true;
    if (s.contains("items")) {
      if (s["items"].is_boolean()) {
        more = s["items"].get<bool>();
      } else if (s["items"].is_object()) {
        item = visit(s["items"], depth + 1);
      } else {
        fail("'items' must be a schema or a boolean (use prefixItems for tuples)");
      }
    }
    const int64_t min_items = count_of(s, "minItems", 0);
    int64_t max_items = count_of(s, "maxItems", -1);
    if (!more) max_items = max_items < 0 ? static_cast<int64_t>(prefix.size()) : std::min<int64_t>(max_items, static_cast<int64_t>(prefix.size()));
    if (max_items >= 0 && max_items < static_cast<int64_t>(prefix.size())) prefix.resize(static_cast<size_t>(max_items));
    const auto np = static_cast<int64_t>(prefix.size());
    if (max_items >= 0 && max_items < min_items) fail("maxItems is below minItems");
    if (!more && min_items > np) fail("minItems asks for more items than prefixItems allows");
    // Elements in order: prefix[0..], then `item` repeated. Element k is written after "," when k > 0.
    // Build from the back: tail(k) = what may follow once k elements are written.
    std::string tail;  // after the prefix: items k = np.. with bounds
    const int64_t min_rest = std::max<int64_t>(0, min_items - np);
    const std::string sep_item = "\",\" ws " + item + " ws";
    if (max_items < 0 || max_items > np) {
      std::string reps = "(" + sep_item + ")";
      if (max_items < 0) {
        tail = min_rest > 0 ? reps + "{" + std::to_string(min_rest) + ",}" : reps + "*";
      } else {
        tail = reps + "{" + std::to_string(min_rest) + "," + std::to_string(max_items - np) + "}";
      }
    }
    // The first element has no comma; when np == 0 the first item comes from `item`.
    std::string body;
    if (np > 0) {
      std::string seq = prefix[0] + " ws";
      // prefix elements beyond min_items may be left out from the end
      std::vector<std::string> parts;
      for (int64_t k = 1; k < np; ++k) parts.push_back("\",\" ws " + prefix[static_cast<size_t>(k)] + " ws");
      // optional nesting for prefix elements at index >= min_items
      std::string inner = tail;
      for (int64_t k = np - 1; k >= 1; --k) {
        const std::string p = parts[static_cast<size_t>(k - 1)] + (inner.empty() ? "" : " " + inner);
        inner = k >= min_items ? "( " + p + " )?" : p;
      }
      // if items may exist beyond the prefix only after all of it, `inner` already ends with tail
      body = seq + (inner.empty() ? "" : " " + inner);
      if (min_items == 0) body = "( " + body + " )?";
    } else if (max_items != 0) {
      const std::string first = item + " ws";
      std::string rest;
      if (max_items < 0) {
        rest = min_items > 1 ? "(" + sep_item + "){" + std::to_string(min_items - 1) + ",}" : "(" + sep_item + ")*";
      } else {
        rest = "(" + sep_item + "){" + std::to_string(std::max<int64_t>(0, min_items - 1)) + "," +
               std::to_string(max_items - 1) + "}";
      }
      body = first + " " + rest;
      if (min_items == 0) body = "( " + body + " )?";
    }
    return add_rule("array", "\"[\" ws " + (body.empty() ? "" : body + " ") + "\"]\"");
  }

  std::string string(const json& s) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    const int64_t min_len = count_of(s, "minLength", 0), max_len = count_of(s, "maxLength", -1);
    if (max_len >= 0 && max_len < min_len) fail("maxLength is below minLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail("'pattern' must be a string");
      if (s.contains("format")) unenforceable("format", "'pattern' together with 'format' is not supported");
      try {
        return add_rule("pattern", "\"\\\"\" " + pattern_to_gbnf(s["pattern"].get<std::string>(), min_len, max_len,
                                                        [this](const std::string& k, const std::string& why) { unenforceable(k, why); }) + " \"\\\"\"");
      } catch (const GrammarError& e) {
        // A regex the compiler cannot take: dropped unless strict (the string keeps its lengths).
        if (o_.strict || std::string_view(e.what()).rfind("json_schema: pattern:", 0) != 0) throw;
        unenforceable("pattern", e.what());
      }
    } else if (s.contains("format")) {
      if (!s["format"].is_string()) fail("'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      std::string body;
      if (f == "date") {
        body = "date";
      } else if (f == "time") {
        body = "time";
      } else if (f == "date-time") {
        body = "date \"T\" time";
      } else if (f == "uuid") {
        body = "hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}";
      } else if (f == "email") {
        // RFC 5321 syntax without its length limits (validators check none): a bounded part
        // would give every character position its own vocabulary walk (matcher.h).
        body = "[a-zA-Z0-9_+] [a-zA-Z0-9._+-]* \"@\" [a-zA-Z0-9] [a-zA-Z0-9-]* ( \".\" [a-zA-Z0-9] [a-zA-Z0-9-]* )* "
               "\".\" [a-zA-Z] [a-zA-Z]+";
      } else {
        unenforceable("format", "unsupported string format '" + f + "'");
      }
      if (!body.empty()) {
        if (has_len) unenforceable(s.contains("minLength") ? "minLength" : "maxLength", "'format' together with lengths is not supported");
        return add_rule("format", "\"\\\"\" " + body + " \"\\\"\"");
      }
    }
    if (!has_len) return "json-string";
    const int64_t lo = min_len, hi = max_len;
    const std::string rep = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return add_rule("string", "\"\\\"\" json-char" + rep + " \"\\\"\"");
  }

  // The tightest bound on one side of a number: minimum / exclusiveMinimum (a number, or draft
  // 4's boolean modifier) or maximum / exclusiveMaximum, with whether it is inclusive.
  static std::optional<std::pair<double, bool>> tightest_bound(const json& s, const char* k, const char* ek, bool lower) {
    std::optional<std::pair<double, bool>> b;
    const bool draft4 = s.contains(ek) && s[ek].is_boolean();
    for (const char* key : {k, ek}) {
      if (!s.contains(key) || (key == ek && draft4)) continue;
      const json& v = s[key];
      if (!v.is_number()) fail(std::string("'") + key + "' must be a number");
      const double d = v.get<double>();
      if (!std::isfinite(d)) fail(std::string("'") + key + "' must be finite");
      const bool incl = key == k && !(draft4 && s[ek].get<bool>());
      if (!b || (lower ? (d > b->first || (d == b->first && !incl)) : (d < b->first || (d == b->first && !incl)))) b = {{d, incl}};
    }
    return b;
  }

  std::string integer(const json& s) {
    auto bound = [&](const char* k, const char* ek, bool lower) -> std::optional<int64_t> {
      const auto b = tightest_bound(s, k, ek, lower);
      if (!b) return std::nullopt;
      // Beyond the admitted 15 digits a bound only clamps (JavaScript's MAX_SAFE_INTEGER is a
      // common maximum); an empty clamped range is the error below.
      const double dc = std::clamp(b->first, -2e15, 2e15);
      int64_t x = static_cast<int64_t>(lower ? std::ceil(dc) : std::floor(dc));
      if (!b->second && static_cast<double>(x) == dc) x += lower ? 1 : -1;
      return x;
    };
    const auto lo = bound("minimum", "exclusiveMinimum", true);
    const auto hi = bound("maximum", "exclusiveMaximum", false);
    const int64_t a = std::max<int64_t>(lo.value_or(-kIntLimit), -kIntLimit);
    const int64_t b = std::min<int64_t>(hi.value_or(kIntLimit), kIntLimit);
    if (a > b) fail("the integer bounds admit no value");
    int64_t k = 1;
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!m.is_number() || !(m.get<double>() > 0) || !std::isfinite(m.get<double>())) fail("'multipleOf' must be a positive number");
      const double d = m.get<double>();
      if (d == std::floor(d) && d <= 9e15) {
        k = static_cast<int64_t>(d);
      } else if (int e = 0; std::frexp(d, &e) == 0.5) {
        k = 1;  // 0.5, 0.25, ...: x / d is exact, so every integer is a multiple (not so for 0.1)
      } else {
        unenforceable("multipleOf", "'multipleOf' " + m.dump() + " on an integer is supported for whole numbers and powers of 1/2");
      }
    }
    if (k > 1) return multiples(a, b, k);
    if (!lo && !hi) return "json-int";
    return add_rule("int", int_range(a, b));
  }

  // Integers in [a, b] that are multiples of k > 1: listed when there are few; for a power of
  // ten, a range of quotients followed by its zeros; for k <= 20, digits tracked with their
  // remainder modulo k.
  std::string multiples(int64_t a, int64_t b, int64_t k) {
    auto rule = [this](const std::string& hint, const std::string& body) { return add_rule(hint, body); };
    auto floor_div = [](int64_t x, int64_t y) { return x / y - ((x % y != 0) && ((x < 0) != (y < 0))); };
    const int64_t qa = -floor_div(-a, k), qb = floor_div(b, k);
    if (qa > qb) fail("the integer bounds admit no multiple of " + std::to_string(k));
    std::vector<std::string> alts;
    if (qb - qa < 1000) {
      for (int64_t q = qa; q <= qb; ++q) alts.push_back(lit(std::to_string(q * k)));
    } else if (std::string ks = std::to_string(k); ks.find_first_not_of('0', 1) == std::string::npos && ks[0] == '1') {
      const std::string zeros = " \"" + ks.substr(1) + "\"";
      if (qa < 0) alts.push_back(int_range(qa, std::min<int64_t>(qb, -1)) + zeros);
      if (qa <= 0 && qb >= 0) alts.push_back("\"0\"");
      if (qb > 0) alts.push_back(int_range(std::max<int64_t>(qa, 1), qb) + zeros);
    } else if (k <= 20) {
      if (a < 0) {
        const std::string neg = digits::mod_range(static_cast<uint64_t>(b < 0 ? -b : 1), static_cast<uint64_t>(-a), static_cast<int>(k), rule);
        if (!neg.empty()) alts.push_back("\"-\" " + neg);
      }
      if (b >= 0) {
        const std::string pos = digits::mod_range(static_cast<uint64_t>(std::max<int64_t>(a, 0)), static_cast<uint64_t>(b), static_cast<int>(k), rule);
        if (!pos.empty()) alts.push_back(pos);
      }
    } else {
      unenforceable("multipleOf", "'multipleOf' " + std::to_string(k) + " over more than 1000 values is supported for powers of ten and up to 20");
      return add_rule("int", int_range(a, b));
    }
    if (alts.empty()) fail("the integer bounds admit no multiple of " + std::to_string(k));
    return add_rule("mult", alternation(alts));
  }

  std::string number(const json& s) {
    auto bound = [&](const char* k, const char* ek, bool lower) { return tightest_bound(s, k, ek, lower); };
    const auto lo = bound("minimum", "exclusiveMinimum", true);
    const auto hi = bound("maximum", "exclusiveMaximum", false);
    if (s.contains("multipleOf")) {
      if (!s["multipleOf"].is_number() || !(s["multipleOf"].get<double>() > 0)) fail("'multipleOf' must be a positive number");
      unenforceable("multipleOf", "'multipleOf' on a non-integer number is not supported (use \"type\": \"integer\")");
    }
    if (!lo && !hi) return "json-number";
    if (lo && hi && (lo->first > hi->first || (lo->first == hi->first && !(lo->second && hi->second))))
      fail("the number bounds admit no value");
    auto rule = [this](const std::string& hint, const std::string& body) { return add_rule(hint, body); };
    std::vector<std::string> alts;
    // x >= 0 (never "-0")
    if (!hi || hi->first > 0 || (hi->first == 0 && hi->second)) {
      DecBound a{Dec{}, true};
      if (lo && lo->first >= 0) a = DecBound{digits::dec_of(lo->first), lo->second};
      std::optional<DecBound> b;
      if (hi) b = DecBound{digits::dec_of(hi->first), hi->second};
      const std::string e = digits::decimal_range(a, b, rule);
      if (!e.empty()) alts.push_back(e);
    }
    // x < 0: "-" and a magnitude in (max(0, -hi), -lo]
    if (!lo || lo->first < 0) {
      DecBound a{Dec{}, false};
      if (hi && hi->first < 0) a = DecBound{digits::dec_of(hi->first), hi->second};
      std::optional<DecBound> b;
      if (lo) b = DecBound{digits::dec_of(lo->first), lo->second};
      const std::string e = digits::decimal_range(a, b, rule);
      if (!e.empty()) alts.push_back("\"-\" " + e);
    }
    // Negative zero reads as 0 (and -0.0 == 0).
    const bool zero = (!lo || lo->first < 0 || (lo->first == 0 && lo->second)) && (!hi || hi->first > 0 || (hi->first == 0 && hi->second));
    if (zero) alts.push_back("\"-0\" ( \".\" \"0\"{1,14} )?");
    if (alts.empty()) fail("the number bounds admit no value of at most 15 digits");
    return add_rule("num", alternation(alts));
  }

 private:
  const json& root_;
  SchemaOptions o_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> by_body_;
  size_t bytes_ = 0;  // of the rules added so far
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string_view json_schema_common_gbnf() {
  static constexpr std::string_view kCommon = R"gbnf(ws ::= [ \t]{0,8} | "\n" [ \t]{0,16}
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int ::= "-"? ( "0" | [1-9] [0-9]{0,14} )
json-number ::= json-int ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
hex ::= [0-9a-fA-F]
date ::= [1-9] [0-9]{3} "-" ( ( "01" | "03" | "05" | "07" | "08" | "10" | "12" ) "-" day31 | ( "04" | "06" | "09" | "11" ) "-" day30 | "02" "-" day28 )
day28 ::= "0" [1-9] | "1" [0-9] | "2" [0-8]
day30 ::= day28 | "29" | "30"
day31 ::= day30 | "31"
time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
)gbnf";
  return kCommon;
}

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const SchemaOptions& opts) {
  std::string g = Compiler(schema, opts).run();
  if (opts.with_common) g += json_schema_common_gbnf();
  return g;
}

}  // namespace triad::grammar
