#include <set>

#include "jinja/parser.h"

namespace spillway::jinja {
namespace {

// jinja2 rejects an unknown filter or test when it compiles the template, except inside
// an `if` or a conditional expression ("soft" frames), where it fails only when evaluated.
class FilterNameCheck {
 public:
  Status body(const Body& b, bool soft) {
    for (const auto& s : b) SPILLWAY_TRY(stmt(*s, soft));
    return {};
  }

 private:
  Status call(const CallArgsExpr& c, bool soft) {
    for (const auto& a : c.args) SPILLWAY_TRY(expr(a.get(), soft));
    for (const auto& kv : c.kwargs) SPILLWAY_TRY(expr(kv.second.get(), soft));
    SPILLWAY_TRY(expr(c.dyn_args.get(), soft));
    return expr(c.dyn_kwargs.get(), soft);
  }

  Status expr(const Expr* e, bool soft) {
    if (e == nullptr) return {};
    switch (e->type) {
      case ExprType::kConst:
      case ExprType::kName: return {};
      case ExprType::kList:
      case ExprType::kTuple:
        for (const auto& i : static_cast<const SequenceExpr*>(e)->items) SPILLWAY_TRY(expr(i.get(), soft));
        return {};
      case ExprType::kDict:
        for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items) {
          SPILLWAY_TRY(expr(k.get(), soft));
          SPILLWAY_TRY(expr(v.get(), soft));
        }
        return {};
      case ExprType::kGetAttr: return expr(static_cast<const GetAttrExpr*>(e)->object.get(), soft);
      case ExprType::kGetItem: {
        const auto* g = static_cast<const GetItemExpr*>(e);
        SPILLWAY_TRY(expr(g->object.get(), soft));
        return expr(g->key.get(), soft);
      }
      case ExprType::kSlice: {
        const auto* s = static_cast<const SliceExpr*>(e);
        SPILLWAY_TRY(expr(s->start.get(), soft));
        SPILLWAY_TRY(expr(s->stop.get(), soft));
        return expr(s->step.get(), soft);
      }
      case ExprType::kUnary: return expr(static_cast<const UnaryExpr*>(e)->operand.get(), soft);
      case ExprType::kBinary: {
        const auto* b = static_cast<const BinaryExpr*>(e);
        SPILLWAY_TRY(expr(b->left.get(), soft));
        return expr(b->right.get(), soft);
      }
      case ExprType::kConcat:
        for (const auto& i : static_cast<const ConcatExpr*>(e)->items) SPILLWAY_TRY(expr(i.get(), soft));
        return {};
      case ExprType::kCompare: {
        const auto* c = static_cast<const CompareExpr*>(e);
        SPILLWAY_TRY(expr(c->first.get(), soft));
        for (const auto& [op, x] : c->rest) SPILLWAY_TRY(expr(x.get(), soft));
        return {};
      }
      case ExprType::kCondExpr: {
        const auto* c = static_cast<const CondExpr*>(e);
        SPILLWAY_TRY(expr(c->test.get(), true));
        SPILLWAY_TRY(expr(c->then_expr.get(), true));
        return expr(c->else_expr.get(), true);
      }
      case ExprType::kCall: {
        const auto* c = static_cast<const CallExpr*>(e);
        SPILLWAY_TRY(expr(c->callee.get(), soft));
        return call(c->call, soft);
      }
      case ExprType::kFilter: {
        const auto* f = static_cast<const FilterExpr*>(e);
        if (!soft && !is_known_filter(f->name)) return unknown("filter", f->name, f->line);
        SPILLWAY_TRY(expr(f->operand.get(), soft));
        return call(f->call, soft);
      }
      case ExprType::kTest: {
        const auto* t = static_cast<const TestExpr*>(e);
        if (!soft && !is_known_test(t->name)) return unknown("test", t->name, t->line);
        SPILLWAY_TRY(expr(t->operand.get(), soft));
        return call(t->call, soft);
      }
    }
    return {};
  }

