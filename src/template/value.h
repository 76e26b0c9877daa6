// Value: the dynamic values of the template engine, with Python's semantics where chat
// templates rely on them (truthiness, equality, printing via str() / repr(), JSON via
// json.dumps as Hugging Face's `tojson` calls it).
//
// Lists and dicts are reference types (shared_ptr), as in Python: a namespace() object or a
// list held by two variables is the same object. Dicts keep insertion order. Strings, numbers,
// none and undefined are plain values.
//
// Thread-safety: a Value may be read from several threads; rendering builds its own values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace triad::tmpl {

// Every template error (syntax, runtime, raise_exception, limits) is a TemplateError: the
// server maps it to HTTP 400.
class TemplateError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void template_fail(Args&&... args) {
  throw TemplateError(detail::concat(std::forward<Args>(args)...));
}

class Value;
struct Dict;
using List = std::vector<Value>;

struct CallArgs;
class Interpreter;
// A callable: a macro, a global function, a bound method, a loop.cycle.
using Function = std::function<Value(Interpreter&, CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b);  // NOLINT(google-explicit-constructor)
  Value(int64_t i);  // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);  // NOLINT
  Value(std::string s);  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  // A markupsafe.Markup string (from |safe or |escape): `+` with a plain string escapes the
  // plain one, as in jinja2 (autoescape off still keeps Markup's own operators).
  static Value markup(std::string s);
  static Value list(List items = {});
  // A one-shot iterator (what jinja2's map / select / reject / items / unique / reverse
  // filters return): iterable, always true, but without len(), indexing or JSON form.
  static Value generator(List items);
  // A tuple: a list that prints as (a, b) and never equals a list (Python).
  static Value tuple(List items);
  static Value dict();
  static Value namespace_object();
  static Value function(std::string name, Function fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && generator_; }
  bool is_list() const { return kind_ == Kind::kList; }  // lists and generators
  bool is_generator() const { return kind_ == Kind::kList && generator_; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_function() const { return kind_ == Kind::kFunction; }
  bool is_namespace() const;

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  const std::string& as_string() const { return s_; }
  List& as_list() const { return *list_; }
  Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *fn_; }
  const std::string& name() const { return s_; }  // undefined: the missing name; function: its name

  bool truthy() const;
  // Python str(): what {{ value }} prints.
  std::string str() const;
  // Python repr().
  std::string repr() const;
  // json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=...) (indent < 0: none).
  std::string to_json(int indent = -1, bool sort_keys = false) const;
  nlohmann::ordered_json to_json_value() const;
  // Python ==.
  bool equals(const Value& other) const;
  // Length for |length and len(): strings (code points), lists, dicts; throws otherwise.
  int64_t length() const;
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool generator_ = false;  // lists: a generator; strings: Markup
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

struct Dict {
  std::vector<std::pair<Value, Value>> items;  // insertion order; keys unique (Python ==)
  bool is_namespace = false;
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional i, else keyword `name`, else `fallback`.
  Value get(size_t i, std::string_view name, Value fallback = Value()) const;
  bool has(size_t i, std::string_view name) const;
};

// Python float repr (shortest round trip; exponent form below 1e-4 and from 1e16 on).
std::string python_float_repr(double d);
// Python repr() of a string.
std::string python_string_repr(const std::string& s);

}  // namespace triad::tmpl
