// The Jinja parser class, internal to the parser (jinja_parser.cpp: statements,
// jinja_parse_expr.cpp: expressions); jinja_parser.h is the interface.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "common/result.h"

namespace spillway::jinja::detail {

// Height of an expression node from its children (each child already has its depth).
int child_depth(const Expr& e);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<Program> run();

 private:
  // ---- token stream ----
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  bool is(TokenType type) const { return cur().type == type; }
  bool is_name(std::string_view name) const { return is(TokenType::kName) && cur().text == name; }
  bool skip_if(TokenType type) {
    if (!is(type)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }

  Error fail(const std::string& message, int line = -1) const {
    return Error{"syntax error at line " + std::to_string(line < 0 ? cur().line : line) + ": " + message};
  }
  Error unexpected() const {
    if (is(TokenType::kEof)) return fail("unexpected end of template");
    return fail("unexpected '" + describe_token(cur()) + "'");
  }
  Status expect(TokenType type) {
    if (is(type)) {
      next();
      return {};
    }
    Token want;
    want.type = type;
    if (is(TokenType::kEof)) return fail("unexpected end of template, expected '" + describe_token(want) + "'");
    return fail("expected token '" + describe_token(want) + "', got '" + describe_token(cur()) + "'");
  }
  Result<std::string> expect_name() {
    if (!is(TokenType::kName)) {
      if (is(TokenType::kEof)) return fail("unexpected end of template, expected a name");
      return fail("expected token 'name', got '" + describe_token(cur()) + "'");
    }
    return next().text;
  }
  Status expect_name(std::string_view name) {
    if (is_name(name)) {
      next();
      return {};
    }
    return fail("expected token '" + std::string(name) + "', got '" + describe_token(cur()) + "'");
  }

  // ---- bounded recursion ----
  struct Guard {
    explicit Guard(int& depth) : d(depth) { ++d; }
    ~Guard() { --d; }
    int& d;
  };
  Status check_recursion() const {
    if (recursion_ > kMaxExpressionDepth) return fail("expression nested too deeply");
    return {};
  }
  Result<ExprPtr> finish(ExprPtr e) {
    e->depth = child_depth(*e) + 1;
    if (e->depth > kMaxExpressionDepth) return fail("expression nested too deeply", e->line);
    return e;
  }

  // ---- statements ----
  // Parses until a block tag whose name is in end_names (left as the current token).
  Result<Body> subparse(std::initializer_list<std::string_view> end_names);

  // Body of a block statement: skips the block end, parses until an end tag.
  Result<Body> statements(std::initializer_list<std::string_view> end_names, bool drop_needle);

  Result<StmtPtr> parse_statement();

  Result<StmtPtr> parse_for();

  Result<StmtPtr> parse_if();

  // A name, a tuple of names, or (with_namespace) `name.attr`.
  Status parse_target(Target& target, bool with_namespace, std::string_view end_name);

  Result<StmtPtr> parse_set();

  Status parse_signature(MacroParams& params);

  // Parses a macro or caller body, recording whether it reads caller / varargs / kwargs.
  Result<Body> macro_body(MacroParams& params, std::string_view end_name);

  Result<StmtPtr> parse_macro();

  Result<StmtPtr> parse_call_block();

  Result<StmtPtr> parse_filter_block();

  Result<StmtPtr> parse_with();

  // ---- expressions ----
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const;

  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end_names, bool explicit_parentheses);

  Result<ExprPtr> parse_expression(bool with_condexpr);

  Result<ExprPtr> parse_condexpr();

  Result<ExprPtr> binary(int line, BinaryOp op, ExprPtr left, ExprPtr right);

  Result<ExprPtr> parse_or();

  Result<ExprPtr> parse_and();

  Result<ExprPtr> parse_not();

  Result<ExprPtr> parse_compare();

  Result<ExprPtr> parse_math1();

  Result<ExprPtr> parse_concat();

  Result<ExprPtr> parse_math2();

  Result<ExprPtr> parse_pow();

  Result<ExprPtr> parse_unary(bool with_filter);

  Result<ExprPtr> parse_primary();

  Result<ExprPtr> parse_postfix(ExprPtr node);

  Result<ExprPtr> parse_filter_expr(ExprPtr node);

  Result<ExprPtr> parse_subscript(ExprPtr node);

  Result<ExprPtr> parse_subscribed();

  Status parse_call_args(CallArgsExpr& call);

  Result<ExprPtr> parse_call(ExprPtr callee);

  Result<std::string> dotted_name();

  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline);

  Result<ExprPtr> parse_test(ExprPtr node);

  std::vector<Token> t_;
  size_t i_ = 0;
  int recursion_ = 0;
  int block_nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<std::set<std::string>> name_sinks_;  // names read inside enclosing macros
};

}  // namespace spillway::jinja::detail
