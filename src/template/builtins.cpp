// Built-ins: globals (range, namespace, dict, raise_exception, strftime_now), filters and tests,
// with the semantics of Python and jinja2. Methods of values are in methods.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include "template/interpreter.h"
#include "template/pystring.h"

namespace triad::tmpl {

int value_compare(const Value& a, const Value& b, int line);          // interpreter.cpp
bool value_contains(const Value& container, const Value& item, int line);

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
