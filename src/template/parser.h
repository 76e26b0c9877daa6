// Internal: template text -> syntax tree.
#pragma once

#include <string_view>

#include "template/ast.h"
#include "template/template.h"

namespace triad::tmpl {

NodePtr parse_template(std::string_view source, const Limits& limits);

}  // namespace triad::tmpl
