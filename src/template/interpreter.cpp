// The interpreter: evaluates expressions and executes statements of a parsed template.
#include "template/interpreter.h"

#include <cmath>
#include <limits>

#include "template/parser.h"

namespace triad::tmpl {

void register_globals(std::unordered_map<std::string, Value>& globals);  // builtins.cpp

Interpreter::~Interpreter() {
  for (Value& ns : written_namespaces_) ns.as_dict().items.clear();
}

Interpreter::Interpreter(const Limits& limits, const nlohmann::ordered_json& context)
    : limits_(limits) {
  frames_.emplace_back();
  register_globals(frames_.back());
  if (!context.is_null()) {
    if (!context.is_object()) template_fail("the template context must be a JSON object");
    for (const auto& [k, v] : context.items()) frames_.back()[k] = Value::from_json(v);
  }
  frames_.emplace_back();  // template scope (top-level set)
}

void Interpreter::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    template_fail("the template took more than ", limits_.max_steps, " evaluation steps");
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    template_fail("the template produced more than ", limits_.max_output_bytes, " bytes");
}

std::string Interpreter::render(const Node& root) {
  std::string out;
  exec_body(root, out);
  return out;
}

Value Interpreter::lookup(const std::string& name) const {
  const size_t base = scope_base_.empty() ? 0 : scope_base_.back();
  for (size_t i = frames_.size(); i-- > 0;) {
    if (base > 1 && i >= 2 && i < base) continue;  // a macro does not see its caller's frames
    auto it = frames_[i].find(name);
    if (it != frames_[i].end()) return it->second;
  }
  return Value::undefined(name);
}

void Interpreter::assign(const std::string& name, Value v) { frames_.back()[name] = std::move(v); }

List Interpreter::iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::string& s = v.as_string();
      for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0xF0) n = 4;
        else if (c >= 0xE0) n = 3;
        else if (c >= 0xC0) n = 2;
        n = std::min(n, s.size() - i);
        chars.emplace_back(s.substr(i, n));
        i += n;
      }
      return chars;
    }
    default: template_fail("line ", line, ": '", v.type_name(), "' object is not iterable");
  }
}

void Interpreter::collect_args(const Node& n, size_t first, CallArgs& args) {
  for (size_t i = first; i < n.a.size(); ++i) {
    const size_t k = i - 1;  // names align with a[1..]
    const std::string& kw = k < n.names.size() ? n.names[k] : std::string();
    Value v = eval(*n.a[i]);
    if (kw.empty()) {
      args.positional.push_back(std::move(v));
    } else {
      args.keyword.emplace_back(kw, std::move(v));
    }
  }
}

namespace {

// Throws on overflow (`overflowed` is the result of a __builtin_*_overflow call).
void no_overflow(bool overflowed, int line) {
  if (overflowed) template_fail("line ", line, ": integer overflow");
}

int compare_values(const Value& a, const Value& b, int line) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    const double x = a.is_bool() ? a.as_bool() : a.as_number();
    const double y = b.is_bool() ? b.as_bool() : b.as_number();
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return compare_values(x[i], y[i], line);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  template_fail("line ", line, ": '<' not supported between '", a.type_name(), "' and '", b.type_name(), "'");
}

}  // namespace

int value_compare(const Value& a, const Value& b, int line) { return compare_values(a, b, line); }

std::string percent_format(const std::string& f, const List& vals, int line) {
  std::string out;
  size_t vi = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char c = f[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (vi >= vals.size()) template_fail("line ", line, ": not enough arguments for format string");
    const Value& v = vals[vi++];
    if (c == 's') {
      out += v.str();
    } else if (c == 'r') {
      out += v.repr();
    } else if (c == 'd' || c == 'i') {
      if (!v.is_number() && !v.is_bool()) template_fail("line ", line, ": %d format: a number is required, not ", v.type_name());
      out += std::to_string(v.is_bool() ? static_cast<int64_t>(v.as_bool())
                                        : v.is_float() ? static_cast<int64_t>(v.as_number()) : v.as_int());
    } else {
      template_fail("line ", line, ": unsupported format character '", std::string(1, c), "'");
    }
  }
  return out;
}

