#include "api/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <set>

#include "api/jinja_lexer.h"

namespace spillway::api::jinja {
namespace {

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

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<Program> run() {
    Program program;
    auto body = subparse({});
    if (!body.ok()) return body.error();
    program.body = std::move(body).value();
    return program;
  }

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
  Result<Body> subparse(std::initializer_list<std::string_view> end_names) {
    Body body;
    while (!is(TokenType::kEof)) {
      const Token& tok = cur();
      if (tok.type == TokenType::kData) {
        body.push_back(std::make_unique<TextStmt>(tok.line, tok.text));
        next();
      } else if (tok.type == TokenType::kVariableBegin) {
        const int line = tok.line;
        next();
        auto e = parse_tuple(false, true, {}, false);
        if (!e.ok()) return e.error();
        SPILLWAY_TRY(expect(TokenType::kVariableEnd));
        body.push_back(std::make_unique<PrintStmt>(line, std::move(e).value()));
      } else if (tok.type == TokenType::kBlockBegin) {
        next();
        for (std::string_view end : end_names) {
          if (is_name(end)) return body;
        }
        auto stmt = parse_statement();
        if (!stmt.ok()) return stmt.error();
        if (*stmt) body.push_back(std::move(stmt).value());
        SPILLWAY_TRY(expect(TokenType::kBlockEnd));
      } else {
        return unexpected();
      }
    }
    if (end_names.size() != 0) {
      std::string wanted;
      for (std::string_view n : end_names) wanted += (wanted.empty() ? "'" : " or '") + std::string(n) + "'";
      return fail("unexpected end of template, expected " + wanted);
    }
    return body;
  }

  // Body of a block statement: skips the block end, parses until an end tag.
  Result<Body> statements(std::initializer_list<std::string_view> end_names, bool drop_needle) {
    if (++block_nesting_ > kMaxBlockNesting) return fail("blocks nested too deeply");
    skip_if(TokenType::kColon);
    SPILLWAY_TRY(expect(TokenType::kBlockEnd));
    auto body = subparse(end_names);
    --block_nesting_;
    if (!body.ok()) return body.error();
    if (drop_needle) next();
    return body;
  }

  Result<StmtPtr> parse_statement() {
    if (!is(TokenType::kName)) return fail("tag name expected");
    const std::string tag = cur().text;
    const int line = cur().line;
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "print") {
      next();
      auto e = parse_tuple(false, true, {}, false);
      if (!e.ok()) return e.error();
      return StmtPtr(std::make_unique<PrintStmt>(line, std::move(e).value()));
    }
    if (tag == "break" || tag == "continue") {
      next();
      if (loop_depth_ == 0) return fail("'" + tag + "' outside loop", line);
      return std::make_unique<Stmt>(tag == "break" ? StmtType::kBreak : StmtType::kContinue, line);
    }
    if (tag == "generation" || tag == "block") {
      next();
      if (tag == "block") {
        auto name = expect_name();
        if (!name.ok()) return name.error();
        skip_name("scoped");
        skip_name("required");
      }
      auto scope = std::make_unique<ScopeStmt>(line);
      auto body = statements({tag == "block" ? "endblock" : "endgeneration"}, true);
      if (!body.ok()) return body.error();
      scope->body = std::move(body).value();
      if (tag == "block" && is(TokenType::kName)) next();  // {% endblock name %}
      return StmtPtr(std::move(scope));
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from") {
      while (!is(TokenType::kBlockEnd) && !is(TokenType::kEof)) next();
      return StmtPtr(std::make_unique<UnsupportedStmt>(line, "'" + tag + "' needs a template loader, which chat templates do not have"));
    }
    if (tag == "autoescape") {
      while (!is(TokenType::kBlockEnd) && !is(TokenType::kEof)) next();
      auto body = statements({"endautoescape"}, true);
      if (!body.ok()) return body.error();
      return StmtPtr(std::make_unique<UnsupportedStmt>(line, "autoescape blocks are not supported"));
    }
    return fail("Encountered unknown tag '" + tag + "'.", line);
  }

  Result<StmtPtr> parse_for() {
    auto node = std::make_unique<ForStmt>(next().line);
    SPILLWAY_TRY(parse_target(node->target, false, "in"));
    SPILLWAY_TRY(expect_name("in"));
    auto iter = parse_tuple(false, false, {"recursive"}, false);
    if (!iter.ok()) return iter.error();
    node->iter = std::move(iter).value();
    if (skip_name("if")) {
      auto filter = parse_expression(true);
      if (!filter.ok()) return filter.error();
      node->filter = std::move(filter).value();
    }
    node->recursive = skip_name("recursive");
    ++loop_depth_;
    auto body = statements({"endfor", "else"}, false);
    --loop_depth_;
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    if (next().text == "else") {
      auto else_body = statements({"endfor"}, true);
      if (!else_body.ok()) return else_body.error();
      node->else_body = std::move(else_body).value();
    }
    return StmtPtr(std::move(node));
  }

