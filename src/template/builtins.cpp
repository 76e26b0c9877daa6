// Built-ins: globals (range, namespace, dict, raise_exception, strftime_now), filters, tests,
// and the string / dict / list methods chat templates call. Semantics follow Python and jinja2;
// list and dict mutators (append, pop, update, ...) raise, as in transformers' immutable
// sandbox.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include "template/interpreter.h"

namespace triad::tmpl {

int value_compare(const Value& a, const Value& b, int line);          // interpreter.cpp
bool value_contains(const Value& container, const Value& item, int line);

namespace {

bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int64_t int_arg(const Value& v, const char* what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  template_fail(what, " must be an integer, not ", v.type_name());
}

std::string str_arg(const Value& v, const char* what) {
  if (!v.is_string()) template_fail(what, " must be a string, not ", v.type_name());
  return v.as_string();
}

std::vector<std::string> py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
        out.push_back(s.substr(i, e - i));
        return out;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string d = str_arg(sep, "split separator");
  if (d.empty()) template_fail("split: empty separator");
  size_t i = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t j = s.find(d, i);
    if (j == std::string::npos) break;
    out.push_back(s.substr(i, j - i));
    i = j + d.size();
  }
  out.push_back(s.substr(i));
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, -1);
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<std::string> parts = py_split(s, sep, -1);
    if (static_cast<int64_t>(parts.size()) <= maxsplit + 1) return parts;
    // Re-join the leading parts: find where the last maxsplit words start.
    size_t e = s.size();
    std::vector<std::string> tail;
    for (int64_t k = 0; k < maxsplit; ++k) {
      while (e > 0 && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
      size_t b = e;
      while (b > 0 && !is_py_space(static_cast<unsigned char>(s[b - 1]))) --b;
      tail.insert(tail.begin(), s.substr(b, e - b));
      e = b;
    }
    size_t b = 0;
    while (b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    tail.insert(tail.begin(), s.substr(b, e - b));
    return tail;
  }
  const std::string d = str_arg(sep, "rsplit separator");
  if (d.empty()) template_fail("rsplit: empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  for (int64_t k = 0; k < maxsplit; ++k) {
    if (end < d.size()) break;
    const size_t j = s.rfind(d, end - d.size());
    if (j == std::string::npos) break;
    out.insert(out.begin(), s.substr(j + d.size(), end - j - d.size()));
    end = j;
  }
  out.insert(out.begin(), s.substr(0, end));
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                       size_t limit) {
  std::string out;
  size_t i = 0;
  int64_t n = 0;
  if (from.empty()) {
    for (size_t k = 0; k <= s.size(); ++k) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (k < s.size()) out += s[k];
      if (out.size() > limit) template_fail("replace: result too large");
    }
    return out;
  }
  for (;;) {
    const size_t j = (count >= 0 && n >= count) ? std::string::npos : s.find(from, i);
    if (j == std::string::npos) {
      out += s.substr(i);
      return out;
    }
    out += s.substr(i, j - i);
    out += to;
    if (out.size() > limit) template_fail("replace: result too large");
    i = j + from.size();
    ++n;
  }
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string py_capitalize(const std::string& s) {
  std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

Value list_of_strings(const std::vector<std::string>& v) {
  List out;
  for (const auto& s : v) out.emplace_back(s);
  return Value::list(std::move(out));
}

Value bound(const std::string& name, Value self, Value (*fn)(const Value&, CallArgs&)) {
  return Value::function(name, [self, fn](Interpreter&, CallArgs& a) { return fn(self, a); });
}

bool starts_or_ends(const Value& self, CallArgs& a, bool starts) {
  const std::string& s = self.as_string();
  const Value p = a.get(0, "prefix");
  List options = p.is_list() ? p.as_list() : List{p};
  for (const Value& o : options) {
    const std::string x = str_arg(o, starts ? "startswith argument" : "endswith argument");
    if (starts ? s.compare(0, x.size(), x) == 0
               : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0))
      return true;
  }
  return false;
}