bool value_contains(const Value& container, const Value& item, int line) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string())
        template_fail("line ", line, ": 'in <string>' requires a string as left operand, not ", item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& e : container.as_list())
        if (e.equals(item)) return true;
      return false;
    case Value::Kind::kDict: return container.as_dict().find(item) != nullptr;
    case Value::Kind::kUndefined: return false;
    default: template_fail("line ", line, ": argument of type '", container.type_name(), "' is not iterable");
  }
}

Value Interpreter::binary(const std::string& op, const Node& ln, const Node& rn, int line) {
  if (op == "and") {
    Value l = eval(ln);
    return l.truthy() ? eval(rn) : l;
  }
  if (op == "or") {
    Value l = eval(ln);
    return l.truthy() ? l : eval(rn);
  }
  const Value l = eval(ln);
  const Value r = eval(rn);
  if (op == "==") return Value(l.equals(r));
  if (op == "!=") return Value(!l.equals(r));
  if (op == "<") return Value(compare_values(l, r, line) < 0);
  if (op == "<=") return Value(compare_values(l, r, line) <= 0);
  if (op == ">") return Value(compare_values(l, r, line) > 0);
  if (op == ">=") return Value(compare_values(l, r, line) >= 0);
  if (op == "in") return Value(value_contains(r, l, line));
  if (op == "notin") return Value(!value_contains(r, l, line));
  if (op == "~") {
    std::string s = l.str() + r.str();
    check_size(s.size());
    return Value(std::move(s));
  }
  auto num = [&](const Value& v) { return v.is_number() || v.is_bool(); };
  auto as_i = [](const Value& v) { return v.is_bool() ? static_cast<int64_t>(v.as_bool()) : v.as_int(); };
  auto as_d = [](const Value& v) { return v.is_bool() ? static_cast<double>(v.as_bool()) : v.as_number(); };
  const bool ints = (l.is_int() || l.is_bool()) && (r.is_int() || r.is_bool());
  if (op == "+") {
    if (l.is_string() && r.is_string()) {
      check_size(l.as_string().size() + r.as_string().size());
      if (l.is_markup() || r.is_markup()) {  // Markup.__add__ / __radd__ escape the plain side
        CallArgs none;
        const Value a = l.is_markup() ? l : apply_filter("escape", l, none, line);
        const Value b = r.is_markup() ? r : apply_filter("escape", r, none, line);
        return Value::markup(a.as_string() + b.as_string());
      }
      return Value(l.as_string() + r.as_string());
    }
    if (l.is_list() && r.is_list()) {
      List out = l.as_list();
      out.insert(out.end(), r.as_list().begin(), r.as_list().end());
      step(out.size());
      return Value::list(std::move(out));
    }
    if (num(l) && num(r)) {
      if (ints) {
        int64_t v = 0;
        no_overflow(__builtin_add_overflow(as_i(l), as_i(r), &v), line);
        return Value(v);
      }
      return Value(as_d(l) + as_d(r));
    }
  } else if (op == "-") {
    if (num(l) && num(r)) {
      if (ints) {
        int64_t v = 0;
        no_overflow(__builtin_sub_overflow(as_i(l), as_i(r), &v), line);
        return Value(v);
      }
      return Value(as_d(l) - as_d(r));
    }
  } else if (op == "*") {
    if ((l.is_string() && (r.is_int() || r.is_bool())) || (r.is_string() && (l.is_int() || l.is_bool()))) {
      const std::string& s = l.is_string() ? l.as_string() : r.as_string();
      const int64_t n = l.is_string() ? as_i(r) : as_i(l);
      if (n <= 0 || s.empty()) return Value(std::string());
      if (static_cast<uint64_t>(n) > limits_.max_output_bytes / s.size())
        template_fail("line ", line, ": string repetition larger than ", limits_.max_output_bytes, " bytes");
      std::string out;
      out.reserve(s.size() * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out += s;
      step(static_cast<uint64_t>(n));
      return Value(std::move(out));
    }
    if (l.is_list() && (r.is_int() || r.is_bool())) {
      const int64_t n = as_i(r);
      List out;
      if (n > 0 && !l.as_list().empty()) {
        if (static_cast<uint64_t>(n) > limits_.max_steps / l.as_list().size())
          template_fail("line ", line, ": list repetition too large");
        for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.as_list().begin(), l.as_list().end());
        step(out.size());
      }
      return Value::list(std::move(out));
    }
    if (num(l) && num(r)) {
      if (ints) {
        int64_t v = 0;
        no_overflow(__builtin_mul_overflow(as_i(l), as_i(r), &v), line);
        return Value(v);
      }
      return Value(as_d(l) * as_d(r));
    }
  } else if (op == "/") {
    if (num(l) && num(r)) {
      if (as_d(r) == 0) template_fail("line ", line, ": division by zero");
      return Value(as_d(l) / as_d(r));
    }
  } else if (op == "//" || op == "%") {
    if (num(l) && num(r)) {
      if (as_d(r) == 0) template_fail("line ", line, ": integer division or modulo by zero");
      if (ints) {
        const int64_t a = as_i(l), b = as_i(r);
        if (a == std::numeric_limits<int64_t>::min() && b == -1) template_fail("line ", line, ": integer overflow");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return op == "//" ? Value(q) : Value(m);
      }
      const double a = as_d(l), b = as_d(r);
      const double q = std::floor(a / b);
      return op == "//" ? Value(q) : Value(a - q * b);
    }
    if (op == "%" && l.is_string()) {
      std::string out = percent_format(l.as_string(), r.is_list() ? r.as_list() : List{r}, line);
      check_size(out.size());
      return Value(std::move(out));
    }
  } else if (op == "**") {
    if (num(l) && num(r)) {
      if (ints && as_i(r) >= 0) {
        int64_t base = as_i(l), e = as_i(r), v = 1;
        while (e > 0) {
          if (e & 1) no_overflow(__builtin_mul_overflow(v, base, &v), line);
          e >>= 1;
          if (e > 0) no_overflow(__builtin_mul_overflow(base, base, &base), line);
        }
        return Value(v);
      }
      return Value(std::pow(as_d(l), as_d(r)));
    }
  }
  template_fail("line ", line, ": unsupported operand types for ", op, ": '", l.type_name(), "' and '",
                r.type_name(), "'");
}

