// Attribute access and the str / dict / list methods templates call (str.split, dict.get,
// ...). List and dict mutators raise, as in transformers' immutable sandbox.
#include <algorithm>
#include <cctype>

#include "template/interpreter.h"
#include "template/pystring.h"

namespace triad::tmpl {
namespace {

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

}  // namespace triad::tmpl