Value string_method(const Value& self, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return Value::function(name, [self, l, r](Interpreter&, CallArgs& a) {
      return Value(py_strip(self.as_string(), a.get(0, "chars", Value::none()), l, r));
    });
  }
  if (name == "split")
    return bound(name, self, [](const Value& s, CallArgs& a) {
      const Value ms = a.get(1, "maxsplit", Value(int64_t{-1}));
      return list_of_strings(py_split(s.as_string(), a.get(0, "sep", Value::none()), int_arg(ms, "maxsplit")));
    });
  if (name == "rsplit")
    return bound(name, self, [](const Value& s, CallArgs& a) {
      const Value ms = a.get(1, "maxsplit", Value(int64_t{-1}));
      return list_of_strings(py_rsplit(s.as_string(), a.get(0, "sep", Value::none()), int_arg(ms, "maxsplit")));
    });
  if (name == "splitlines")
    return bound(name, self, [](const Value& s, CallArgs&) {
      std::vector<std::string> out;
      const std::string& t = s.as_string();
      size_t i = 0;
      while (i < t.size()) {
        size_t j = i;
        while (j < t.size() && t[j] != '\n' && t[j] != '\r') ++j;
        out.push_back(t.substr(i, j - i));
        if (j < t.size() && t[j] == '\r' && j + 1 < t.size() && t[j + 1] == '\n') ++j;
        i = j + 1;
      }
      return list_of_strings(out);
    });
  if (name == "startswith")
    return bound(name, self, [](const Value& s, CallArgs& a) { return Value(starts_or_ends(s, a, true)); });
  if (name == "endswith")
    return bound(name, self, [](const Value& s, CallArgs& a) { return Value(starts_or_ends(s, a, false)); });
  if (name == "upper")
    return bound(name, self, [](const Value& s, CallArgs&) { return Value(ascii_map(s.as_string(), [](int c) { return std::toupper(c); })); });
  if (name == "lower")
    return bound(name, self, [](const Value& s, CallArgs&) { return Value(ascii_map(s.as_string(), [](int c) { return std::tolower(c); })); });
  if (name == "capitalize")
    return bound(name, self, [](const Value& s, CallArgs&) { return Value(py_capitalize(s.as_string())); });
  if (name == "title")
    return bound(name, self, [](const Value& s, CallArgs&) { return Value(py_title(s.as_string())); });
  if (name == "replace")
    return Value::function(name, [self](Interpreter& in, CallArgs& a) {
      const Value c = a.get(2, "count", Value(int64_t{-1}));
      return Value(py_replace(self.as_string(), str_arg(a.get(0, "old"), "replace old"),
                              str_arg(a.get(1, "new"), "replace new"), int_arg(c, "count"),
                              in.limits().max_output_bytes));
    });
  if (name == "find" || name == "index" || name == "rfind")
    return Value::function(name, [self, name](Interpreter&, CallArgs& a) {
      const std::string x = str_arg(a.get(0, "sub"), "find argument");
      const size_t j = name == "rfind" ? self.as_string().rfind(x) : self.as_string().find(x);
      if (j == std::string::npos) {
        if (name == "index") template_fail("substring not found");
        return Value(int64_t{-1});
      }
      return Value(static_cast<int64_t>(j));
    });
  if (name == "count")
    return bound(name, self, [](const Value& s, CallArgs& a) {
      const std::string x = str_arg(a.get(0, "sub"), "count argument");
      if (x.empty()) return Value(s.length() + 1);
      int64_t n = 0;
      for (size_t i = s.as_string().find(x); i != std::string::npos; i = s.as_string().find(x, i + x.size())) ++n;
      return Value(n);
    });
  if (name == "join")
    return Value::function(name, [self](Interpreter& in, CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& v : in.iterate(a.get(0, "iterable"), 0)) {
        if (!first) out += self.as_string();
        first = false;
        out += str_arg(v, "join item");
        in.check_size(out.size());
      }
      return Value(std::move(out));
    });
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower")
    return Value::function(name, [self, name](Interpreter&, CallArgs&) {
      const std::string& s = self.as_string();
      if (s.empty()) return Value(false);
      bool ok = true, cased = false;
      for (unsigned char c : s) {
        if (name == "isdigit") ok = ok && std::isdigit(c);
        else if (name == "isalpha") ok = ok && std::isalpha(c);
        else if (name == "isalnum") ok = ok && std::isalnum(c);
        else if (name == "isspace") ok = ok && is_py_space(c);
        else if (name == "isupper") { ok = ok && !std::islower(c); cased = cased || std::isupper(c); }
        else { ok = ok && !std::isupper(c); cased = cased || std::islower(c); }
      }
      if (name == "isupper" || name == "islower") ok = ok && cased;
      return Value(ok);
    });
  if (name == "format")
    return Value::function(name, [self](Interpreter& in, CallArgs& a) {
      // str.format with {} / {0} / {name} fields (no format specs).
      const std::string& f = self.as_string();
      std::string out;
      size_t auto_idx = 0;
      for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
        if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
        if (f[i] != '{') { out += f[i]; continue; }
        const size_t j = f.find('}', i);
        if (j == std::string::npos) template_fail("format: single '{' in the format string");
        const std::string field = f.substr(i + 1, j - i - 1);
        Value v;
        if (field.empty()) v = a.get(auto_idx++, "");
        else if (std::all_of(field.begin(), field.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          v = a.get(static_cast<size_t>(std::stoul(field)), "");
        else v = a.get(SIZE_MAX, field);
        if (v.is_undefined()) template_fail("format: no argument for field '{", field, "}'");
        out += v.str();
        in.check_size(out.size());
        i = j;
      }
      return Value(std::move(out));
    });
  return Value::undefined(name);
}