Value Interpreter::get_item(const Value& obj, const Value& key, int line) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      template_fail("line ", line, ": '", obj.name().empty() ? "value" : obj.name(), "' is undefined");
    case Value::Kind::kDict: {
      if (const Value* v = obj.as_dict().find(key)) return *v;
      if (key.is_string() && !obj.is_namespace()) return get_attr(obj, key.as_string(), line);
      return Value::undefined(key.str());
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (obj.is_generator()) template_fail("line ", line, ": 'generator' object is not subscriptable");
      if (key.is_string()) return get_attr(obj, key.as_string(), line);
      if (!key.is_int() && !key.is_bool()) return Value::undefined(key.str());  // jinja2: undefined
      List chars;
      const List* items = obj.is_list() ? &obj.as_list() : nullptr;
      if (!items) {
        chars = iterate(obj, line);
        items = &chars;
      }
      int64_t i = key.is_bool() ? key.as_bool() : key.as_int();
      const auto n = static_cast<int64_t>(items->size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index");
      return (*items)[static_cast<size_t>(i)];
    }
    default:
      if (key.is_string()) return get_attr(obj, key.as_string(), line);
      return Value::undefined(key.str());
  }
}

Value Interpreter::eval(const Node& n) {
  step();
  switch (n.kind) {
    case NodeKind::kLiteral: return n.value;
    case NodeKind::kName: return lookup(n.name);
    case NodeKind::kAttr: return get_attr(eval(*n.a[0]), n.name, n.line);
    case NodeKind::kItem: {
      Value obj = eval(*n.a[0]);
      return get_item(obj, eval(*n.a[1]), n.line);
    }
    case NodeKind::kSlice: {
      Value obj = eval(*n.a[0]);
      if (obj.is_undefined()) template_fail("line ", n.line, ": '", obj.name(), "' is undefined");
      if ((!obj.is_list() && !obj.is_string()) || obj.is_generator())
        template_fail("line ", n.line, ": '", obj.type_name(), "' object is not subscriptable");
      List items = obj.is_list() ? obj.as_list() : iterate(obj, n.line);
      const auto len = static_cast<int64_t>(items.size());
      auto part = [&](int i, int64_t def) -> std::pair<bool, int64_t> {
        if (!n.a[i]) return {false, def};
        Value v = eval(*n.a[i]);
        if (v.is_none()) return {false, def};
        if (!v.is_int()) template_fail("line ", n.line, ": slice indices must be integers");
        return {true, v.as_int()};
      };
      const int64_t stepv = part(3, 1).second;
      if (stepv == 0) template_fail("line ", n.line, ": slice step cannot be zero");
      auto [has_start, start] = part(1, 0);
      auto [has_stop, stop] = part(2, 0);
      auto clamp = [&](int64_t v, bool lower_edge) {
        if (v < 0) v += len;
        if (stepv > 0) return std::clamp<int64_t>(v, 0, len);
        return std::clamp<int64_t>(v, -1, len - 1) + (lower_edge ? 0 : 0);
      };
      if (!has_start) start = stepv > 0 ? 0 : len - 1;
      else start = clamp(start, true);
      if (!has_stop) stop = stepv > 0 ? len : -1;
      else stop = clamp(stop, false);
      List out;
      if (stepv > 0) {
        for (int64_t i = start; i < stop; i += stepv) out.push_back(items[static_cast<size_t>(i)]);
      } else {
        for (int64_t i = start; i > stop; i += stepv) out.push_back(items[static_cast<size_t>(i)]);
      }
      step(out.size());
      if (obj.is_list()) return Value::list(std::move(out));
      std::string s;
      for (const Value& c : out) s += c.as_string();
      return Value(std::move(s));
    }
    case NodeKind::kCall: {
      Value fn = eval(*n.a[0]);
      CallArgs args;
      collect_args(n, 1, args);
      return call(fn, args, n.line);
    }
    case NodeKind::kFilter: {
      Value v = n.a[0] ? eval(*n.a[0]) : Value();
      CallArgs args;
      collect_args(n, 1, args);
      return apply_filter(n.name, v, args, n.line);
    }
    case NodeKind::kTest: {
      Value v = eval(*n.a[0]);
      CallArgs args;
      collect_args(n, 1, args);
      const bool r = apply_test(n.name, v, args, n.line);
      return Value(n.flag ? !r : r);
    }
    case NodeKind::kUnary: {
      Value v = eval(*n.a[0]);
      if (n.name == "not") return Value(!v.truthy());
      if (n.name == "-") {
        if (v.is_int()) {
          if (v.as_int() == std::numeric_limits<int64_t>::min()) template_fail("line ", n.line, ": integer overflow");
          return Value(-v.as_int());
        }
        if (v.is_float()) return Value(-v.as_number());
        if (v.is_bool()) return Value(static_cast<int64_t>(-static_cast<int>(v.as_bool())));
        template_fail("line ", n.line, ": bad operand type for unary -: '", v.type_name(), "'");
      }
      if (!v.is_number() && !v.is_bool())
        template_fail("line ", n.line, ": bad operand type for unary +: '", v.type_name(), "'");
      return v;
    }
    case NodeKind::kBinary: return binary(n.name, *n.a[0], *n.a[1], n.line);
    case NodeKind::kCond: {
      if (eval(*n.a[0]).truthy()) return eval(*n.a[1]);
      return n.a[2] ? eval(*n.a[2]) : Value::undefined();
    }
    case NodeKind::kList:
    case NodeKind::kTuple: {
      List items;
      for (const auto& c : n.a) items.push_back(eval(*c));
      return n.kind == NodeKind::kTuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    case NodeKind::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < n.a.size(); i += 2) {
        Value k = eval(*n.a[i]);
        d.as_dict().set(k, eval(*n.a[i + 1]));
      }
      return d;
    }
    default: template_fail("line ", n.line, ": a statement where an expression was expected");
  }
}

