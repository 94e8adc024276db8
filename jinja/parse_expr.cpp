// Expressions of the Jinja parser: jinja2's precedence levels from conditional expressions
// down to primaries, postfix operators, filters and tests.
#include "jinja/parser_impl.h"

namespace spillway::jinja::detail {

int child_depth(const Expr& e) {
  auto d = [](const ExprPtr& p) { return p ? p->depth : 0; };
  auto call_depth = [&](const CallArgsExpr& c) {
    int m = std::max(d(c.dyn_args), d(c.dyn_kwargs));
    for (const auto& a : c.args) m = std::max(m, d(a));
    for (const auto& kv : c.kwargs) m = std::max(m, d(kv.second));
    return m;
  };
  switch (e.type) {
    case ExprType::kConst:
    case ExprType::kName: return 0;
    case ExprType::kList:
    case ExprType::kTuple: {
      int m = 0;
      for (const auto& i : static_cast<const SequenceExpr&>(e).items) m = std::max(m, d(i));
      return m;
    }
    case ExprType::kDict: {
      int m = 0;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) m = std::max({m, d(k), d(v)});
      return m;
    }
    case ExprType::kGetAttr: return d(static_cast<const GetAttrExpr&>(e).object);
    case ExprType::kGetItem: {
      const auto& g = static_cast<const GetItemExpr&>(e);
      return std::max(d(g.object), d(g.key));
    }
    case ExprType::kSlice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      return std::max({d(s.start), d(s.stop), d(s.step)});
    }
    case ExprType::kUnary: return d(static_cast<const UnaryExpr&>(e).operand);
    case ExprType::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      return std::max(d(b.left), d(b.right));
    }
    case ExprType::kConcat: {
      int m = 0;
      for (const auto& i : static_cast<const ConcatExpr&>(e).items) m = std::max(m, d(i));
      return m;
    }
    case ExprType::kCompare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      int m = d(c.first);
      for (const auto& [op, x] : c.rest) m = std::max(m, d(x));
      return m;
    }
    case ExprType::kCondExpr: {
      const auto& c = static_cast<const CondExpr&>(e);
      return std::max({d(c.test), d(c.then_expr), d(c.else_expr)});
    }
    case ExprType::kCall: {
      const auto& c = static_cast<const CallExpr&>(e);
      return std::max(d(c.callee), call_depth(c.call));
    }
    case ExprType::kFilter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      return std::max(d(f.operand), call_depth(f.call));
    }
    case ExprType::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      return std::max(d(t.operand), call_depth(t.call));
    }
  }
  return 0;
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const {
  if (is(TokenType::kVariableEnd) || is(TokenType::kBlockEnd) || is(TokenType::kRParen)) return true;
  for (std::string_view n : extra_end_names) {
    if (is_name(n)) return true;
  }
  return false;
}

Result<ExprPtr> Parser::parse_tuple(bool simplified, bool with_condexpr, std::initializer_list<std::string_view> extra_end_names, bool explicit_parentheses) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
    if (is_tuple_end(extra_end_names)) break;
    auto e = simplified ? parse_primary() : parse_expression(with_condexpr);
    if (!e.ok()) return e.error();
    items.push_back(std::move(e).value());
    if (is(TokenType::kComma)) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) {
      if (is(TokenType::kEof)) return fail("unexpected end of template, expected an expression");
      return fail("Expected an expression, got '" + describe_token(cur()) + "'");
    }
  }
  auto tuple = std::make_unique<SequenceExpr>(ExprType::kTuple, line);
  tuple->items = std::move(items);
  return finish(std::move(tuple));
}

Result<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  Guard guard(recursion_);
  SPILLWAY_TRY(check_recursion());
  return with_condexpr ? parse_condexpr() : parse_or();
}

Result<ExprPtr> Parser::parse_condexpr() {
  Guard guard(recursion_);
  SPILLWAY_TRY(check_recursion());
  auto expr1 = parse_or();
  if (!expr1.ok()) return expr1;
  ExprPtr result = std::move(expr1).value();
  while (skip_name("if")) {
    auto node = std::make_unique<CondExpr>(result->line);
    auto test = parse_or();
    if (!test.ok()) return test;
    node->test = std::move(test).value();
    node->then_expr = std::move(result);
    if (skip_name("else")) {
      auto e = parse_condexpr();
      if (!e.ok()) return e;
      node->else_expr = std::move(e).value();
    }
    auto done = finish(std::move(node));
    if (!done.ok()) return done;
    result = std::move(done).value();
  }
  return result;
}

Result<ExprPtr> Parser::binary(int line, BinaryOp op, ExprPtr left, ExprPtr right) {
  return finish(std::make_unique<BinaryExpr>(line, op, std::move(left), std::move(right)));
}

