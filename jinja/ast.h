// The parsed template: expression and statement nodes (jinja2's nodes, the subset that
// chat templates use). Nodes are immutable after parsing and shared by renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace spillway::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprType : uint8_t {
  kConst,
  kName,
  kList,
  kTuple,
  kDict,
  kGetAttr,
  kGetItem,
  kSlice,
  kUnary,
  kBinary,
  kConcat,
  kCompare,
  kCondExpr,
  kCall,
  kFilter,
  kTest,
};

struct Expr {
  Expr(ExprType t, int l) : type(t), line(l) {}
  virtual ~Expr() = default;
  ExprType type;
  int line;
  int depth = 1;  // height of this subtree; the parser bounds it, and so evaluation's recursion
};

struct ConstExpr : Expr {
  ConstExpr(int l, Value v) : Expr(ExprType::kConst, l), value(std::move(v)) {}
  Value value;  // None, bool, int, float or str: never mutated
};

struct NameExpr : Expr {
  NameExpr(int l, std::string n) : Expr(ExprType::kName, l), name(std::move(n)) {}
  std::string name;
};

// kList and kTuple literals.
struct SequenceExpr : Expr {
  SequenceExpr(ExprType t, int l) : Expr(t, l) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprType::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetAttrExpr : Expr {
  GetAttrExpr(int l, ExprPtr o, std::string a) : Expr(ExprType::kGetAttr, l), object(std::move(o)), attr(std::move(a)) {}
  ExprPtr object;
  std::string attr;
};

struct GetItemExpr : Expr {
  GetItemExpr(int l, ExprPtr o, ExprPtr k) : Expr(ExprType::kGetItem, l), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object;
  ExprPtr key;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprType::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

enum class UnaryOp : uint8_t { kNeg, kPos, kNot };

struct UnaryExpr : Expr {
  UnaryExpr(int l, UnaryOp o, ExprPtr e) : Expr(ExprType::kUnary, l), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kAnd, kOr };

struct BinaryExpr : Expr {
  BinaryExpr(int l, BinaryOp o, ExprPtr a, ExprPtr b)
      : Expr(ExprType::kBinary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(int l) : Expr(ExprType::kConcat, l) {}
  std::vector<ExprPtr> items;
};

enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct CompareExpr : Expr {
  explicit CompareExpr(int l) : Expr(ExprType::kCompare, l) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  explicit CondExpr(int l) : Expr(ExprType::kCondExpr, l) {}
  ExprPtr test, then_expr, else_expr;  // else_expr may be null (undefined)
};

// Arguments of a call, filter or test.
struct CallArgsExpr {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  explicit CallExpr(int l) : Expr(ExprType::kCall, l) {}
  ExprPtr callee;
  CallArgsExpr call;
};

// `operand | name(args)`; operand is null for filter blocks and `set x | f` blocks.
struct FilterExpr : Expr {
  explicit FilterExpr(int l) : Expr(ExprType::kFilter, l) {}
  ExprPtr operand;
  std::string name;
  CallArgsExpr call;
};

struct TestExpr : Expr {
  explicit TestExpr(int l) : Expr(ExprType::kTest, l) {}
  ExprPtr operand;
  std::string name;
  CallArgsExpr call;
};

enum class StmtType : uint8_t {
  kText,
  kPrint,
  kIf,
  kFor,
  kSet,
  kSetBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kBreak,
  kContinue,
  kWith,
  kScope,  // {% generation %} and {% block %}: a body rendered in place
  kUnsupported,
};

struct Stmt {
  Stmt(StmtType t, int l) : type(t), line(l) {}
  virtual ~Stmt() = default;
  StmtType type;
  int line;
};

struct TextStmt : Stmt {
  TextStmt(int l, std::string t) : Stmt(StmtType::kText, l), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(int l, ExprPtr e) : Stmt(StmtType::kPrint, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtType::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, then elifs
  Body else_body;
};

// An assignment target: a name, a tuple of names, or `ns.attr`.
struct Target {
  std::vector<std::string> names;  // one name, or the names of a tuple target
  bool is_tuple = false;
  std::string ns_attr;  // non-empty: `names[0].ns_attr`
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtType::kFor, l) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond`; may be null
  Body body;
  Body else_body;
  bool recursive = false;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtType::kSet, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtType::kSetBlock, l) {}
  Target target;
  ExprPtr filter;  // a FilterExpr chain whose innermost operand is null; may be null
  Body body;
};

struct MacroParams {
  std::vector<std::string> names;
  std::vector<ExprPtr> defaults;  // aligned to the last names
  bool uses_caller = false;       // the body reads `caller`
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtType::kMacro, l) {}
  std::string name;
  MacroParams params;
  Body body;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtType::kCallBlock, l) {}
  std::unique_ptr<CallExpr> call;
  MacroParams params;  // of the caller
  Body body;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtType::kFilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain with a null innermost operand
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtType::kWith, l) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int l) : Stmt(StmtType::kScope, l) {}
  Body body;
};

// include / import / extends / autoescape: parsed, but rendering them is an error.
struct UnsupportedStmt : Stmt {
  UnsupportedStmt(int l, std::string m) : Stmt(StmtType::kUnsupported, l), message(std::move(m)) {}
  std::string message;
};

struct Program {
  Body body;
};

}  // namespace spillway::jinja
