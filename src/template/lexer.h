// Internal: the template lexer. segment() cuts a template into text and tag segments with
// jinja2's whitespace rules (trim_blocks and lstrip_blocks on, '-' strips, '+' keeps);
// tokenize() splits the inside of one tag into names, literals and operators.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace triad::tmpl {

enum class SegKind { kText, kVar, kBlock, kComment };
struct Segment {
  SegKind kind;
  std::string body;  // text, or the inside of the tag
  int line = 1;
};

std::vector<Segment> segment(std::string_view src);

enum class Tok { kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

std::vector<Token> tokenize(const std::string& s, int line);

}  // namespace triad::tmpl
