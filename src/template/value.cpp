#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace triad::tmpl {

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), f_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.generator_ = true;  // the flag marks Markup for strings
  return v;
}
Value Value::generator(List items) {
  Value v = list(std::move(items));
  v.generator_ = true;
  return v;
}
Value Value::tuple(List items) {
  Value v = list(std::move(items));
  v.tuple_ = true;
  return v;
}
Value Value::dict() {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}
Value Value::namespace_object() {
  Value v = dict();
  v.dict_->is_namespace = true;
  return v;
}
Value Value::function(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = dict();
      for (const auto& [k, e] : j.items()) d.dict_->set(Value(k), from_json(e));
      return d;
    }
    default: return none();  // binary / discarded: not produced by the JSON parser
  }
}

bool Value::is_namespace() const { return kind_ == Kind::kDict && dict_->is_namespace; }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return generator_ || !list_->empty();
    case Kind::kDict: return dict_->is_namespace || !dict_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp = std::stoi(sci.substr(e + 1));
  bool neg = false;
  if (mant[0] == '-') {
    neg = true;
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp >= 0) {
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return neg ? "-" + out : out;
}

std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return s_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return python_float_repr(f_);
    case Kind::kString: return python_string_repr(s_);
    case Kind::kList: {
      if (generator_) return "<generator object>";
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (tuple_) return out + (list_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      if (dict_->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i) out += ", ";
        out += dict_->items[i].first.repr() + ": " + dict_->items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::kFunction: return "<function " + s_ + ">";
  }
  return "";
}

namespace {

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void json_dump(const Value& v, int indent, bool sort_keys, int level, std::string& out) {
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_number();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
      return;
    }
    case Value::Kind::kString: json_string(v.as_string(), out); return;
    case Value::Kind::kList: {
      if (v.is_generator()) template_fail("tojson: Object of type generator is not JSON serializable");
      const List& l = v.as_list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_dump(l[i], indent, sort_keys, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.as_dict().items) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first.str() < b->first.str(); });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(level + 1);
        const Value& k = items[i]->first;
        if (k.is_string()) {
          json_string(k.as_string(), out);
        } else if (k.is_bool() || k.is_none() || k.is_number()) {
          std::string ks;
          json_dump(k, -1, false, 0, ks);
          json_string(ks, out);
        } else {
          template_fail("tojson: keys must be str, int, float, bool or None, not ", k.type_name());
        }
        out += ": ";
        json_dump(items[i]->second, indent, sort_keys, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
    case Value::Kind::kFunction: template_fail("tojson: a function is not JSON serializable");
  }
}

}  // namespace

std::string Value::to_json(int indent, bool sort_keys) const {
  std::string out;
  json_dump(*this, indent, sort_keys, 0, out);
  return out;
}

nlohmann::ordered_json Value::to_json_value() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return nullptr;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_;
    case Kind::kFloat: return f_;
    case Kind::kString: return s_;
    case Kind::kList: {
      auto a = nlohmann::ordered_json::array();
      for (const Value& e : *list_) a.push_back(e.to_json_value());
      return a;
    }
    case Kind::kDict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, e] : dict_->items) o[k.str()] = e.to_json_value();
      return o;
    }
    case Kind::kFunction: return nullptr;
  }
  return nullptr;
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int()) return i_ == o.i_;
    return as_number() == o.as_number();
  }
  // Python: True == 1; bools compare as ints with numbers.
  if (is_bool() && o.is_number()) return Value(static_cast<int64_t>(b_)).equals(o);
  if (o.is_bool() && is_number()) return o.equals(*this);
  if (kind_ != o.kind_) return false;
  if (is_generator() || o.is_generator()) return list_ == o.list_;
  if (kind_ == Kind::kList && tuple_ != o.tuple_) return false;
  if (kind_ == Kind::kString) return s_ == o.s_;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return b_ == o.b_;
    case Kind::kString: return s_ == o.s_;
    case Kind::kList: {
      if (list_ == o.list_) return true;
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i)
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (dict_ == o.dict_) return true;
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, e] : dict_->items) {
        const Value* other = o.dict_->find(k);
        if (other == nullptr || !e.equals(*other)) return false;
      }
      return true;
    }
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

int64_t Value::length() const {
  switch (kind_) {
    case Kind::kString: {
      int64_t n = 0;
      for (unsigned char c : s_) n += (c & 0xC0) != 0x80;  // code points
      return n;
    }
    case Kind::kList:
      if (generator_) template_fail("object of type 'generator' has no len()");
      return static_cast<int64_t>(list_->size());
    case Kind::kDict: return static_cast<int64_t>(dict_->items.size());
    case Kind::kUndefined: return 0;
    default: template_fail("object of type '", type_name(), "' has no len()");
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return generator_ ? "generator" : "list";
    case Kind::kDict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

const Value* Dict::find(const Value& key) const {
  for (const auto& kv : items)
    if (kv.first.equals(key)) return &kv.second;
  return nullptr;
}
Value* Dict::find(const Value& key) {
  for (auto& kv : items)
    if (kv.first.equals(key)) return &kv.second;
  return nullptr;
}
const Value* Dict::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first.is_string() && kv.first.as_string() == key) return &kv.second;
  return nullptr;
}
void Dict::set(const Value& key, Value v) {
  if (Value* e = find(key)) {
    *e = std::move(v);
    return;
  }
  items.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t i, std::string_view name, Value fallback) const {
  if (i < positional.size()) return positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return fallback;
}
bool CallArgs::has(size_t i, std::string_view name) const {
  if (i < positional.size()) return true;
  for (const auto& kv : keyword)
    if (kv.first == name) return true;
  return false;
}

}  // namespace triad::tmpl