Result<ExprPtr> Parser::parse_or() {
  auto left = parse_and();
  while (left.ok() && skip_name("or")) {
    auto right = parse_and();
    if (!right.ok()) return right;
    const int line = (*left)->line;
    left = binary(line, BinaryOp::kOr, std::move(left).value(), std::move(right).value());
  }
  return left;
}

Result<ExprPtr> Parser::parse_and() {
  auto left = parse_not();
  while (left.ok() && skip_name("and")) {
    auto right = parse_not();
    if (!right.ok()) return right;
    const int line = (*left)->line;
    left = binary(line, BinaryOp::kAnd, std::move(left).value(), std::move(right).value());
  }
  return left;
}

Result<ExprPtr> Parser::parse_not() {
  if (is_name("not")) {
    Guard guard(recursion_);
    SPILLWAY_TRY(check_recursion());
    const int line = next().line;
    auto operand = parse_not();
    if (!operand.ok()) return operand;
    return finish(std::make_unique<UnaryExpr>(line, UnaryOp::kNot, std::move(operand).value()));
  }
  return parse_compare();
}

Result<ExprPtr> Parser::parse_compare() {
  auto first = parse_math1();
  if (!first.ok()) return first;
  std::unique_ptr<CompareExpr> node;
  while (true) {
    CompareOp op;
    const TokenType type = cur().type;
    if (type == TokenType::kEq) op = CompareOp::kEq;
    else if (type == TokenType::kNe) op = CompareOp::kNe;
    else if (type == TokenType::kLt) op = CompareOp::kLt;
    else if (type == TokenType::kLe) op = CompareOp::kLe;
    else if (type == TokenType::kGt) op = CompareOp::kGt;
    else if (type == TokenType::kGe) op = CompareOp::kGe;
    else if (is_name("in")) op = CompareOp::kIn;
    else if (is_name("not") && look().type == TokenType::kName && look().text == "in") op = CompareOp::kNotIn;
    else break;
    next();
    if (op == CompareOp::kNotIn) next();
    auto operand = parse_math1();
    if (!operand.ok()) return operand;
    if (!node) {
      node = std::make_unique<CompareExpr>((*first)->line);
      node->first = std::move(first).value();
    }
    node->rest.emplace_back(op, std::move(operand).value());
  }
  if (!node) return first;
  return finish(std::move(node));
}

Result<ExprPtr> Parser::parse_math1() {
  auto left = parse_concat();
  while (left.ok() && (is(TokenType::kAdd) || is(TokenType::kSub))) {
    const BinaryOp op = next().type == TokenType::kAdd ? BinaryOp::kAdd : BinaryOp::kSub;
    auto right = parse_concat();
    if (!right.ok()) return right;
    const int line = (*left)->line;
    left = binary(line, op, std::move(left).value(), std::move(right).value());
  }
  return left;
}

Result<ExprPtr> Parser::parse_concat() {
  auto first = parse_math2();
  if (!first.ok() || !is(TokenType::kTilde)) return first;
  auto node = std::make_unique<ConcatExpr>((*first)->line);
  node->items.push_back(std::move(first).value());
  while (skip_if(TokenType::kTilde)) {
    auto e = parse_math2();
    if (!e.ok()) return e;
    node->items.push_back(std::move(e).value());
  }
  return finish(std::move(node));
}

Result<ExprPtr> Parser::parse_math2() {
  auto left = parse_pow();
  while (left.ok()) {
    BinaryOp op;
    if (is(TokenType::kMul)) op = BinaryOp::kMul;
    else if (is(TokenType::kDiv)) op = BinaryOp::kDiv;
    else if (is(TokenType::kFloorDiv)) op = BinaryOp::kFloorDiv;
    else if (is(TokenType::kMod)) op = BinaryOp::kMod;
    else break;
    next();
    auto right = parse_pow();
    if (!right.ok()) return right;
    const int line = (*left)->line;
    left = binary(line, op, std::move(left).value(), std::move(right).value());
  }
  return left;
}

Result<ExprPtr> Parser::parse_pow() {
  auto left = parse_unary(true);
  while (left.ok() && skip_if(TokenType::kPow)) {
    auto right = parse_unary(true);
    if (!right.ok()) return right;
    const int line = (*left)->line;
    left = binary(line, BinaryOp::kPow, std::move(left).value(), std::move(right).value());
  }
  return left;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  Guard guard(recursion_);
  SPILLWAY_TRY(check_recursion());
  const int line = cur().line;
  Result<ExprPtr> node = Error{};
  if (is(TokenType::kSub) || is(TokenType::kAdd)) {
    const UnaryOp op = next().type == TokenType::kSub ? UnaryOp::kNeg : UnaryOp::kPos;
    auto operand = parse_unary(false);
    if (!operand.ok()) return operand;
    node = finish(std::make_unique<UnaryExpr>(line, op, std::move(operand).value()));
  } else {
    node = parse_primary();
  }
  if (!node.ok()) return node;
  node = parse_postfix(std::move(node).value());
  if (node.ok() && with_filter) node = parse_filter_expr(std::move(node).value());
  return node;
}

