// Jinja2 parser: tokens to the AST of jinja_ast.h, following jinja2's grammar and
// precedence (filters bind tighter than arithmetic, `not x is y` is `not (x is y)`, `**`
// is left associative, unary minus binds tighter than `**`).
//
// Untrusted input: nesting of expressions and blocks is bounded, so parsing and rendering
// recurse a bounded depth. As in jinja2, an unknown filter or test is a syntax error unless
// it sits directly inside an `if` (then it fails only when evaluated).
#pragma once

#include <string_view>

#include "jinja/ast.h"
#include "common/result.h"

namespace spillway::jinja {

inline constexpr int kMaxExpressionDepth = 200;
inline constexpr int kMaxBlockNesting = 100;

Result<Program> parse_template(std::string_view source);

// jinja2's filter and test names (all of them, including ones this interpreter does not
// implement: those fail when evaluated).
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);
// The compile-time check of jinja2: unknown names outside `if` / conditional expressions.
Status check_filter_and_test_names(const Program& program);

}  // namespace spillway::jinja