  Status params(const MacroParams& p) {
    for (const auto& d : p.defaults) SPILLWAY_TRY(expr(d.get(), false));
    return {};
  }

  Status stmt(const Stmt& s, bool soft) {
    switch (s.type) {
      case StmtType::kPrint: return expr(static_cast<const PrintStmt&>(s).expr.get(), soft);
      case StmtType::kIf: {
        const auto& n = static_cast<const IfStmt&>(s);
        for (const auto& [test, b] : n.branches) {
          SPILLWAY_TRY(expr(test.get(), true));
          SPILLWAY_TRY(body(b, true));
        }
        return body(n.else_body, true);
      }
      case StmtType::kFor: {
        const auto& n = static_cast<const ForStmt&>(s);
        SPILLWAY_TRY(expr(n.iter.get(), soft));
        SPILLWAY_TRY(expr(n.filter.get(), false));
        SPILLWAY_TRY(body(n.body, false));
        return body(n.else_body, false);
      }
      case StmtType::kSet: return expr(static_cast<const SetStmt&>(s).value.get(), soft);
      case StmtType::kSetBlock: {
        const auto& n = static_cast<const SetBlockStmt&>(s);
        SPILLWAY_TRY(expr(n.filter.get(), false));
        return body(n.body, false);
      }
      case StmtType::kMacro: {
        const auto& n = static_cast<const MacroStmt&>(s);
        SPILLWAY_TRY(params(n.params));
        return body(n.body, false);
      }
      case StmtType::kCallBlock: {
        const auto& n = static_cast<const CallBlockStmt&>(s);
        SPILLWAY_TRY(expr(n.call.get(), soft));
        SPILLWAY_TRY(params(n.params));
        return body(n.body, false);
      }
      case StmtType::kFilterBlock: {
        const auto& n = static_cast<const FilterBlockStmt&>(s);
        SPILLWAY_TRY(expr(n.filter.get(), false));
        return body(n.body, false);
      }
      case StmtType::kWith: {
        const auto& n = static_cast<const WithStmt&>(s);
        for (const auto& [t, v] : n.assignments) SPILLWAY_TRY(expr(v.get(), soft));
        return body(n.body, false);
      }
      case StmtType::kScope: return body(static_cast<const ScopeStmt&>(s).body, false);
      default: return {};
    }
  }

  static Error unknown(const char* what, const std::string& name, int line) {
    return Error{"syntax error at line " + std::to_string(line) + ": No " + what + " named '" + name + "'."};
  }
};

}  // namespace

Status check_filter_and_test_names(const Program& program) {
  return FilterNameCheck().body(program.body, false);
}

bool is_known_filter(std::string_view name) {
  static const std::set<std::string_view> kFilters = {
      "abs",     "attr",       "batch",  "capitalize", "center",     "count",   "d",
      "default", "dictsort",   "e",      "escape",     "filesizeformat", "first", "float",
      "forceescape", "format", "groupby", "indent",    "int",        "join",    "last",
      "length",  "list",       "lower",  "items",      "map",        "min",     "max",
      "pprint",  "random",     "reject", "rejectattr", "replace",    "reverse", "round",
      "safe",    "select",     "selectattr", "slice",  "sort",       "string",  "striptags",
      "sum",     "title",      "trim",   "truncate",   "unique",     "upper",   "urlencode",
      "urlize",  "wordcount",  "wordwrap", "xmlattr",  "tojson"};
  return kFilters.count(name) != 0;
}

bool is_known_test(std::string_view name) {
  static const std::set<std::string_view> kTests = {
      "odd",     "even",    "divisibleby", "defined", "undefined", "filter",  "test",
      "none",    "boolean", "false",       "true",    "integer",   "float",   "lower",
      "upper",   "string",  "mapping",     "number",  "sequence",  "iterable", "callable",
      "sameas",  "escaped", "in",          "==",      "eq",        "equalto", "!=",
      "ne",      ">",       "gt",          "greaterthan", "ge",    ">=",      "<",
      "lt",      "lessthan", "<=",         "le"};
  return kTests.count(name) != 0;
}

}  // namespace spillway::jinja
