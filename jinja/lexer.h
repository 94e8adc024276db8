// Jinja2 lexer, configured as transformers configures jinja2: trim_blocks (the newline
// after a block or comment tag is dropped), lstrip_blocks (whitespace before a block or
// comment tag on its line is dropped), `-` / `+` whitespace control, raw blocks, comments,
// and the newline normalization of jinja2 (\r\n and \r become \n, one trailing newline is
// dropped).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace spillway::jinja {

enum class TokenType : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGe,
  kLt,
  kLe,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  int line = 1;
  std::string text;  // data, name, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
};

// The whole token stream, ending with kEof. Errors name the line:
// "syntax error at line N: unexpected char '$'".
Result<std::vector<Token>> tokenize(std::string_view source);

// How jinja2 describes a token in error messages: "end of print statement", "'if'", ...
std::string describe_token(const Token& token);

}  // namespace spillway::jinja
