// Internal: the tree-walking interpreter and the built-in filters, tests, methods and globals.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "template/ast.h"
#include "template/template.h"

namespace triad::tmpl {

class Interpreter {
 public:
  Interpreter(const Limits& limits, const nlohmann::ordered_json& context);
  // Clears every namespace a `{% set ns.attr = ... %}` wrote to, which breaks the only
  // reference cycles a template can make (ns.a = ns, or two namespaces holding each other):
  // values are reference counted, so a cycle would otherwise outlive the render.
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string render(const Node& root);

  // Used by builtins.
  Value call(const Value& fn, CallArgs& args, int line);
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args, int line);
  bool apply_test(const std::string& name, const Value& v, CallArgs& args, int line);
  Value get_attr(const Value& obj, const std::string& name, int line);
  Value get_item(const Value& obj, const Value& key, int line);
  void step(uint64_t n = 1);
  void check_size(size_t bytes) const;
  const Limits& limits() const { return limits_; }
  // Iterating a value as Python's for does: list items, dict keys, string characters.
  List iterate(const Value& v, int line);

 private:
  using Frame = std::unordered_map<std::string, Value>;
  enum class Flow { kNormal, kBreak, kContinue };

  Value eval(const Node& n);
  Flow exec(const Node& n, std::string& out);
  Flow exec_body(const Node& n, std::string& out);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  Value binary(const std::string& op, const Node& l, const Node& r, int line);
  Value make_macro(const Node& n);
  void collect_args(const Node& n, size_t first, CallArgs& args);

  const Limits& limits_;
  std::vector<Frame> frames_;   // [0] globals, [1] template scope, then loop / macro frames
  std::vector<Value> written_namespaces_;  // each once (see ~Interpreter)
  std::unordered_set<const Dict*> written_namespace_set_;
  std::vector<size_t> scope_base_;  // per macro call: index of its first frame
  uint64_t steps_ = 0;
  int call_depth_ = 0;
};

// Python's printf-style `format % values` with %s, %r, %d, %i and %%.
std::string percent_format(const std::string& format, const List& values, int line);

}  // namespace triad::tmpl