Value Interpreter::call(const Value& fn, CallArgs& args, int line) {
  if (fn.is_undefined())
    template_fail("line ", line, ": '", fn.name().empty() ? "value" : fn.name(), "' is undefined");
  if (!fn.is_function()) template_fail("line ", line, ": '", fn.type_name(), "' object is not callable");
  return fn.as_function()(*this, args);
}

Value Interpreter::make_macro(const Node& n) {
  const Node* node = &n;
  return Value::function(n.name, [node](Interpreter& in, CallArgs& args) -> Value {
    if (in.call_depth_ >= in.limits_.max_call_depth)
      template_fail("line ", node->line, ": macro calls nested deeper than ", in.limits_.max_call_depth);
    Frame frame;
    const size_t n_params = node->names.size();
    if (args.positional.size() > n_params)
      template_fail("line ", node->line, ": macro '", node->name, "' takes ", n_params, " arguments, got ",
                    args.positional.size());
    for (size_t i = 0; i < n_params; ++i) {
      Value v;
      bool set = false;
      if (i < args.positional.size()) {
        v = args.positional[i];
        set = true;
      }
      for (const auto& [k, kv] : args.keyword) {
        if (k == node->names[i]) {
          v = kv;
          set = true;
        }
      }
      if (!set) {
        const NodePtr& def = node->a[1 + i];
        v = def ? in.eval(*def) : Value::undefined(node->names[i]);
      }
      frame[node->names[i]] = std::move(v);
    }
    for (const auto& [k, kv] : args.keyword) {
      bool known = false;
      for (const auto& p : node->names) known = known || p == k;
      if (!known) template_fail("line ", node->line, ": macro '", node->name, "' has no parameter '", k, "'");
    }
    ++in.call_depth_;
    in.frames_.push_back(std::move(frame));
    in.scope_base_.push_back(in.frames_.size() - 1);
    std::string out;
    struct Restore {
      Interpreter& in;
      ~Restore() {
        in.frames_.pop_back();
        in.scope_base_.pop_back();
        --in.call_depth_;
      }
    } restore{in};
    in.exec_body(*node->a[0], out);
    return Value(std::move(out));
  });
}