Value dict_method(const Value& self, const std::string& name) {
  if (name == "get")
    return bound(name, self, [](const Value& d, CallArgs& a) {
      const Value* v = d.as_dict().find(a.get(0, "key"));
      return v ? *v : a.get(1, "default", Value::none());
    });
  if (name == "items")
    return bound(name, self, [](const Value& d, CallArgs&) {
      List out;
      for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::tuple({k, v}));
      return Value::list(std::move(out));
    });
  if (name == "keys")
    return bound(name, self, [](const Value& d, CallArgs&) {
      List out;
      for (const auto& kv : d.as_dict().items) out.push_back(kv.first);
      return Value::list(std::move(out));
    });
  if (name == "values")
    return bound(name, self, [](const Value& d, CallArgs&) {
      List out;
      for (const auto& kv : d.as_dict().items) out.push_back(kv.second);
      return Value::list(std::move(out));
    });
  if (name == "copy")
    return bound(name, self, [](const Value& d, CallArgs&) {
      Value c = Value::dict();
      c.as_dict().items = d.as_dict().items;
      return c;
    });
  return Value::undefined(name);
}

bool is_mutator(const std::string& name) {
  static const char* names[] = {"append", "pop", "update", "extend", "insert", "remove", "clear",
                                "setdefault", "popitem", "sort", "reverse", "__setitem__"};
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value unsafe_method(const Value& self, const std::string& name) {
  const std::string type = self.type_name();
  return Value::function(name, [type, name](Interpreter&, CallArgs&) -> Value {
    template_fail("access to attribute '", name, "' of '", type, "' object is unsafe (templates cannot modify values)");
  });
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    if (left)
      while (b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    if (right)
      while (e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
  } else {
    const std::string set = str_arg(chars, "strip characters");
    if (left)
      while (b < e && set.find(s[b]) != std::string::npos) ++b;
    if (right)
      while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  }
  return s.substr(b, e - b);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name, int line) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      template_fail("line ", line, ": '", obj.name().empty() ? "value" : obj.name(), "' is undefined (reading '.",
                    name, "')");
    case Value::Kind::kDict: {
      if (obj.is_namespace()) {
        const Value* v = obj.as_dict().find(std::string_view(name));
        return v ? *v : Value::undefined(name);
      }
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      if (is_mutator(name)) return unsafe_method(obj, name);
      const Value* v = obj.as_dict().find(std::string_view(name));
      return v ? *v : Value::undefined(name);
    }
    case Value::Kind::kString: return string_method(obj, name);
    case Value::Kind::kList:
      if (is_mutator(name)) return unsafe_method(obj, name);
      if (name == "index" || name == "count")
        return Value::function(name, [obj, name](Interpreter&, CallArgs& a) -> Value {
          const Value x = a.get(0, "value");
          int64_t n = 0;
          for (size_t i = 0; i < obj.as_list().size(); ++i) {
            if (!obj.as_list()[i].equals(x)) continue;
            if (name == "index") return Value(static_cast<int64_t>(i));
            ++n;
          }
          if (name == "index") template_fail("value is not in list");
          return Value(n);
        });
      return Value::undefined(name);
    default: return Value::undefined(name);
  }
}