Result<ExprPtr> Parser::parse_primary() {
  Guard guard(recursion_);
  SPILLWAY_TRY(check_recursion());
  const Token& tok = cur();
  const int line = tok.line;
  switch (tok.type) {
    case TokenType::kName: {
      const std::string& n = tok.text;
      ExprPtr e;
      if (n == "true" || n == "True") e = std::make_unique<ConstExpr>(line, Value::boolean(true));
      else if (n == "false" || n == "False") e = std::make_unique<ConstExpr>(line, Value::boolean(false));
      else if (n == "none" || n == "None") e = std::make_unique<ConstExpr>(line, Value::none());
      else {
        for (auto& sink : name_sinks_) sink.insert(n);
        e = std::make_unique<NameExpr>(line, n);
      }
      next();
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (is(TokenType::kString)) s += next().text;
      return ExprPtr(std::make_unique<ConstExpr>(line, Value::string(std::move(s))));
    }
    case TokenType::kInteger:
      return ExprPtr(std::make_unique<ConstExpr>(line, Value::integer(next().int_value)));
    case TokenType::kFloat:
      return ExprPtr(std::make_unique<ConstExpr>(line, Value::number(next().float_value)));
    case TokenType::kLParen: {
      next();
      auto e = parse_tuple(false, true, {}, true);
      if (!e.ok()) return e;
      SPILLWAY_TRY(expect(TokenType::kRParen));
      return e;
    }
    case TokenType::kLBracket: {
      next();
      auto list = std::make_unique<SequenceExpr>(ExprType::kList, line);
      while (!is(TokenType::kRBracket)) {
        if (!list->items.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
        if (is(TokenType::kRBracket)) break;
        auto e = parse_expression(true);
        if (!e.ok()) return e;
        list->items.push_back(std::move(e).value());
      }
      SPILLWAY_TRY(expect(TokenType::kRBracket));
      return finish(std::move(list));
    }
    case TokenType::kLBrace: {
      next();
      auto dict = std::make_unique<DictExpr>(line);
      while (!is(TokenType::kRBrace)) {
        if (!dict->items.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
        if (is(TokenType::kRBrace)) break;
        auto key = parse_expression(true);
        if (!key.ok()) return key;
        SPILLWAY_TRY(expect(TokenType::kColon));
        auto value = parse_expression(true);
        if (!value.ok()) return value;
        dict->items.emplace_back(std::move(key).value(), std::move(value).value());
      }
      SPILLWAY_TRY(expect(TokenType::kRBrace));
      return finish(std::move(dict));
    }
    default: return unexpected();
  }
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    Result<ExprPtr> r = Error{};
    if (is(TokenType::kDot) || is(TokenType::kLBracket)) {
      r = parse_subscript(std::move(node));
    } else if (is(TokenType::kLParen)) {
      r = parse_call(std::move(node));
    } else {
      return node;
    }
    if (!r.ok()) return r;
    node = std::move(r).value();
  }
}

Result<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    Result<ExprPtr> r = Error{};
    if (is(TokenType::kPipe)) {
      r = parse_filter(std::move(node), false);
    } else if (is_name("is")) {
      r = parse_test(std::move(node));
    } else if (is(TokenType::kLParen)) {
      r = parse_call(std::move(node));
    } else {
      return node;
    }
    if (!r.ok()) return r;
    node = std::move(r).value();
  }
}

Result<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  const Token& tok = next();
  const int line = tok.line;
  if (tok.type == TokenType::kDot) {
    if (is(TokenType::kName)) {
      return finish(std::make_unique<GetAttrExpr>(line, std::move(node), next().text));
    }
    if (!is(TokenType::kInteger)) return fail("expected name or number");
    auto key = std::make_unique<ConstExpr>(cur().line, Value::integer(next().int_value));
    return finish(std::make_unique<GetItemExpr>(line, std::move(node), std::move(key)));
  }
  std::vector<ExprPtr> args;
  while (!is(TokenType::kRBracket)) {
    if (!args.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
    auto a = parse_subscribed();
    if (!a.ok()) return a;
    args.push_back(std::move(a).value());
  }
  SPILLWAY_TRY(expect(TokenType::kRBracket));
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<SequenceExpr>(ExprType::kTuple, line);
    tuple->items = std::move(args);
    auto t = finish(std::move(tuple));
    if (!t.ok()) return t;
    key = std::move(t).value();
  }
  return finish(std::make_unique<GetItemExpr>(line, std::move(node), std::move(key)));
}