  Result<StmtPtr> parse_if() {
    auto node = std::make_unique<IfStmt>(next().line);
    while (true) {
      auto test = parse_tuple(false, false, {}, false);
      if (!test.ok()) return test.error();
      auto body = statements({"elif", "else", "endif"}, false);
      if (!body.ok()) return body.error();
      node->branches.emplace_back(std::move(test).value(), std::move(body).value());
      const std::string which = next().text;
      if (which == "elif") continue;
      if (which == "else") {
        auto else_body = statements({"endif"}, true);
        if (!else_body.ok()) return else_body.error();
        node->else_body = std::move(else_body).value();
      }
      break;
    }
    return StmtPtr(std::move(node));
  }

  // A name, a tuple of names, or (with_namespace) `name.attr`.
  Status parse_target(Target& target, bool with_namespace, std::string_view end_name) {
    if (with_namespace && is(TokenType::kName) && look().type == TokenType::kDot) {
      target.names.push_back(next().text);
      next();
      auto attr = expect_name();
      if (!attr.ok()) return attr.error();
      target.ns_attr = std::move(attr).value();
      return {};
    }
    while (true) {
      if (!target.names.empty() && !skip_if(TokenType::kComma)) break;
      if (!target.names.empty() && (is(TokenType::kBlockEnd) || is(TokenType::kAssign) || is_name(end_name))) break;
      if (!is(TokenType::kName)) {
        if (is(TokenType::kLParen)) return fail("nested tuple targets are not supported");
        return fail("can't assign to '" + describe_token(cur()) + "'");
      }
      const std::string& name = cur().text;
      if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
          name == "None") {
        return fail("can't assign to 'const'");
      }
      target.names.push_back(next().text);
      if (is(TokenType::kComma)) target.is_tuple = true;
    }
    return {};
  }

  Result<StmtPtr> parse_set() {
    const int line = next().line;
    Target target;
    SPILLWAY_TRY(parse_target(target, true, ""));
    if (skip_if(TokenType::kAssign)) {
      auto node = std::make_unique<SetStmt>(line);
      node->target = std::move(target);
      auto value = parse_tuple(false, true, {}, false);
      if (!value.ok()) return value.error();
      node->value = std::move(value).value();
      return StmtPtr(std::move(node));
    }
    auto node = std::make_unique<SetBlockStmt>(line);
    node->target = std::move(target);
    if (is(TokenType::kPipe)) {
      auto filter = parse_filter(nullptr, false);
      if (!filter.ok()) return filter.error();
      node->filter = std::move(filter).value();
    }
    auto body = statements({"endset"}, true);
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    return StmtPtr(std::move(node));
  }

  Status parse_signature(MacroParams& params) {
    SPILLWAY_TRY(expect(TokenType::kLParen));
    while (!is(TokenType::kRParen)) {
      if (!params.names.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
      auto name = expect_name();
      if (!name.ok()) return name.error();
      params.names.push_back(std::move(name).value());
      if (skip_if(TokenType::kAssign)) {
        auto def = parse_expression(true);
        if (!def.ok()) return def.error();
        params.defaults.push_back(std::move(def).value());
      } else if (!params.defaults.empty()) {
        return fail("non-default argument follows default argument");
      }
    }
    return expect(TokenType::kRParen);
  }

  // Parses a macro or caller body, recording whether it reads caller / varargs / kwargs.
  Result<Body> macro_body(MacroParams& params, std::string_view end_name) {
    const int loops = loop_depth_;
    loop_depth_ = 0;
    name_sinks_.emplace_back();
    auto body = statements({end_name}, true);
    const std::set<std::string> used = std::move(name_sinks_.back());
    name_sinks_.pop_back();
    loop_depth_ = loops;
    if (!body.ok()) return body.error();
    params.uses_caller = used.count("caller") != 0;
    params.uses_varargs = used.count("varargs") != 0;
    params.uses_kwargs = used.count("kwargs") != 0;
    return body;
  }

  Result<StmtPtr> parse_macro() {
    auto node = std::make_unique<MacroStmt>(next().line);
    auto name = expect_name();
    if (!name.ok()) return name.error();
    node->name = std::move(name).value();
    SPILLWAY_TRY(parse_signature(node->params));
    auto body = macro_body(node->params, "endmacro");
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    return StmtPtr(std::move(node));
  }

  Result<StmtPtr> parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(next().line);
    if (is(TokenType::kLParen)) SPILLWAY_TRY(parse_signature(node->params));
    auto call = parse_expression(true);
    if (!call.ok()) return call.error();
    if ((*call)->type != ExprType::kCall) return fail("expected call", node->line);
    node->call.reset(static_cast<CallExpr*>(call->release()));
    auto body = macro_body(node->params, "endcall");
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    return StmtPtr(std::move(node));
  }

  Result<StmtPtr> parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(next().line);
    auto filter = parse_filter(nullptr, true);
    if (!filter.ok()) return filter.error();
    node->filter = std::move(filter).value();
    auto body = statements({"endfilter"}, true);
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    return StmtPtr(std::move(node));
  }

  Result<StmtPtr> parse_with() {
    auto node = std::make_unique<WithStmt>(next().line);
    while (!is(TokenType::kBlockEnd)) {
      if (!node->assignments.empty()) SPILLWAY_TRY(expect(TokenType::kComma));
      Target target;
      auto name = expect_name();
      if (!name.ok()) return name.error();
      target.names.push_back(std::move(name).value());
      SPILLWAY_TRY(expect(TokenType::kAssign));
      auto value = parse_expression(true);
      if (!value.ok()) return value.error();
      node->assignments.emplace_back(std::move(target), std::move(value).value());
    }
    auto body = statements({"endwith"}, true);
    if (!body.ok()) return body.error();
    node->body = std::move(body).value();
    return StmtPtr(std::move(node));
  }

  // ---- expressions ----
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const {
    if (is(TokenType::kVariableEnd) || is(TokenType::kBlockEnd) || is(TokenType::kRParen)) return true;
    for (std::string_view n : extra_end_names) {
      if (is_name(n)) return true;
    }
    return false;
  }

  Result<ExprPtr> parse_tuple(bool simplified, bool with_condexpr,
                              std::initializer_list<std::string_view> extra_end_names,
                              bool explicit_parentheses) {
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

  Result<ExprPtr> parse_expression(bool with_condexpr) {
    Guard guard(recursion_);
    SPILLWAY_TRY(check_recursion());
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  Result<ExprPtr> parse_condexpr() {
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

  Result<ExprPtr> binary(int line, BinaryOp op, ExprPtr left, ExprPtr right) {
    return finish(std::make_unique<BinaryExpr>(line, op, std::move(left), std::move(right)));
  }

  Result<ExprPtr> parse_or() {
    auto left = parse_and();
    while (left.ok() && skip_name("or")) {
      auto right = parse_and();
      if (!right.ok()) return right;
      const int line = (*left)->line;
      left = binary(line, BinaryOp::kOr, std::move(left).value(), std::move(right).value());
    }
    return left;
  }

  Result<ExprPtr> parse_and() {
    auto left = parse_not();
    while (left.ok() && skip_name("and")) {
      auto right = parse_not();
      if (!right.ok()) return right;
      const int line = (*left)->line;
      left = binary(line, BinaryOp::kAnd, std::move(left).value(), std::move(right).value());
    }
    return left;
  }

  Result<ExprPtr> parse_not() {
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

  Result<ExprPtr> parse_compare() {
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

  Result<ExprPtr> parse_math1() {
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

  Result<ExprPtr> parse_concat() {
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

  Result<ExprPtr> parse_math2() {
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

  Result<ExprPtr> parse_pow() {
    auto left = parse_unary(true);
    while (left.ok() && skip_if(TokenType::kPow)) {
      auto right = parse_unary(true);
      if (!right.ok()) return right;
      const int line = (*left)->line;
      left = binary(line, BinaryOp::kPow, std::move(left).value(), std::move(right).value());
    }
    return left;
  }

  Result<ExprPtr> parse_unary(bool with_filter) {
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

  Result<ExprPtr> parse_primary() {
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

  Result<ExprPtr> parse_postfix(ExprPtr node) {
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

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
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

  Result<ExprPtr> parse_subscript(ExprPtr node) {
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

  Result<ExprPtr> parse_subscribed() {
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

  Status parse_call_args(CallArgsExpr& call) {
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

  Result<ExprPtr> parse_call(ExprPtr callee) {
    auto node = std::make_unique<CallExpr>(cur().line);
    node->callee = std::move(callee);
    SPILLWAY_TRY(parse_call_args(node->call));
    return finish(std::move(node));
  }

  Result<std::string> dotted_name() {
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

  Result<ExprPtr> parse_filter(ExprPtr node, bool start_inline) {
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

  Result<ExprPtr> parse_test(ExprPtr node) {
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

  std::vector<Token> t_;
  size_t i_ = 0;
  int recursion_ = 0;
  int block_nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<std::set<std::string>> name_sinks_;  // names read inside enclosing macros
};

}  // namespace

Result<Program> parse_template(std::string_view source) {
  auto tokens = tokenize(source);
  if (!tokens.ok()) return tokens.error();
  auto program = Parser(std::move(tokens).value()).run();
  if (!program.ok()) return program;
  SPILLWAY_TRY(check_filter_and_test_names(*program));
  return program;
}

}  // namespace spillway::api::jinja
