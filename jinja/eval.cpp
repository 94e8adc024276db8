// Statements and expressions of the interpreter (see jinja_interp.h); operators and
// attribute access live in jinja_ops.cpp.
#include <algorithm>

#include "jinja/interp.h"
#include "jinja/print.h"

namespace spillway::jinja {


const Value* Frame::find_local(std::string_view name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

Result<std::vector<std::optional<Value>>> bind_args(std::string_view function, const CallArgs& call,
                                                    std::initializer_list<std::string_view> params,
                                                    size_t required) {
  std::vector<std::optional<Value>> out(params.size());
  if (call.args.size() > params.size()) {
    return Error{std::string(function) + "() takes at most " + std::to_string(params.size()) +
                 " argument(s) (" + std::to_string(call.args.size()) + " given)"};
  }
  for (size_t i = 0; i < call.args.size(); ++i) out[i] = call.args[i];
  for (const auto& [key, value] : call.kwargs) {
    size_t index = 0;
    for (std::string_view p : params) {
      if (p == key) break;
      ++index;
    }
    if (index == params.size()) {
      return Error{std::string(function) + "() got an unexpected keyword argument '" + key + "'"};
    }
    if (out[index]) return Error{std::string(function) + "() got multiple values for argument '" + key + "'"};
    out[index] = value;
  }
  size_t i = 0;
  for (std::string_view p : params) {
    if (i < required && !out[i]) {
      return Error{std::string(function) + "() missing required argument '" + std::string(p) + "'"};
    }
    ++i;
  }
  return out;
}

struct Interpreter::Scope {
  Scope(Interpreter& in, FramePtr f) : interp(in), saved(std::move(in.frame_)) { interp.frame_ = std::move(f); }
  ~Scope() { interp.frame_ = std::move(saved); }
  Interpreter& interp;
  FramePtr saved;
};

namespace {

struct DepthGuard {
  explicit DepthGuard(int& d) : depth(d) { ++depth; }
  ~DepthGuard() { --depth; }
  int& depth;
};

FramePtr child_of(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

}  // namespace

Interpreter::Interpreter(const Program& program, RenderLimits limits, Clock strftime_now)
    : program_(program), limits_(limits), strftime_now_(std::move(strftime_now)) {
  globals_ = std::make_shared<Frame>();
  install_builtins(*globals_);
}

Interpreter::~Interpreter() {
  // Break every reference cycle (namespaces and macro closures are the only ways to make
  // one) while all of them are still alive, so nothing is destroyed recursively.
  for (auto& ns : namespaces_) {
    std::vector<std::pair<Value, Value>> entries = std::move(ns->attrs.entries);
    ns->attrs = Dict{};
  }
  for (auto& m : macros_) m->closure.reset();
  frame_.reset();
  globals_.reset();
}

Result<std::string> Interpreter::render(std::vector<std::pair<std::string, Value>> variables) {
  for (auto& [name, value] : variables) globals_->set(name, std::move(value));
  frame_ = child_of(globals_);
  std::string out;
  auto flow = exec_body(program_.body, out);
  if (!flow.ok()) {
    if (raised_) return flow.error();
    return Error{"line " + std::to_string(line_) + ": " + flow.error().message};
  }
  return out;
}

Error Interpreter::raise(std::string message) {
  raised_ = true;
  return Error{std::move(message)};
}

std::shared_ptr<Namespace> Interpreter::new_namespace() {
  auto ns = std::make_shared<Namespace>();
  namespaces_.push_back(ns);
  return ns;
}

Status Interpreter::charge(int64_t work) {
  work_ += work;
  if (work_ > limits_.max_work) return Error{"template exceeded its work budget"};
  return {};
}

Status Interpreter::charge_bytes(size_t bytes) {
  if (bytes > limits_.max_string_bytes) return Error{"string too large"};
  return charge(static_cast<int64_t>(bytes / 8));
}

Status Interpreter::check_items(size_t count) const {
  if (count > limits_.max_list_items) return Error{"list too large"};
  return {};
}

Result<Value> Interpreter::strftime_now(std::string_view format) {
  if (format.size() > 1024) return Error{"strftime_now format too long"};
  return Value::string(strftime_now_(format));
}

Result<Interpreter::Flow> Interpreter::exec_body(const Body& body, std::string& out) {
  for (const auto& stmt : body) {
    ASSIGN_OR_RETURN(const Flow flow, exec(*stmt, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::render_scoped(const Body& body, std::string& out) {
  Scope scope(*this, child_of(frame_));
  return exec_body(body, out);
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& s, std::string& out) {
  line_ = s.line;
  DepthGuard guard(eval_depth_);
  if (eval_depth_ > limits_.max_eval_depth) return Error{"template nesting too deep"};
  SPILLWAY_TRY(charge(1));
  auto emit = [&](const Value& v) -> Status {
    const size_t before = out.size();
    SPILLWAY_TRY(append_str(out, v, limits_.max_string_bytes));
    return charge_bytes(out.size() - before);
  };
  switch (s.type) {
    case StmtType::kText: {
      const auto& text = static_cast<const TextStmt&>(s).text;
      if (out.size() + text.size() > limits_.max_string_bytes) return Error{"output too large"};
      out += text;
      SPILLWAY_TRY(charge_bytes(text.size()));
      return Flow::kNormal;
    }
    case StmtType::kPrint: {
      ASSIGN_OR_RETURN(const Value v, eval(*static_cast<const PrintStmt&>(s).expr));
      SPILLWAY_TRY(emit(v));
      return Flow::kNormal;
    }
    case StmtType::kIf: {
      const auto& node = static_cast<const IfStmt&>(s);
      for (const auto& [test, body] : node.branches) {
        ASSIGN_OR_RETURN(const Value v, eval(*test));
        if (truthy(v)) return exec_body(body, out);
      }
      return exec_body(node.else_body, out);
    }
    case StmtType::kFor: return exec_for(static_cast<const ForStmt&>(s), out);
    case StmtType::kSet: {
      const auto& node = static_cast<const SetStmt&>(s);
      ASSIGN_OR_RETURN(Value v, eval(*node.value));
      SPILLWAY_TRY(assign(node.target, std::move(v)));
      return Flow::kNormal;
    }
    case StmtType::kSetBlock: {
      const auto& node = static_cast<const SetBlockStmt&>(s);
      std::string text;
      ASSIGN_OR_RETURN(const Flow flow, render_scoped(node.body, text));
      if (flow != Flow::kNormal) return flow;  // jinja2 inlines the body: break leaves the loop
      Value v = Value::string(std::move(text));
      if (node.filter) {
        ASSIGN_OR_RETURN(v, eval_filter(static_cast<const FilterExpr&>(*node.filter), &v));
      }
      SPILLWAY_TRY(assign(node.target, std::move(v)));
      return Flow::kNormal;
    }
    case StmtType::kMacro: {
      const auto& node = static_cast<const MacroStmt&>(s);
      auto macro = std::make_shared<Macro>();
      macro->name = node.name;
      macro->params = &node.params;
      macro->body = &node.body;
      macro->closure = frame_;
      macros_.push_back(macro);
      frame_->set(node.name, Value::object(macro));
      return Flow::kNormal;
    }
    case StmtType::kCallBlock: {
      const auto& node = static_cast<const CallBlockStmt&>(s);
      auto caller = std::make_shared<Macro>();
      caller->name = "caller";
      caller->params = &node.params;
      caller->body = &node.body;
      caller->closure = frame_;
      caller->is_caller = true;
      macros_.push_back(caller);
      ASSIGN_OR_RETURN(const Value v, eval_call(*node.call, Value::object(caller)));
      SPILLWAY_TRY(emit(v));
      return Flow::kNormal;
    }
    case StmtType::kFilterBlock: {
      const auto& node = static_cast<const FilterBlockStmt&>(s);
      std::string text;
      ASSIGN_OR_RETURN(const Flow flow, render_scoped(node.body, text));
      if (flow != Flow::kNormal) return flow;
      const Value input = Value::string(std::move(text));
      ASSIGN_OR_RETURN(const Value v, eval_filter(static_cast<const FilterExpr&>(*node.filter), &input));
      SPILLWAY_TRY(emit(v));
      return Flow::kNormal;
    }
    case StmtType::kBreak: return Flow::kBreak;
    case StmtType::kContinue: return Flow::kContinue;
    case StmtType::kWith: {
      const auto& node = static_cast<const WithStmt&>(s);
      std::vector<Value> values;
      for (const auto& [target, expr] : node.assignments) {
        ASSIGN_OR_RETURN(Value v, eval(*expr));
        values.push_back(std::move(v));
      }
      FramePtr f = child_of(frame_);
      for (size_t i = 0; i < values.size(); ++i) SPILLWAY_TRY(bind_target(*f, node.assignments[i].first, values[i]));
      Scope scope(*this, std::move(f));
      return exec_body(node.body, out);
    }
    case StmtType::kScope: {
      Scope scope(*this, child_of(frame_));
      return exec_body(static_cast<const ScopeStmt&>(s).body, out);
    }
    case StmtType::kUnsupported: return Error{static_cast<const UnsupportedStmt&>(s).message};
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::exec_for(const ForStmt& node, std::string& out) {
  ASSIGN_OR_RETURN(const Value iterable, eval(*node.iter));
  ASSIGN_OR_RETURN(std::vector<Value> items, iterate(iterable));
  if (node.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      FramePtr f = child_of(frame_);
      SPILLWAY_TRY(bind_target(*f, node.target, item));
      Scope scope(*this, std::move(f));
      ASSIGN_OR_RETURN(const Value keep, eval(*node.filter));
      if (truthy(keep)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  SPILLWAY_TRY(run_loop(node, std::move(items), 0, out));
  return Flow::kNormal;
}

Status Interpreter::run_loop(const ForStmt& node, std::vector<Value> items, int depth0, std::string& out) {
  if (items.empty()) {
    Scope scope(*this, child_of(frame_));
    ASSIGN_OR_RETURN(const Flow flow, exec_body(node.else_body, out));
    (void)flow;
    return {};
  }
  auto loop = std::make_shared<Loop>();
  loop->items = std::move(items);
  loop->depth0 = depth0;
  if (node.recursive) {
    loop->recursive = &node;
    loop->recursion_frame = frame_;
  }
  const Value loop_value = Value::object(loop);
  const FramePtr outer = frame_;
  for (size_t i = 0; i < loop->items.size(); ++i) {
    if (++loop_iterations_ > limits_.max_loop_iterations) return Error{"too many loop iterations"};
    loop->index0 = i;
    FramePtr f = child_of(outer);
    SPILLWAY_TRY(bind_target(*f, node.target, loop->items[i]));
    f->set("loop", loop_value);
    Scope scope(*this, std::move(f));
    ASSIGN_OR_RETURN(const Flow flow, exec_body(node.body, out));
    if (flow == Flow::kBreak) break;
  }
  return {};
}

Status Interpreter::bind_target(Frame& frame, const Target& target, const Value& value) {
  if (!target.is_tuple) {
    frame.set(target.names[0], value);
    return {};
  }
  if (!value.is_list() && !value.is_dict() && !value.is_string() && !value.is_undefined()) {
    return Error{"cannot unpack non-iterable " + py_type_name(value) + " object"};
  }
  ASSIGN_OR_RETURN(const std::vector<Value> parts, iterate(value));
  const size_t n = target.names.size();
  if (parts.size() < n) {
    return Error{"not enough values to unpack (expected " + std::to_string(n) + ", got " +
                 std::to_string(parts.size()) + ")"};
  }
  if (parts.size() > n) return Error{"too many values to unpack (expected " + std::to_string(n) + ")"};
  for (size_t i = 0; i < n; ++i) frame.set(target.names[i], parts[i]);
  return {};
}

Status Interpreter::assign(const Target& target, Value value) {
  if (target.ns_attr.empty()) return bind_target(*frame_, target, value);
  ASSIGN_OR_RETURN(const Value ns, lookup(target.names[0]));
  if (!ns.is_object() || ns.as_object().object_kind() != ObjectKind::kNamespace) {
    return Error{"cannot assign attribute on non-namespace object"};
  }
  if (value.depth() >= kMaxValueDepth) return Error{"value nested too deeply"};
  static_cast<Namespace&>(ns.as_object()).attrs.set(std::string_view(target.ns_attr), std::move(value));
  return {};
}

Result<Value> Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    if (const Value* v = f->find_local(name)) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Result<CallArgs> Interpreter::eval_args(const CallArgsExpr& c) {
  CallArgs out;
  for (const auto& a : c.args) {
    ASSIGN_OR_RETURN(Value v, eval(*a));
    out.args.push_back(std::move(v));
  }
  if (c.dyn_args) {
    ASSIGN_OR_RETURN(const Value v, eval(*c.dyn_args));
    ASSIGN_OR_RETURN(std::vector<Value> extra, iterate(v));
    for (Value& x : extra) out.args.push_back(std::move(x));
  }
  for (const auto& [key, expr] : c.kwargs) {
    ASSIGN_OR_RETURN(Value v, eval(*expr));
    out.kwargs.emplace_back(key, std::move(v));
  }
  if (c.dyn_kwargs) {
    ASSIGN_OR_RETURN(const Value v, eval(*c.dyn_kwargs));
    if (!v.is_dict()) return Error{"argument after ** must be a mapping, not " + py_type_name(v)};
    for (const auto& [k, x] : v.as_dict().entries) {
      if (!k.is_string()) return Error{"keywords must be strings"};
      out.kwargs.emplace_back(k.as_string(), x);
    }
  }
  return out;
}

Result<Value> Interpreter::eval_filter(const FilterExpr& e, const Value* block_input) {
  Value operand;
  if (!e.operand) {
    operand = *block_input;
  } else if (block_input != nullptr && e.operand->type == ExprType::kFilter) {
    ASSIGN_OR_RETURN(operand, eval_filter(static_cast<const FilterExpr&>(*e.operand), block_input));
  } else {
    ASSIGN_OR_RETURN(operand, eval(*e.operand));
  }
  ASSIGN_OR_RETURN(CallArgs args, eval_args(e.call));
  line_ = e.line;
  return call_filter(e.name, operand, std::move(args));
}

Result<Value> Interpreter::call_filter(std::string_view name, const Value& operand, CallArgs args) {
  auto r = apply_filter(*this, name, operand, args);
  if (!r) return Error{"No filter named '" + std::string(name) + "'."};
  return std::move(*r);
}

Result<bool> Interpreter::call_test(std::string_view name, const Value& operand, CallArgs args) {
  auto r = apply_test(*this, name, operand, args);
  if (!r) return Error{"No test named '" + std::string(name) + "'."};
  return std::move(*r);
}

Result<Value> Interpreter::eval(const Expr& e) {
  line_ = e.line;
  DepthGuard guard(eval_depth_);
  if (eval_depth_ > limits_.max_eval_depth) return Error{"template nesting too deep"};
  SPILLWAY_TRY(charge(1));
  switch (e.type) {
    case ExprType::kConst: return static_cast<const ConstExpr&>(e).value;
    case ExprType::kName: return lookup(static_cast<const NameExpr&>(e).name);
    case ExprType::kList:
    case ExprType::kTuple: {
      const auto& items = static_cast<const SequenceExpr&>(e).items;
      std::vector<Value> values;
      values.reserve(items.size());
      for (const auto& i : items) {
        ASSIGN_OR_RETURN(Value v, eval(*i));
        values.push_back(std::move(v));
      }
      return Value::list(make_list(std::move(values), e.type == ExprType::kList ? ListFlavor::kList : ListFlavor::kTuple));
    }
    case ExprType::kDict: {
      DictPtr d = make_dict();
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        ASSIGN_OR_RETURN(Value key, eval(*k));
        ASSIGN_OR_RETURN(Value value, eval(*v));
        if (key.is_list() || key.is_dict() || key.is_undefined()) {
          if (key.is_undefined()) return Error{key.undefined_message()};
          return Error{"unhashable type: '" + py_type_name(key) + "'"};
        }
        d->set(std::move(key), std::move(value));
      }
      return Value::dict(std::move(d));
    }
    case ExprType::kGetAttr: {
      const auto& g = static_cast<const GetAttrExpr&>(e);
      ASSIGN_OR_RETURN(const Value obj, eval(*g.object));
      return getattr(obj, g.attr);
    }
    case ExprType::kGetItem: {
      const auto& g = static_cast<const GetItemExpr&>(e);
      ASSIGN_OR_RETURN(const Value obj, eval(*g.object));
      if (g.key->type == ExprType::kSlice) {
        const auto& s = static_cast<const SliceExpr&>(*g.key);
        Value bounds[3] = {Value::none(), Value::none(), Value::none()};
        const Expr* exprs[3] = {s.start.get(), s.stop.get(), s.step.get()};
        for (int i = 0; i < 3; ++i) {
          if (exprs[i] != nullptr) {
            ASSIGN_OR_RETURN(bounds[i], eval(*exprs[i]));
          }
        }
        return slice(obj, bounds[0], bounds[1], bounds[2]);
      }
      ASSIGN_OR_RETURN(const Value key, eval(*g.key));
      return getitem(obj, key);
    }
    case ExprType::kSlice: return Error{"slice outside of a subscript"};
    case ExprType::kUnary: {
      const auto& u = static_cast<const UnaryExpr&>(e);
      ASSIGN_OR_RETURN(const Value v, eval(*u.operand));
      if (u.op == UnaryOp::kNot) return Value::boolean(!truthy(v));
      return unary_op(u.op, v);
    }
    case ExprType::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      ASSIGN_OR_RETURN(Value left, eval(*b.left));
      if (b.op == BinaryOp::kAnd) {
        if (!truthy(left)) return left;
        return eval(*b.right);
      }
      if (b.op == BinaryOp::kOr) {
        if (truthy(left)) return left;
        return eval(*b.right);
      }
      ASSIGN_OR_RETURN(const Value right, eval(*b.right));
      line_ = b.line;
      return binary_op(b.op, left, right);
    }
    case ExprType::kConcat: {
      std::string s;
      for (const auto& i : static_cast<const ConcatExpr&>(e).items) {
        ASSIGN_OR_RETURN(const Value v, eval(*i));
        SPILLWAY_TRY(append_str(s, v, limits_.max_string_bytes));
      }
      SPILLWAY_TRY(charge_bytes(s.size()));
      return Value::string(std::move(s));
    }
    case ExprType::kCompare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      ASSIGN_OR_RETURN(Value left, eval(*c.first));
      for (const auto& [op, expr] : c.rest) {
        ASSIGN_OR_RETURN(Value right, eval(*expr));
        line_ = c.line;
        ASSIGN_OR_RETURN(const bool ok, compare_op(op, left, right));
        if (!ok) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprType::kCondExpr: {
      const auto& c = static_cast<const CondExpr&>(e);
      ASSIGN_OR_RETURN(const Value test, eval(*c.test));
      if (truthy(test)) return eval(*c.then_expr);
      if (c.else_expr) return eval(*c.else_expr);
      return Value::undefined("the inline if-expression on line " + std::to_string(c.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprType::kCall: return eval_call(static_cast<const CallExpr&>(e), std::nullopt);
    case ExprType::kFilter: return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
    case ExprType::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      ASSIGN_OR_RETURN(const Value operand, eval(*t.operand));
      ASSIGN_OR_RETURN(CallArgs args, eval_args(t.call));
      line_ = t.line;
      ASSIGN_OR_RETURN(const bool r, call_test(t.name, operand, std::move(args)));
      return Value::boolean(r);
    }
  }
  return Error{"unknown expression"};
}

Result<Value> Interpreter::eval_call(const CallExpr& e, std::optional<Value> caller) {
  Value callee;
  if (e.callee->type == ExprType::kGetAttr) {
    const auto& g = static_cast<const GetAttrExpr&>(*e.callee);
    ASSIGN_OR_RETURN(const Value obj, eval(*g.object));
    if (obj.is_undefined()) return Error{obj.undefined_message()};
    if (has_method(obj, g.attr) && !g.attr.starts_with("_")) {
      if (is_unsafe_method(obj, g.attr)) {
        return Error{"access to attribute '" + g.attr + "' of '" + py_type_name(obj) + "' object is unsafe."};
      }
      ASSIGN_OR_RETURN(CallArgs args, eval_args(e.call));
      if (caller) args.kwargs.emplace_back("caller", *caller);
      line_ = e.line;
      return call_method(obj, g.attr, std::move(args));
    }
    ASSIGN_OR_RETURN(callee, getattr(obj, g.attr));
  } else {
    ASSIGN_OR_RETURN(callee, eval(*e.callee));
  }
  ASSIGN_OR_RETURN(CallArgs args, eval_args(e.call));
  if (caller) args.kwargs.emplace_back("caller", *caller);
  line_ = e.line;
  return call(callee, std::move(args));
}

Result<Value> Interpreter::call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) return Error{callee.undefined_message()};
  if (!callee.is_object()) return Error{"'" + py_type_name(callee) + "' object is not callable"};
  Object& obj = callee.as_object();
  switch (obj.object_kind()) {
    case ObjectKind::kMacro: return call_macro(static_cast<Macro&>(obj), std::move(args));
    case ObjectKind::kBuiltin: return static_cast<Builtin&>(obj).fn(*this, args);
    case ObjectKind::kBoundMethod: {
      auto& m = static_cast<BoundMethod&>(obj);
      return call_method(m.receiver, m.name, std::move(args));
    }
    case ObjectKind::kLoop: return call_loop(static_cast<Loop&>(obj), std::move(args));
    case ObjectKind::kJoiner: {
      auto& j = static_cast<Joiner&>(obj);
      if (!args.args.empty() || !args.kwargs.empty()) return Error{"joiner takes no arguments"};
      if (!j.used) {
        j.used = true;
        return Value::string("");
      }
      return Value::string(j.separator);
    }
    default: return Error{"'" + obj.type_name() + "' object is not callable"};
  }
}

Result<Value> Interpreter::call_method(const Value& receiver, const std::string& name, CallArgs args) {
  if (receiver.is_object()) {
    Object& obj = receiver.as_object();
    if (obj.object_kind() == ObjectKind::kLoop) {
      auto& loop = static_cast<Loop&>(obj);
      if (!args.kwargs.empty()) return Error{name + "() takes no keyword arguments"};
      if (name == "cycle") {
        if (args.args.empty()) return Error{"no items for cycling given"};
        return args.args[loop.index0 % args.args.size()];
      }
      if (name == "changed") {
        const Value current = Value::list(make_list(std::move(args.args), ListFlavor::kTuple));
        if (loop.last_changed) {
          ASSIGN_OR_RETURN(const bool same, py_equal(*loop.last_changed, current));
          if (same) return Value::boolean(false);
        }
        loop.last_changed = current;
        return Value::boolean(true);
      }
    }
    if (obj.object_kind() == ObjectKind::kCycler) {
      auto& c = static_cast<Cycler&>(obj);
      if (name == "next") {
        if (c.items.empty()) return Value::none();
        Value v = c.items[c.pos];
        c.pos = (c.pos + 1) % c.items.size();
        return v;
      }
      if (name == "reset") {
        c.pos = 0;
        return Value::none();
      }
    }
  }
  return call_builtin_method(*this, receiver, name, args);
}

Result<Value> Interpreter::call_macro(const Macro& macro, CallArgs args) {
  if (call_depth_ >= limits_.max_call_depth) return Error{"macro calls nested too deeply"};
  DepthGuard guard(call_depth_);
  SPILLWAY_TRY(charge(1));
  const MacroParams& p = *macro.params;
  const std::string display = macro.is_caller ? "caller" : macro.name;
  FramePtr f = child_of(macro.closure);
  Scope scope(*this, f);
  const size_t n = p.names.size();
  const size_t first_default = n - p.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = p.names[i];
    Value v;
    bool given = false;
    if (i < args.args.size()) {
      v = args.args[i], given = true;
    } else {
      for (auto it = args.kwargs.begin(); it != args.kwargs.end(); ++it) {
        if (it->first == name) {
          v = std::move(it->second), given = true;
          args.kwargs.erase(it);
          break;
        }
      }
    }
    if (!given) {
      if (i >= first_default) {
        ASSIGN_OR_RETURN(v, eval(*p.defaults[i - first_default]));
      } else {
        v = Value::undefined("parameter '" + name + "' was not provided");
      }
    }
    f->set(name, std::move(v));
  }
  if (p.uses_caller) {
    Value caller = Value::undefined("No caller defined");
    for (auto it = args.kwargs.begin(); it != args.kwargs.end(); ++it) {
      if (it->first == "caller") {
        caller = std::move(it->second);
        args.kwargs.erase(it);
        break;
      }
    }
    f->set("caller", std::move(caller));
  }
  if (p.uses_kwargs) {
    DictPtr kw = make_dict();
    for (auto& [k, v] : args.kwargs) kw->set(std::string_view(k), std::move(v));
    f->set("kwargs", Value::dict(std::move(kw)));
  } else if (!args.kwargs.empty()) {
    if (args.kwargs[0].first == "caller") {
      return Error{"macro '" + display + "' was invoked with two values for the special caller argument. This is most likely a bug."};
    }
    return Error{"macro '" + display + "' takes no keyword argument '" + args.kwargs[0].first + "'"};
  }
  if (p.uses_varargs) {
    std::vector<Value> extra;
    for (size_t i = n; i < args.args.size(); ++i) extra.push_back(args.args[i]);
    f->set("varargs", Value::list(make_list(std::move(extra), ListFlavor::kTuple)));
  } else if (args.args.size() > n) {
    return Error{"macro '" + display + "' takes not more than " + std::to_string(n) + " argument(s)"};
  }
  std::string out;
  ASSIGN_OR_RETURN(const Flow flow, exec_body(*macro.body, out));
  (void)flow;
  return Value::string(std::move(out));
}

Result<Value> Interpreter::call_loop(Loop& loop, CallArgs args) {
  if (loop.recursive == nullptr) {
    return Error{"The loop must have the 'recursive' marker to be called recursively."};
  }
  if (args.args.size() != 1 || !args.kwargs.empty()) return Error{"loop() takes exactly one argument"};
  FramePtr frame = loop.recursion_frame.lock();
  if (!frame) return Error{"a recursive loop was called after it ended"};
  if (call_depth_ >= limits_.max_call_depth) return Error{"recursive loop nested too deeply"};
  DepthGuard guard(call_depth_);
  ASSIGN_OR_RETURN(std::vector<Value> items, iterate(args.args[0]));
  std::string out;
  Scope scope(*this, frame);
  SPILLWAY_TRY(run_loop(*loop.recursive, std::move(items), loop.depth0 + 1, out));
  return Value::string(std::move(out));
}

}  // namespace spillway::jinja
