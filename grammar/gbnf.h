// GBNF front end: llama.cpp's grammar syntax -> grammar IR. Rules `name ::= alternatives`,
// literals "..." (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), classes [...] / [^...]
// over Unicode code points, `.` (any character), groups, * + ? {m} {m,} {m,n}, comments.
// The start rule is `root`. Left recursion is an error (from CompiledGrammar::compile).
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"
#include "grammar/ir.h"

namespace spillway::grammar {

Result<Grammar> gbnf_grammar(std::string_view text);

// Code points [lo, hi] as UTF-8 byte sequences.
ExprId utf8_code_point_range(Grammar& g, uint32_t lo, uint32_t hi);

// The whole output is exactly one of the choices (vLLM's `choice`).
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace spillway::grammar