Interpreter::Flow Interpreter::exec_body(const Node& body, std::string& out) {
  for (const auto& s : body.a) {
    const Flow f = exec(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& n, std::string& out) {
  step();
  switch (n.kind) {
    case NodeKind::kBody: return exec_body(n, out);
    case NodeKind::kText:
      out += n.name;
      check_size(out.size());
      return Flow::kNormal;
    case NodeKind::kOutput: {
      out += eval(*n.a[0]).str();
      check_size(out.size());
      return Flow::kNormal;
    }
    case NodeKind::kIf: {
      size_t i = 0;
      for (; i + 1 < n.a.size(); i += 2)
        if (eval(*n.a[i]).truthy()) return exec_body(*n.a[i + 1], out);
      if (i < n.a.size()) return exec_body(*n.a[i], out);
      return Flow::kNormal;
    }
    case NodeKind::kFor: {
      const Value seq = eval(*n.a[0]);
      List items = iterate(seq, n.line);
      frames_.emplace_back();
      struct Pop {
        std::vector<Frame>& f;
        ~Pop() { f.pop_back(); }
      } pop{frames_};
      auto bind = [&](const Value& item) {
        if (n.names.size() == 1) {
          frames_.back()[n.names[0]] = item;
          return;
        }
        List parts = item.is_list() ? item.as_list() : iterate(item, n.line);
        if (parts.size() != n.names.size())
          template_fail("line ", n.line, ": cannot unpack ", parts.size(), " values into ", n.names.size(), " names");
        for (size_t k = 0; k < parts.size(); ++k) frames_.back()[n.names[k]] = parts[k];
      };
      if (n.a[3]) {  // {% for x in xs if cond %}: filter first, so loop.* counts the kept items
        List kept;
        for (const Value& item : items) {
          step();
          bind(item);
          if (eval(*n.a[3]).truthy()) kept.push_back(item);
        }
        items = std::move(kept);
      }
      const auto len = static_cast<int64_t>(items.size());
      for (int64_t i = 0; i < len; ++i) {
        step();
        bind(items[static_cast<size_t>(i)]);
        if (!n.flag) {
          if (exec_body(*n.a[1], out) == Flow::kBreak) break;
          continue;
        }
        step(8);
        Value loop = Value::dict();
        Dict& d = loop.as_dict();
        d.set(Value("index"), Value(i + 1));
        d.set(Value("index0"), Value(i));
        d.set(Value("revindex"), Value(len - i));
        d.set(Value("revindex0"), Value(len - i - 1));
        d.set(Value("first"), Value(i == 0));
        d.set(Value("last"), Value(i == len - 1));
        d.set(Value("length"), Value(len));
        d.set(Value("depth"), Value(int64_t{1}));
        d.set(Value("depth0"), Value(int64_t{0}));
        d.set(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("previtem"));
        d.set(Value("nextitem"), i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value::undefined("nextitem"));
        const int64_t idx = i;
        d.set(Value("cycle"), Value::function("cycle", [idx](Interpreter&, CallArgs& a) -> Value {
                if (a.positional.empty()) template_fail("loop.cycle needs at least one argument");
                return a.positional[static_cast<size_t>(idx) % a.positional.size()];
              }));
        frames_.back()["loop"] = loop;
        const Flow f = exec_body(*n.a[1], out);
        if (f == Flow::kBreak) break;
      }
      if (len == 0 && n.a[2]) return exec_body(*n.a[2], out);
      return Flow::kNormal;
    }
    case NodeKind::kSet: {
      Value v = eval(*n.a[0]);
      if (!n.attr.empty()) {
        Value target = lookup(n.name);
        if (!target.is_namespace())
          template_fail("line ", n.line, ": cannot assign attribute on non-namespace object '", n.name, "'");
        if (written_namespace_set_.insert(&target.as_dict()).second) written_namespaces_.push_back(target);
        target.as_dict().set(Value(n.attr), std::move(v));
        return Flow::kNormal;
      }
      if (n.names.size() == 1) {
        assign(n.names[0], std::move(v));
        return Flow::kNormal;
      }
      List parts = v.is_list() ? v.as_list() : iterate(v, n.line);
      if (parts.size() != n.names.size())
        template_fail("line ", n.line, ": cannot unpack ", parts.size(), " values into ", n.names.size(), " names");
      for (size_t k = 0; k < parts.size(); ++k) assign(n.names[k], parts[k]);
      return Flow::kNormal;
    }
    case NodeKind::kSetBlock: {
      std::string body;
      exec_body(*n.a[0], body);
      Value v(std::move(body));
      if (n.a[1]) {
        // Apply the chain: rebuild it over the captured value.
        std::vector<const Node*> chain;
        for (const Node* f = n.a[1].get(); f && f->kind == NodeKind::kFilter; f = f->a[0].get()) chain.push_back(f);
        for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
          CallArgs args;
          collect_args(**it, 1, args);
          v = apply_filter((*it)->name, v, args, n.line);
        }
      }
      assign(n.name, std::move(v));
      return Flow::kNormal;
    }
    case NodeKind::kMacro:
      assign(n.name, make_macro(n));
      return Flow::kNormal;
    case NodeKind::kFilterBlock: {
      std::string body;
      const Flow f = exec_body(*n.a[1], body);
      Value v(std::move(body));
      std::vector<const Node*> chain;
      for (const Node* x = n.a[0].get(); x && x->kind == NodeKind::kFilter; x = x->a[0].get()) chain.push_back(x);
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs args;
        collect_args(**it, 1, args);
        v = apply_filter((*it)->name, v, args, n.line);
      }
      out += v.str();
      check_size(out.size());
      return f;
    }
    case NodeKind::kBreak: return Flow::kBreak;
    case NodeKind::kContinue: return Flow::kContinue;
    default: {
      out += eval(n).str();
      return Flow::kNormal;
    }
  }
}

// ---- Template.

Template::Template(std::string_view source, Limits limits)
    : root_(parse_template(source, limits)), limits_(limits) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  Interpreter in(limits_, context);
  return in.render(*root_);
}

}  // namespace triad::tmpl
