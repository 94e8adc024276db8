// Statements of the Jinja parser and its entry point (see jinja_parser.h).
#include "jinja/parser.h"

#include "jinja/lexer.h"
#include "jinja/parser_impl.h"

namespace spillway::jinja {
namespace detail {

Result<Program> Parser::run() {
  Program program;
  auto body = subparse({});
  if (!body.ok()) return body.error();
  program.body = std::move(body).value();
  return program;
}

Result<Body> Parser::subparse(std::initializer_list<std::string_view> end_names) {
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

Result<Body> Parser::statements(std::initializer_list<std::string_view> end_names, bool drop_needle) {
  if (++block_nesting_ > kMaxBlockNesting) return fail("blocks nested too deeply");
  skip_if(TokenType::kColon);
  SPILLWAY_TRY(expect(TokenType::kBlockEnd));
  auto body = subparse(end_names);
  --block_nesting_;
  if (!body.ok()) return body.error();
  if (drop_needle) next();
  return body;
}

Result<StmtPtr> Parser::parse_statement() {
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
    // Both bodies are functions in jinja2 (a block, a call block): loops outside do not count.
    const int loops = loop_depth_;
    loop_depth_ = 0;
    auto body = statements({tag == "block" ? "endblock" : "endgeneration"}, true);
    loop_depth_ = loops;
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

Result<StmtPtr> Parser::parse_for() {
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

Result<StmtPtr> Parser::parse_if() {
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

Status Parser::parse_target(Target& target, bool with_namespace, std::string_view end_name) {
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

Result<StmtPtr> Parser::parse_set() {
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

Status Parser::parse_signature(MacroParams& params) {
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

Result<Body> Parser::macro_body(MacroParams& params, std::string_view end_name) {
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

Result<StmtPtr> Parser::parse_macro() {
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

Result<StmtPtr> Parser::parse_call_block() {
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

Result<StmtPtr> Parser::parse_filter_block() {
  auto node = std::make_unique<FilterBlockStmt>(next().line);
  auto filter = parse_filter(nullptr, true);
  if (!filter.ok()) return filter.error();
  node->filter = std::move(filter).value();
  auto body = statements({"endfilter"}, true);
  if (!body.ok()) return body.error();
  node->body = std::move(body).value();
  return StmtPtr(std::move(node));
}

Result<StmtPtr> Parser::parse_with() {
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

}  // namespace detail


Result<Program> parse_template(std::string_view source) {
  auto tokens = tokenize(source);
  if (!tokens.ok()) return tokens.error();
  auto program = detail::Parser(std::move(tokens).value()).run();
  if (!program.ok()) return program;
  SPILLWAY_TRY(check_filter_and_test_names(*program));
  return program;
}

}  // namespace spillway::jinja
