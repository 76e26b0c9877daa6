// Internal: Python string and argument helpers shared by the template methods and filters
// (split / rsplit / replace / strip / title / capitalize with Python's semantics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "template/value.h"

namespace triad::tmpl {

bool is_py_space(unsigned char c);
// An integer (or bool) argument, else a TemplateError naming `what`.
int64_t int_arg(const Value& v, const char* what);
std::string str_arg(const Value& v, const char* what);
// str.split / str.rsplit: sep none or undefined splits on whitespace; maxsplit < 0: no limit.
std::vector<std::string> py_split(const std::string& s, const Value& sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit);
// str.replace (count < 0: all), failing when the result would exceed `limit` bytes.
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                       size_t limit);
std::string ascii_map(std::string s, int (*f)(int));
std::string py_capitalize(const std::string& s);
std::string py_title(const std::string& s);
// str.strip / lstrip / rstrip (chars none or undefined: whitespace).
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);

}  // namespace triad::tmpl
