// The Jinja interpreter: renders a parsed Program with Python/jinja2 semantics inside
// jinja2's ImmutableSandboxedEnvironment rules (no attribute names starting with "__",
// no in-place modification of lists and dicts except list.pop / list.clear as in jinja2
// 3.1.2, range() at most 100000 items).
//
// Bounded: call depth, evaluation depth, loop iterations, a work budget (statements,
// items iterated, bytes built) and the size of any string or output. Every failure is an
// Error value; errors raised by raise_exception() keep their message as is, the others
// are prefixed with the template line.
//
// Thread contract: one Interpreter renders once, on one thread; many may share a Program.
//
// Not supported (an error when used, never a wrong render): template loading (include,
// import, extends), autoescape blocks and Markup semantics (`safe` / `escape` return plain
// strings), integers beyond 64 bits, complex numbers, \N{name} escapes, nested fields in
// str.format specs, thousands separators, and the filters groupby, wordwrap, urlize,
// urlencode, xmlattr, pprint, random, filesizeformat, striptags, plus lipsum(). Unicode
// case mapping covers Latin, Greek, Cyrillic and Armenian (no final-sigma rule).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"
#include "common/result.h"

namespace spillway::jinja {

struct RenderLimits {
  size_t max_string_bytes = size_t{32} << 20;  // any string built, and the output
  size_t max_list_items = size_t{1} << 20;
  int64_t max_work = 10'000'000;  // statements + items iterated + bytes built / 8 (< 1 s)
  int64_t max_loop_iterations = 1'000'000;
  int max_call_depth = 64;    // nested macro calls
  int max_eval_depth = 1000;  // nested statements + expressions + calls
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// Binds call arguments to named parameters the Python way. The result has one entry per
// parameter, nullopt where neither a positional nor a keyword argument gave one. Errors:
// too many positional arguments, unknown or repeated keywords, missing required ones.
Result<std::vector<std::optional<Value>>> bind_args(std::string_view function, const CallArgs& call,
                                                    std::initializer_list<std::string_view> params,
                                                    size_t required = 0);

// Variables of one scope. A for-loop iteration, a macro call, a block set, a filter block
// and a with block each get their own frame; `if` does not.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;

  const Value* find_local(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter;

class Macro final : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kMacro; }
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return is_caller ? "<Macro 'caller'>" : "<Macro '" + name + "'>"; }
  bool is_callable() const override { return true; }

  std::string name;
  const MacroParams* params = nullptr;
  const Body* body = nullptr;
  FramePtr closure;  // where the macro was defined; cleared when the render ends
  bool is_caller = false;
};

class Builtin final : public Object {
 public:
  using Fn = std::function<Result<Value>(Interpreter&, const CallArgs&)>;
  Builtin(std::string n, Fn f) : name(std::move(n)), fn(std::move(f)) {}
  ObjectKind object_kind() const override { return ObjectKind::kBuiltin; }
  std::string type_name() const override { return "function"; }
  std::string repr() const override { return "<function " + name + ">"; }
  bool is_callable() const override { return true; }

  std::string name;
  Fn fn;
};

// `"abc".upper`, `d.items`, `loop.cycle`, ... taken without calling it.
class BoundMethod final : public Object {
 public:
  BoundMethod(Value r, std::string n) : receiver(std::move(r)), name(std::move(n)) {}
  ObjectKind object_kind() const override { return ObjectKind::kBoundMethod; }
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in method " + name + ">"; }
  bool is_callable() const override { return true; }

  Value receiver;
  std::string name;
};

class Loop final : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kLoop; }
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items.size()) + ">";
  }
  bool is_callable() const override { return recursive != nullptr; }

  std::vector<Value> items;
  size_t index0 = 0;
  int depth0 = 0;
  std::optional<Value> last_changed;        // loop.changed()
  const ForStmt* recursive = nullptr;       // set for `recursive` loops: loop(items) renders again
  std::weak_ptr<Frame> recursion_frame;     // the frame the loop runs in
};

class Cycler final : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kCycler; }
  std::string type_name() const override { return "Cycler"; }
  std::string repr() const override { return "<Cycler>"; }
  std::vector<Value> items;
  size_t pos = 0;
};

class Joiner final : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kJoiner; }
  std::string type_name() const override { return "Joiner"; }
  std::string repr() const override { return "<Joiner>"; }
  bool is_callable() const override { return true; }
  std::string separator = ", ";
  bool used = false;
};

class Interpreter {
 public:
  using Clock = std::function<std::string(std::string_view format)>;

