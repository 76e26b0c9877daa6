// The syntax tree of a parsed template (internal to src/template).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace triad::tmpl {

struct Node;
using NodePtr = std::shared_ptr<const Node>;

enum class NodeKind {
  // Expressions.
  kLiteral,    // value
  kName,       // name
  kAttr,       // a[0].name
  kItem,       // a[0][a[1]]
  kSlice,      // a[0][a[1]:a[2]:a[3]] (null children for omitted parts)
  kCall,       // a[0](a[1..]) with keyword names in `names` (empty for positional)
  kFilter,     // a[0] | name(a[1..]) (keyword names in `names`); a[0] null in filter blocks
  kTest,       // a[0] is [not] name(a[1..]); flag = negated
  kUnary,      // op a[0]: "not", "-", "+"
  kBinary,     // a[0] op a[1]: or and == != < <= > >= in notin + - * / // % ** ~
  kCond,       // a[1] if a[0] else a[2] (a[2] may be null)
  kList,       // [a...]
  kTuple,      // (a...)
  kDict,       // {a[0]: a[1], a[2]: a[3], ...}
  // Statements.
  kBody,       // a...: statements in order
  kText,       // name: literal text
  kOutput,     // {{ a[0] }}
  kIf,         // a: cond0, body0, cond1, body1, ..., [else body] (odd count: else present)
  kFor,        // targets in `names`; a[0] iterable, a[1] body, a[2] else body|null, a[3] filter|null
  kSet,        // targets: `names` (one or more), or attribute set: name + attr; a[0] value
  kSetBlock,   // name; a[0] body, a[1] filter chain|null
  kMacro,      // name; params in `names`, defaults in a[1..] (null for none); a[0] body
  kFilterBlock,  // a[0] filter chain (innermost kFilter has a null operand), a[1] body
  kBreak,
  kContinue,
};

struct Node {
  NodeKind kind;
  int line = 0;
  std::string name;                 // identifier, operator, text or filter / test name
  std::string attr;                 // kSet on a namespace attribute
  std::vector<std::string> names;   // keyword names / for targets / macro params
  std::vector<NodePtr> a;           // children
  Value value;                      // kLiteral
  bool flag = false;                // kTest: negated; kFor: the body uses `loop`
  int depth = 1;                    // height of this subtree (bounded by the parser, so that
                                    // evaluating and destroying the tree cannot exhaust the stack)
};

}  // namespace triad::tmpl