Result<ExprPtr> Parser::parse_subscribed() {
  const int line = cur().line;
  auto slice = std::make_unique<SliceExpr>(line);
  if (is(TokenType::kColon)) {
    next();
  } else {
    auto e = parse_expression(true);
    if (!e.ok()) return e;
    if (!is(TokenType::kColon)) return e;
    next();
    slice->start = std::move(e).value();
  }
  if (!is(TokenType::kColon) && !is(TokenType::kRBracket) && !is(TokenType::kComma)) {
    auto e = parse_expression(true);
    if (!e.ok()) return e;
    slice->stop = std::move(e).value();
  }
  if (skip_if(TokenType::kColon)) {
    if (!is(TokenType::kRBracket) && !is(TokenType::kComma)) {
      auto e = parse_expression(true);
      if (!e.ok()) return e;
      slice->step = std::move(e).value();
    }
  }
  return finish(std::move(slice));
}

Status Parser::parse_call_args(CallArgsExpr& call) {
  const int line = cur().line;
  SPILLWAY_TRY(expect(TokenType::kLParen));
  bool require_comma = false;
  auto invalid = [&] { return fail("invalid syntax for function call expression", line); };
  while (!is(TokenType::kRParen)) {
    if (require_comma) {
      SPILLWAY_TRY(expect(TokenType::kComma));
      if (is(TokenType::kRParen)) break;
    }
    if (is(TokenType::kMul)) {
      if (call.dyn_args || call.dyn_kwargs) return invalid();
      next();
      auto e = parse_expression(true);
      if (!e.ok()) return e.error();
      call.dyn_args = std::move(e).value();
    } else if (is(TokenType::kPow)) {
      if (call.dyn_kwargs) return invalid();
      next();
      auto e = parse_expression(true);
      if (!e.ok()) return e.error();
      call.dyn_kwargs = std::move(e).value();
    } else if (is(TokenType::kName) && look().type == TokenType::kAssign) {
      if (call.dyn_kwargs) return invalid();
      std::string key = next().text;
      next();
      auto e = parse_expression(true);
      if (!e.ok()) return e.error();
      call.kwargs.emplace_back(std::move(key), std::move(e).value());
    } else {
      if (call.dyn_args || call.dyn_kwargs || !call.kwargs.empty()) return invalid();
      auto e = parse_expression(true);
      if (!e.ok()) return e.error();
      call.args.push_back(std::move(e).value());
    }
    require_comma = true;
  }
  return expect(TokenType::kRParen);
}

Result<ExprPtr> Parser::parse_call(ExprPtr callee) {
  auto node = std::make_unique<CallExpr>(cur().line);
  node->callee = std::move(callee);
  SPILLWAY_TRY(parse_call_args(node->call));
  return finish(std::move(node));
}

Result<std::string> Parser::dotted_name() {
  auto name = expect_name();
  if (!name.ok()) return name;
  std::string n = std::move(name).value();
  while (skip_if(TokenType::kDot)) {
    auto part = expect_name();
    if (!part.ok()) return part;
    n += "." + *part;
  }
  return n;
}

Result<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is(TokenType::kPipe) || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    auto name = dotted_name();
    if (!name.ok()) return name.error();
    auto filter = std::make_unique<FilterExpr>(line);
    filter->operand = std::move(node);
    filter->name = std::move(name).value();
    if (is(TokenType::kLParen)) SPILLWAY_TRY(parse_call_args(filter->call));
    auto done = finish(std::move(filter));
    if (!done.ok()) return done;
    node = std::move(done).value();
  }
  return node;
}

Result<ExprPtr> Parser::parse_test(ExprPtr node) {
  const int line = next().line;  // "is"
  const bool negated = skip_name("not");
  auto name = dotted_name();
  if (!name.ok()) return name.error();
  auto test = std::make_unique<TestExpr>(line);
  test->operand = std::move(node);
  test->name = std::move(name).value();
  const TokenType type = cur().type;
  if (type == TokenType::kLParen) {
    SPILLWAY_TRY(parse_call_args(test->call));
  } else if ((type == TokenType::kName || type == TokenType::kString || type == TokenType::kInteger ||
              type == TokenType::kFloat || type == TokenType::kLBracket || type == TokenType::kLBrace) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) return fail("You cannot chain multiple tests with is");
    auto arg = parse_primary();
    if (!arg.ok()) return arg;
    auto post = parse_postfix(std::move(arg).value());
    if (!post.ok()) return post;
    test->call.args.push_back(std::move(post).value());
  }
  auto done = finish(std::move(test));
  if (!done.ok() || !negated) return done;
  return finish(std::make_unique<UnaryExpr>(line, UnaryOp::kNot, std::move(done).value()));
}

}  // namespace spillway::jinja::detail
