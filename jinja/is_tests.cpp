// jinja2's tests (`x is defined`, `x is divisibleby 3`, ...), as in jinja2 3.1.2.
#include "jinja/interp.h"
#include "jinja/parser.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja {
namespace {

Result<const Value*> one_arg(std::string_view name, const CallArgs& call) {
  if (call.args.size() + call.kwargs.size() != 1) {
    return Error{std::string(name) + "() takes exactly one argument (" +
                 std::to_string(call.args.size() + call.kwargs.size()) + " given)"};
  }
  return call.args.empty() ? &call.kwargs[0].second : &call.args[0];
}

Status no_args(std::string_view name, const CallArgs& call) {
  if (!call.args.empty() || !call.kwargs.empty()) {
    return Error{std::string(name) + "() takes 1 positional argument but " +
                 std::to_string(1 + call.args.size() + call.kwargs.size()) + " were given"};
  }
  return {};
}

bool is_sequence(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kDict: return true;
    case Kind::kList: {
      const ListFlavor f = v.as_list().flavor;
      return f == ListFlavor::kList || f == ListFlavor::kTuple || f == ListFlavor::kRange;
    }
    default: return false;
  }
}

bool is_iterable(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kString:
    case Kind::kDict:
    case Kind::kList: return true;
    case Kind::kObject: return v.as_object().object_kind() == ObjectKind::kLoop;
    default: return false;
  }
}

bool is_callable(const Value& v) {
  if (v.is_undefined()) return true;  // jinja2's Undefined defines __call__ (to fail)
  if (!v.is_object()) return false;
  const ObjectKind k = v.as_object().object_kind();
  return k == ObjectKind::kMacro || k == ObjectKind::kBuiltin || k == ObjectKind::kBoundMethod ||
         k == ObjectKind::kLoop || k == ObjectKind::kJoiner;
}

// Python `is`: singletons, CPython's small-int cache, and object identity.
bool same_object(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kNone: return true;
    case Kind::kBool: return a.as_bool() == b.as_bool();
    case Kind::kInt: return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
    case Kind::kFloat: return false;
    case Kind::kString: return a.string_ptr() == b.string_ptr();
    case Kind::kList: return a.list_ptr() == b.list_ptr();
    case Kind::kDict: return a.dict_ptr() == b.dict_ptr();
    case Kind::kObject: return a.object_ptr() == b.object_ptr();
  }
  return false;
}

Result<bool> remainder_is(Interpreter& interp, const Value& v, const Value& divisor, int64_t expected) {
  auto r = interp.binary_op(BinaryOp::kMod, v, divisor);
  if (!r.ok()) return r.error();
  return py_equal(*r, Value::integer(expected));
}

}  // namespace

std::optional<Result<bool>> apply_test(Interpreter& interp, std::string_view name, const Value& v,
                                       const CallArgs& call) {
  using R = Result<bool>;
  // Comparison tests take one argument.
  std::optional<CompareOp> cmp;
  if (name == "==" || name == "eq" || name == "equalto") cmp = CompareOp::kEq;
  else if (name == "!=" || name == "ne") cmp = CompareOp::kNe;
  else if (name == ">" || name == "gt" || name == "greaterthan") cmp = CompareOp::kGt;
  else if (name == ">=" || name == "ge") cmp = CompareOp::kGe;
  else if (name == "<" || name == "lt" || name == "lessthan") cmp = CompareOp::kLt;
  else if (name == "<=" || name == "le") cmp = CompareOp::kLe;
  else if (name == "in") cmp = CompareOp::kIn;
  if (cmp || name == "sameas" || name == "divisibleby") {
    auto arg = one_arg(name, call);
    if (!arg.ok()) return R(arg.error());
    if (cmp) return interp.compare_op(*cmp, v, **arg);
    if (name == "sameas") return R(same_object(v, **arg));
    return remainder_is(interp, v, **arg, 0);
  }
  if (is_known_test(name)) {
    if (auto s = no_args(name, call); !s.ok()) return R(s.error());
  }
  if (name == "defined") return R(!v.is_undefined());
  if (name == "undefined") return R(v.is_undefined());
  if (name == "none") return R(v.is_none());
  if (name == "boolean") return R(v.is_bool());
  if (name == "true") return R(v.is_bool() && v.as_bool());
  if (name == "false") return R(v.is_bool() && !v.as_bool());
  if (name == "integer") return R(v.is_int());
  if (name == "float") return R(v.is_float());
  if (name == "number") return R(v.is_number());
  if (name == "string") return R(v.is_string());
  if (name == "mapping") return R(v.is_dict());
  if (name == "sequence") return R(is_sequence(v));
  if (name == "iterable") return R(is_iterable(v));
  if (name == "callable") return R(is_callable(v));
  if (name == "escaped") return R(false);
  if (name == "odd") return remainder_is(interp, v, Value::integer(2), 1);
  if (name == "even") return remainder_is(interp, v, Value::integer(2), 0);
  if (name == "lower" || name == "upper") {
    auto s = interp.to_str(v);
    if (!s.ok()) return R(s.error());
    CallArgs none;
    auto r = call_builtin_method(interp, Value::string(std::move(s).value()), name == "lower" ? "islower" : "isupper", none);
    if (!r.ok()) return R(r.error());
    return R(r->as_bool());
  }
  if (name == "filter") return R(v.is_string() && is_known_filter(v.as_string()));
  if (name == "test") return R(v.is_string() && is_known_test(v.as_string()));
  return std::nullopt;
}

}  // namespace spillway::jinja