// ---- Tests.

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& a, int line) {
  auto arg = [&]() {
    if (a.positional.empty()) template_fail("line ", line, ": test '", name, "' needs an argument");
    return a.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence")
    return (v.is_list() && !v.is_generator()) || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    const int64_t x = int_arg(v, "odd/even test value");
    return (x % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = int_arg(arg(), "divisibleby argument");
    if (d == 0) template_fail("line ", line, ": divisibleby 0");
    return int_arg(v, "divisibleby value") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(arg());
  if (name == "ne" || name == "!=") return !v.equals(arg());
  if (name == "lt" || name == "lessthan" || name == "<") return value_compare(v, arg(), line) < 0;
  if (name == "le" || name == "<=") return value_compare(v, arg(), line) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return value_compare(v, arg(), line) > 0;
  if (name == "ge" || name == ">=") return value_compare(v, arg(), line) >= 0;
  if (name == "in") return value_contains(arg(), v, line);
  if (name == "sameas") {
    const Value o = arg();
    if (v.is_list() && o.is_list()) return &v.as_list() == &o.as_list();
    if (v.is_dict() && o.is_dict()) return &v.as_dict() == &o.as_dict();
    return v.kind() == o.kind() && v.equals(o);
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    bool cased = false;
    for (unsigned char c : v.as_string()) {
      if (name == "lower" ? std::isupper(c) : std::islower(c)) return false;
      cased = cased || std::isalpha(c);
    }
    return cased;
  }
  template_fail("line ", line, ": no test named '", name, "'");
}

// ---- Filters.

namespace {

std::string indent_text(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t i = 0;
  bool line_start = true;
  bool is_first = true;
  while (i <= s.size()) {
    const size_t j = s.find('\n', i);
    const std::string line_text = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
    const bool empty = line_text.empty() ||
                       std::all_of(line_text.begin(), line_text.end(), [](char c) { return is_py_space(static_cast<unsigned char>(c)); });
    if (line_start && ((is_first && first) || (!is_first && (blank || !empty)))) out += pad;
    out += line_text;
    is_first = false;
    if (j == std::string::npos) break;
    out += '\n';
    i = j + 1;
  }
  return out;
}

Value attribute_of(Interpreter& in, const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t i = 0;
  while (i <= path.size()) {
    const size_t j = path.find('.', i);
    const std::string part = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    cur = numeric ? in.get_item(cur, Value(static_cast<int64_t>(std::stoll(part))), line) : in.get_item(cur, Value(part), line);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return cur;
}

}  // namespace

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& a, int line) {
  step();
  if (name == "safe" || name == "e" || name == "escape" || name == "forceescape") {
    if (name == "safe") return Value::markup(v.str());
    if (v.is_markup() && name != "forceescape") return v;
    std::string out;
    for (char c : v.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value::markup(std::move(out));
  }
  if (name == "tojson") {
    const Value ind = a.get(0, "indent", Value::none());
    const Value sort = a.get(SIZE_MAX, "sort_keys", Value(false));
    const int indent = ind.is_none() || ind.is_undefined() ? -1 : static_cast<int>(std::clamp<int64_t>(int_arg(ind, "indent"), 0, 64));
    std::string s = v.to_json(indent, sort.truthy());
    check_size(s.size());
    return Value(std::move(s));
  }
  if (name == "string") return v.is_string() ? v : Value(v.str());  // Markup stays Markup
  if (name == "trim") return Value(py_strip(v.str(), a.get(0, "chars", Value::none()), true, true));
  if (name == "upper") return Value(ascii_map(v.str(), [](int c) { return std::toupper(c); }));
  if (name == "lower") return Value(ascii_map(v.str(), [](int c) { return std::tolower(c); }));
  if (name == "capitalize") return Value(py_capitalize(v.str()));
  if (name == "title") return Value(py_title(v.str()));
  if (name == "length" || name == "count") return Value(v.length());
  if (name == "default" || name == "d") {
    const bool boolean = a.get(1, "boolean", Value(false)).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(std::string()));
    return v;
  }
  if (name == "list") return Value::list(iterate(v, line));  // also materializes generators
  if (name == "first" || name == "last") {
    List items = iterate(v, line);
    if (items.empty()) return Value::undefined(name);
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      List chars = iterate(v, line);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value(std::move(out));
    }
    List items = iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));
  }
  if (name == "join") {
    const std::string sep = a.get(0, "d", Value(std::string())).str();
    const Value attr = a.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const Value& e : iterate(v, line)) {
      if (!first) out += sep;
      first = false;
      out += (attr.is_string() ? attribute_of(*this, e, attr.as_string(), line) : e).str();
      check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) template_fail("line ", line, ": items filter needs a mapping, not ", v.type_name());
    List out;
    for (const auto& [k, e] : v.as_dict().items) out.push_back(Value::tuple({k, e}));
    return Value::generator(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) template_fail("line ", line, ": dictsort needs a mapping, not ", v.type_name());
    const bool case_sensitive = a.get(0, "case_sensitive", Value(false)).truthy();
    const std::string by = a.get(1, "by", Value("key")).str();
    const bool reverse = a.get(2, "reverse", Value(false)).truthy();
    std::vector<std::pair<Value, Value>> items = v.as_dict().items;
    auto key = [&](const std::pair<Value, Value>& kv) {
      Value k = by == "value" ? kv.second : kv.first;
      if (!case_sensitive && k.is_string()) k = Value(ascii_map(k.as_string(), [](int c) { return std::tolower(c); }));
      return k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
      const int c = value_compare(key(x), key(y), line);
      return reverse ? c > 0 : c < 0;
    });
    List out;
    for (auto& kv : items) out.push_back(Value::tuple({kv.first, kv.second}));
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    const bool reverse = a.get(0, "reverse", Value(false)).truthy();
    const bool case_sensitive = a.get(1, "case_sensitive", Value(false)).truthy();
    const Value attr = a.get(2, "attribute", Value::none());
    List items = iterate(v, line);
    auto key = [&](const Value& e) {
      Value k = attr.is_string() ? attribute_of(*this, e, attr.as_string(), line) : e;
      if (!case_sensitive && k.is_string()) k = Value(ascii_map(k.as_string(), [](int c) { return std::tolower(c); }));
      return k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const int c = value_compare(key(x), key(y), line);
      return reverse ? c > 0 : c < 0;
    });
    step(items.size());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& e : iterate(v, line)) {
      bool seen = false;
      for (const Value& o : out) seen = seen || o.equals(e);
      if (!seen) out.push_back(e);
      step(out.size());
    }
    return Value::generator(std::move(out));
  }
  if (name == "min" || name == "max") {
    List items = iterate(v, line);
    if (items.empty()) return Value::undefined(name);
    Value best = items[0];
    for (const Value& e : items) {
      const int c = value_compare(e, best, line);
      if (name == "min" ? c < 0 : c > 0) best = e;
    }
    return best;
  }
  if (name == "sum") {
    const Value attr = a.get(0, "attribute", Value::none());
    Value total = a.get(1, "start", Value(int64_t{0}));
    for (const Value& e : iterate(v, line)) {
      const Value x = attr.is_string() ? attribute_of(*this, e, attr.as_string(), line) : e;
      if (!x.is_number() || !total.is_number()) template_fail("line ", line, ": sum of non-numbers");
      if (x.is_int() && total.is_int()) {
        int64_t r;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) template_fail("line ", line, ": integer overflow");
        total = Value(r);
      } else {
        total = Value(total.as_number() + x.as_number());
      }
    }
    return total;
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    List out;
    if (!v.truthy()) return Value::generator({});  // jinja2: `if value:` before iterating
    for (const Value& e : iterate(v, line)) {
      step();
      if (name == "map") {
        const Value attr = a.get(SIZE_MAX, "attribute");
        if (attr.is_string()) {
          Value x = attribute_of(*this, e, attr.as_string(), line);
          if (x.is_undefined()) x = a.get(SIZE_MAX, "default", x);
          out.push_back(x);
        } else {
          if (a.positional.empty()) template_fail("line ", line, ": map needs a filter name or attribute=");
          CallArgs rest;
          rest.positional.assign(a.positional.begin() + 1, a.positional.end());
          rest.keyword = a.keyword;
          out.push_back(apply_filter(a.positional[0].str(), e, rest, line));
        }
        continue;
      }
      const bool attr_form = name == "selectattr" || name == "rejectattr";
      const bool want = name == "select" || name == "selectattr";
      Value subject = e;
      size_t ti = 0;
      if (attr_form) {
        if (a.positional.empty()) template_fail("line ", line, ": ", name, " needs an attribute name");
        subject = attribute_of(*this, e, a.positional[0].str(), line);
        ti = 1;
      }
      bool r;
      if (ti >= a.positional.size()) {
        r = subject.truthy();
      } else {
        CallArgs targs;
        targs.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(ti) + 1, a.positional.end());
        r = apply_test(a.positional[ti].str(), subject, targs, line);
      }
      if (r == want) out.push_back(e);
    }
    return Value::generator(std::move(out));
  }
  if (name == "replace") {
    const Value c = a.get(2, "count", Value(int64_t{-1}));
    return Value(py_replace(v.str(), a.get(0, "old").str(), a.get(1, "new").str(),
                            c.is_none() ? -1 : int_arg(c, "count"), limits_.max_output_bytes));
  }
  if (name == "indent") {
    const Value w = a.get(0, "width", Value(int64_t{4}));
    std::string pad;
    if (w.is_string()) {
      pad = w.as_string();
    } else {
      const int64_t n = std::clamp<int64_t>(int_arg(w, "indent width"), 0, 1024);
      pad.assign(static_cast<size_t>(n), ' ');
    }
    std::string out = indent_text(v.str(), pad, a.get(1, "first", Value(false)).truthy(),
                                  a.get(2, "blank", Value(false)).truthy());
    check_size(out.size());
    return Value(std::move(out));
  }
  if (name == "int") {
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
    if (v.is_float()) {
      const double d = v.as_number();
      if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return a.get(0, "default", Value(int64_t{0}));
      return Value(static_cast<int64_t>(d));
    }
    if (v.is_string()) {
      try {
        size_t pos = 0;
        const std::string t = py_strip(v.as_string(), Value::none(), true, true);
        const long long x = std::stoll(t, &pos);
        if (pos == t.size()) return Value(static_cast<int64_t>(x));
      } catch (const std::exception&) {
      }
    }
    return a.get(0, "default", Value(int64_t{0}));
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_number());
    if (v.is_string()) {
      try {
        size_t pos = 0;
        const std::string t = py_strip(v.as_string(), Value::none(), true, true);
        const double x = std::stod(t, &pos);
        if (pos == t.size()) return Value(x);
      } catch (const std::exception&) {
      }
    }
    return a.get(0, "default", Value(0.0));
  }
  if (name == "abs") {
    if (v.is_int()) {
      if (v.as_int() == INT64_MIN) template_fail("line ", line, ": integer overflow");
      return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    if (v.is_float()) return Value(std::fabs(v.as_number()));
    template_fail("line ", line, ": bad operand for abs: ", v.type_name());
  }
  if (name == "round") {
    if (!v.is_number()) template_fail("line ", line, ": round needs a number");
    const int64_t prec = std::clamp<int64_t>(int_arg(a.get(0, "precision", Value(int64_t{0})), "precision"), -20, 20);
    const std::string method = a.get(1, "method", Value("common")).str();
    const double m = std::pow(10.0, static_cast<double>(prec));
    const double x = v.as_number() * m;
    // Python's round() (common) rounds halves to even.
    const double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::nearbyint(x);
    return Value(r / m);
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(py_split(v.str(), Value::none(), -1).size()));
  if (name == "center") {
    const int64_t w = std::clamp<int64_t>(int_arg(a.get(0, "width", Value(int64_t{80})), "width"), 0, 1 << 16);
    std::string s = v.str();
    const int64_t len = Value(s).length();
    if (len >= w) return Value(s);
    const int64_t total = w - len, left = total / 2 + (total & w & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
  }
  if (name == "truncate") {
    // jinja2: leave strings within length + leeway (5) alone; otherwise cut to length - len(end),
    // at the last space unless killwords, and append end.
    const int64_t len = std::max<int64_t>(0, int_arg(a.get(0, "length", Value(int64_t{255})), "length"));
    const bool killwords = a.get(1, "killwords", Value(false)).truthy();
    const std::string end = a.get(2, "end", Value("...")).str();
    const int64_t leeway = int_arg(a.get(3, "leeway", Value(int64_t{5})), "leeway");
    List chars = iterate(Value(v.str()), line);
    if (static_cast<int64_t>(chars.size()) <= len + leeway) return Value(v.str());
    const int64_t keep = std::max<int64_t>(0, len - Value(end).length());
    std::string out;
    for (int64_t i = 0; i < keep && i < static_cast<int64_t>(chars.size()); ++i) out += chars[static_cast<size_t>(i)].as_string();
    if (!killwords) {
      const size_t sp = out.rfind(' ');
      if (sp != std::string::npos) out.resize(sp);
    }
    return Value(out + end);
  }
  if (name == "format") {  // jinja2: value|format(args) is value % args
    std::string out = percent_format(v.str(), a.positional, line);
    check_size(out.size());
    return Value(std::move(out));
  }
  template_fail("line ", line, ": no filter named '", name, "'");
}

// ---- Globals.

void register_globals(std::unordered_map<std::string, Value>& g) {
  g["range"] = Value::function("range", [](Interpreter& in, CallArgs& a) {
    int64_t start = 0, stop = 0, stepv = 1;
    if (a.positional.size() == 1) {
      stop = int_arg(a.positional[0], "range stop");
    } else if (a.positional.size() >= 2) {
      start = int_arg(a.positional[0], "range start");
      stop = int_arg(a.positional[1], "range stop");
      if (a.positional.size() >= 3) stepv = int_arg(a.positional[2], "range step");
    } else {
      template_fail("range expected at least 1 argument");
    }
    if (stepv == 0) template_fail("range() arg 3 must not be zero");
    const long double count_ld = stepv > 0 ? (static_cast<long double>(stop) - start) / stepv
                                           : (static_cast<long double>(start) - stop) / -static_cast<long double>(stepv);
    if (count_ld > static_cast<long double>(in.limits().max_steps))
      template_fail("range() of more than ", in.limits().max_steps, " items");
    List out;
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) {
      out.emplace_back(i);
      if (__builtin_add_overflow(i, stepv, &i)) break;
      i -= stepv;
    }
    in.step(out.size());
    return Value::list(std::move(out));
  });
  g["namespace"] = Value::function("namespace", [](Interpreter&, CallArgs& a) {
    Value ns = Value::namespace_object();
    for (const Value& p : a.positional)
      if (p.is_dict())
        for (const auto& kv : p.as_dict().items) ns.as_dict().set(kv.first, kv.second);
    for (const auto& [k, v] : a.keyword) ns.as_dict().set(Value(k), v);
    return ns;
  });
  g["dict"] = Value::function("dict", [](Interpreter&, CallArgs& a) {
    Value d = Value::dict();
    for (const Value& p : a.positional)
      if (p.is_dict())
        for (const auto& kv : p.as_dict().items) d.as_dict().set(kv.first, kv.second);
    for (const auto& [k, v] : a.keyword) d.as_dict().set(Value(k), v);
    return d;
  });
  g["raise_exception"] = Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    template_fail(a.get(0, "message", Value("raise_exception called")).str());
  });
  g["strftime_now"] = Value::function("strftime_now", [](Interpreter&, CallArgs& a) {
    const std::string fmt = str_arg(a.get(0, "format"), "strftime_now format");
    if (fmt.size() > 256) template_fail("strftime_now: format too long");
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[1024];
    const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value(std::string(buf, n));
  });
}

}  // namespace triad::tmpl
