// Regex front end: an ECMAScript-style regex subset -> grammar IR.
//
// Supported: literals, escapes (\d \w \s \D \W \S \n \t \r \f \v \xHH \uXXXX, escaped
// punctuation), classes [...] with ranges and negation (ASCII ranges; a negated class and
// '.' also match every non-ASCII character), groups (...) and (?:...), '|', quantifiers
// * + ? {n} {n,} {n,m} (lazy '?' suffix accepted, same language), '^' / '$' at the ends.
// Not supported (an error naming it): lookaround, backreferences, named groups, non-ASCII
// class ranges, anchors in the middle.
#pragma once

#include <string_view>

#include "common/result.h"
#include "grammar/ir.h"

namespace spillway::grammar {

enum class RegexMode {
  kBytes,       // the regex matches the whole output text (UTF-8 bytes), anchored
  kJsonString,  // the regex matches the *decoded* contents of a JSON string (JSON Schema
                // `pattern`: search semantics unless anchored); characters are emitted in
                // their JSON-escaped form
};

// Returns an expression (in g) for the regex. In kJsonString mode the expression covers
// the string body only (no quotes); json_char is JsonPieces::string_char.
Result<ExprId> compile_regex(Grammar& g, std::string_view regex, RegexMode mode, ExprId json_char = 0);

// A whole grammar for a regex over the output text.
Result<Grammar> regex_grammar(std::string_view regex);

}  // namespace spillway::grammar