  Interpreter(const Program& program, RenderLimits limits, Clock strftime_now);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders the program once with these global variables (they shadow the builtins).
  Result<std::string> render(std::vector<std::pair<std::string, Value>> variables);

  // ---- services for filters, methods and builtins; errors are plain messages ----
  Result<Value> getattr(const Value& obj, const std::string& name);
  Result<Value> getitem(const Value& obj, const Value& key);
  Result<Value> call(const Value& callee, CallArgs args);
  Result<Value> call_filter(std::string_view name, const Value& operand, CallArgs args);
  Result<bool> call_test(std::string_view name, const Value& operand, CallArgs args);
  // Python iter(): lists and the like, dict keys, string characters; undefined is empty.
  // Generators are consumed.
  Result<std::vector<Value>> iterate(const Value& v);
  Result<Value> strftime_now(std::string_view format);
  // raise_exception(): the render fails with exactly this message.
  Error raise(std::string message);
  // Whether the failed render was stopped by raise_exception() (its message has no line).
  bool raised() const { return raised_; }
  std::shared_ptr<Namespace> new_namespace();

  // Budget accounting.
  Status charge(int64_t work);
  Status charge_bytes(size_t bytes);  // also checks max_string_bytes
  Status check_items(size_t count) const;
  const RenderLimits& limits() const { return limits_; }

  // Operators (jinja_ops.cpp).
  Result<Value> binary_op(BinaryOp op, const Value& a, const Value& b);
  Result<Value> unary_op(UnaryOp op, const Value& v);
  Result<bool> compare_op(CompareOp op, const Value& a, const Value& b);
  Result<bool> contains(const Value& container, const Value& item);
  Result<Value> slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  Result<std::string> to_str(const Value& v);  // str(v), size-checked

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct Scope;  // RAII frame switch

  Result<Flow> exec_body(const Body& body, std::string& out);
  Result<Flow> exec(const Stmt& stmt, std::string& out);
  Result<Flow> exec_for(const ForStmt& node, std::string& out);
  Status run_loop(const ForStmt& node, std::vector<Value> items, int depth0, std::string& out);
  Status assign(const Target& target, Value value);
  Status bind_target(Frame& frame, const Target& target, const Value& value);
  Result<Value> eval(const Expr& e);
  Result<Value> eval_call(const CallExpr& e, std::optional<Value> caller);
  Result<CallArgs> eval_args(const CallArgsExpr& c);
  Result<Value> eval_filter(const FilterExpr& e, const Value* block_input);
  Result<Value> lookup(const std::string& name) const;
  Result<Value> call_macro(const Macro& macro, CallArgs args);
  Result<Value> call_method(const Value& receiver, const std::string& name, CallArgs args);
  Result<Value> call_loop(Loop& loop, CallArgs args);
  Result<Flow> render_scoped(const Body& body, std::string& out);

  const Program& program_;
  RenderLimits limits_;
  Clock strftime_now_;
  FramePtr globals_;
  FramePtr frame_;
  int line_ = 0;
  bool raised_ = false;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int64_t work_ = 0;
  int64_t loop_iterations_ = 0;
  // Every namespace and macro made by this render: they are the only objects through
  // which values can form reference cycles, so the destructor clears them all.
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<std::shared_ptr<Macro>> macros_;
};

// Methods of str, dict and list values (jinja_methods.cpp).
bool has_method(const Value& receiver, std::string_view name);
// The ImmutableSandboxedEnvironment refuses methods that modify a list or dict.
bool is_unsafe_method(const Value& receiver, std::string_view name);
Result<Value> call_builtin_method(Interpreter& interp, const Value& receiver, std::string_view name,
                                  const CallArgs& args);

// Filters and tests (jinja_filters.cpp, jinja_tests.cpp): nullopt for an unknown name.
std::optional<Result<Value>> apply_filter(Interpreter& interp, std::string_view name, const Value& v,
                                          const CallArgs& args);
std::optional<Result<bool>> apply_test(Interpreter& interp, std::string_view name, const Value& v,
                                       const CallArgs& args);

// Python string formatting (jinja_format.cpp): `fmt % values` and str.format().
Result<std::string> percent_format(Interpreter& interp, const std::string& fmt, const Value& values);
Result<std::string> str_format(Interpreter& interp, const std::string& fmt, const CallArgs& args);

// The global functions of the environment (jinja_builtins.cpp): range, dict, namespace,
// cycler, joiner, lipsum (unsupported), raise_exception, strftime_now.
void install_builtins(Frame& globals);

}  // namespace spillway::jinja
