// Operators, attribute and item access and iteration, with Python semantics and the
// sandbox's attribute rules (see jinja_interp.h).
#include <cmath>
#include <limits>

#include "jinja/interp.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja {


namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kFloorDiv: return "//";
    case BinaryOp::kMod: return "%";
    case BinaryOp::kPow: return "** or pow()";
    default: return "?";
  }
}

Error unsupported(BinaryOp op, const Value& a, const Value& b) {
  return Error{std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + py_type_name(a) +
               "' and '" + py_type_name(b) + "'"};
}

Error overflow() { return Error{"integer overflow (this interpreter's integers are 64-bit)"}; }

double py_fmod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double py_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
  }
  return std::copysign(0.0, a / b);
}

bool is_seq(const Value& v, ListFlavor f) { return v.is_list() && v.as_list().flavor == f; }

Value make_undefined_attr(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute " + string_repr(name));
}

Value make_undefined_item(const Value& obj, const Value& key) {
  if (key.is_string()) return make_undefined_attr(obj, key.as_string());
  auto r = py_repr(key, 4096);
  return Value::undefined(object_type_repr(obj) + " has no element " + (r.ok() ? *r : "?"));
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + py_type_name(obj) + "' object is unsafe.", true);
}

struct SliceBounds {
  int64_t lo = 0, hi = 0, step = 1;  // slice.indices(length)
  std::vector<size_t> indices;
};

// Python's slice.indices(length) and the resulting index sequence.
Result<SliceBounds> slice_indices(const Value& start, const Value& stop, const Value& step, size_t length) {
  auto as_index = [](const Value& v, std::optional<int64_t>& out) -> Status {
    if (v.is_none()) return {};
    if (v.is_undefined()) return Error{v.undefined_message()};
    if (!v.is_integral()) return Error{"slice indices must be integers or None or have an __index__ method"};
    out = v.to_int();
    return {};
  };
  std::optional<int64_t> a, b, c;
  SPILLWAY_TRY(as_index(start, a));
  SPILLWAY_TRY(as_index(stop, b));
  SPILLWAY_TRY(as_index(step, c));
  const int64_t st = c.value_or(1);
  if (st == 0) return Error{"slice step cannot be zero"};
  const auto len = static_cast<int64_t>(length);
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= len) {
      x = st < 0 ? len - 1 : len;
    }
    return x;
  };
  SliceBounds out;
  out.lo = adjust(a, st < 0 ? len - 1 : 0);
  out.hi = adjust(b, st < 0 ? -1 : len);
  out.step = st;
  // 128-bit index: lo + k * step never overflows however large the step.
  if (st > 0) {
    for (__int128 i = out.lo; i < out.hi; i += st) out.indices.push_back(static_cast<size_t>(i));
  } else {
    for (__int128 i = out.lo; i > out.hi; i += st) out.indices.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace

Result<std::string> Interpreter::to_str(const Value& v) {
  ASSIGN_OR_RETURN(std::string s, py_str(v, limits_.max_string_bytes));
  SPILLWAY_TRY(charge_bytes(s.size()));
  return s;
}

Result<Value> Interpreter::unary_op(UnaryOp op, const Value& v) {
  if (v.is_undefined()) return Error{v.undefined_message()};
  if (op == UnaryOp::kNot) return Value::boolean(!truthy(v));
  if (v.is_float()) return Value::number(op == UnaryOp::kNeg ? -v.as_float() : v.as_float());
  if (v.is_integral()) {
    const int64_t i = v.to_int();
    if (op == UnaryOp::kPos) return Value::integer(i);
    if (i == std::numeric_limits<int64_t>::min()) return overflow();
    return Value::integer(-i);
  }
  return Error{std::string("bad operand type for unary ") + (op == UnaryOp::kNeg ? "-" : "+") + ": '" +
               py_type_name(v) + "'"};
}

Result<Value> Interpreter::binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return Error{a.undefined_message()};
  if (b.is_undefined()) return Error{b.undefined_message()};
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float() || op == BinaryOp::kDiv) {
      const double x = a.to_double();
      const double y = b.to_double();
      switch (op) {
        case BinaryOp::kAdd: return Value::number(x + y);
        case BinaryOp::kSub: return Value::number(x - y);
        case BinaryOp::kMul: return Value::number(x * y);
        case BinaryOp::kDiv:
          if (y == 0) return Error{a.is_float() || b.is_float() ? "float division by zero" : "division by zero"};
          return Value::number(x / y);
        case BinaryOp::kFloorDiv:
          if (y == 0) return Error{"float floor division by zero"};
          return Value::number(py_floordiv(x, y));
        case BinaryOp::kMod:
          if (y == 0) return Error{"float modulo"};
          return Value::number(py_fmod(x, y));
        case BinaryOp::kPow: {
          if (x == 0 && y < 0) return Error{"0.0 cannot be raised to a negative power"};
          if (x < 0 && y != std::floor(y)) return Error{"complex numbers are not supported"};
          return Value::number(std::pow(x, y));
        }
        default: break;
      }
    } else {
      const int64_t x = a.to_int();
      const int64_t y = b.to_int();
      int64_t r = 0;
      switch (op) {
        case BinaryOp::kAdd:
          if (__builtin_add_overflow(x, y, &r)) return overflow();
          return Value::integer(r);
        case BinaryOp::kSub:
          if (__builtin_sub_overflow(x, y, &r)) return overflow();
          return Value::integer(r);
        case BinaryOp::kMul:
          if (__builtin_mul_overflow(x, y, &r)) return overflow();
          return Value::integer(r);
        case BinaryOp::kFloorDiv:
        case BinaryOp::kMod: {
          if (y == 0) return Error{op == BinaryOp::kMod ? "integer modulo by zero" : "integer division or modulo by zero"};
          if (x == std::numeric_limits<int64_t>::min() && y == -1) {
            if (op == BinaryOp::kMod) return Value::integer(0);
            return overflow();
          }
          int64_t q = x / y;
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) {
            m += y;
            q -= 1;
          }
          return Value::integer(op == BinaryOp::kMod ? m : q);
        }
        case BinaryOp::kPow: {
          if (y < 0) {
            if (x == 0) return Error{"0.0 cannot be raised to a negative power"};
            return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
          }
          int64_t result = 1;
          int64_t base = x;
          int64_t e = y;
          while (e > 0) {
            if (e & 1) {
              if (__builtin_mul_overflow(result, base, &result)) return overflow();
            }
            e >>= 1;
            if (e > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
          }
          return Value::integer(result);
        }
        default: break;
      }
    }
  }
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_string()) {
        if (!b.is_string()) {
          return Error{"can only concatenate str (not \"" + py_type_name(b) + "\") to str"};
        }
        SPILLWAY_TRY(charge_bytes(a.as_string().size() + b.as_string().size()));
        return Value::string(a.as_string() + b.as_string());
      }
      if (is_seq(a, ListFlavor::kList) || is_seq(a, ListFlavor::kTuple)) {
        const ListFlavor f = a.as_list().flavor;
        if (!is_seq(b, f)) {
          return Error{"can only concatenate " + py_type_name(a) + " (not \"" + py_type_name(b) + "\") to " +
                       py_type_name(a)};
        }
        const auto& x = a.as_list().items;
        const auto& y = b.as_list().items;
        SPILLWAY_TRY(check_items(x.size() + y.size()));
        SPILLWAY_TRY(charge(static_cast<int64_t>(x.size() + y.size())));
        std::vector<Value> items;
        items.reserve(x.size() + y.size());
        items.insert(items.end(), x.begin(), x.end());
        items.insert(items.end(), y.begin(), y.end());
        return Value::list(make_list(std::move(items), f));
      }
      return unsupported(op, a, b);
    case BinaryOp::kMul: {
      const Value* seq = nullptr;
      const Value* count = nullptr;
      if (b.is_integral() && (a.is_string() || is_seq(a, ListFlavor::kList) || is_seq(a, ListFlavor::kTuple))) {
        seq = &a, count = &b;
      } else if (a.is_integral() &&
                 (b.is_string() || is_seq(b, ListFlavor::kList) || is_seq(b, ListFlavor::kTuple))) {
        seq = &b, count = &a;
      }
      if (seq == nullptr) {
        if ((a.is_string() || a.is_list()) && !b.is_integral()) {
          return Error{"can't multiply sequence by non-int of type '" + py_type_name(b) + "'"};
        }
        return unsupported(op, a, b);
      }
      const int64_t n = std::max<int64_t>(0, count->to_int());
      if (seq->is_string()) {
        const std::string& s = seq->as_string();
        if (!s.empty() && static_cast<uint64_t>(n) > limits_.max_string_bytes / s.size()) {
          return Error{"string too large"};
        }
        SPILLWAY_TRY(charge_bytes(s.size() * static_cast<size_t>(n)));
        std::string out;
        out.reserve(s.size() * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += s;
        return Value::string(std::move(out));
      }
      const auto& items = seq->as_list().items;
      if (!items.empty() && static_cast<uint64_t>(n) > limits_.max_list_items / items.size()) {
        return Error{"list too large"};
      }
      SPILLWAY_TRY(charge(static_cast<int64_t>(items.size()) * n));
      std::vector<Value> out;
      out.reserve(items.size() * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
      return Value::list(make_list(std::move(out), seq->as_list().flavor));
    }
    case BinaryOp::kMod:
      if (a.is_string()) {
        ASSIGN_OR_RETURN(std::string s, percent_format(*this, a.as_string(), b));
        SPILLWAY_TRY(charge_bytes(s.size()));
        return Value::string(std::move(s));
      }
      return unsupported(op, a, b);
    default: return unsupported(op, a, b);
  }
}

Result<bool> Interpreter::contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined: return false;
    case Kind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) return Error{item.undefined_message()};
        return Error{"'in <string>' requires string as left operand, not " + py_type_name(item)};
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Kind::kDict:
      if (item.is_list() || item.is_dict()) return Error{"unhashable type: '" + py_type_name(item) + "'"};
      return container.as_dict().find(item) != nullptr;
    case Kind::kList: {
      List& l = container.as_list();
      SPILLWAY_TRY(charge(static_cast<int64_t>(l.items.size())));
      for (size_t i = 0; i < l.items.size(); ++i) {
        ASSIGN_OR_RETURN(const bool eq, py_equal(l.items[i], item));
        if (eq) {
          if (l.is_iterator()) l.items.erase(l.items.begin(), l.items.begin() + static_cast<std::ptrdiff_t>(i) + 1);
          return true;
        }
      }
      if (l.is_iterator()) l.items.clear();
      return false;
    }
    default: return Error{"argument of type '" + py_type_name(container) + "' is not iterable"};
  }
}

Result<bool> Interpreter::compare_op(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq: return py_equal(a, b);
    case CompareOp::kNe: {
      ASSIGN_OR_RETURN(const bool eq, py_equal(a, b));
      return !eq;
    }
    case CompareOp::kLt:
    case CompareOp::kGt:
    case CompareOp::kLe:
    case CompareOp::kGe: {
      const char* sym = op == CompareOp::kLt ? "<" : op == CompareOp::kGt ? ">" : op == CompareOp::kLe ? "<=" : ">=";
      ASSIGN_OR_RETURN(const int c, py_compare(a, b, sym));
      if (c == 2) return false;
      if (op == CompareOp::kLt) return c < 0;
      if (op == CompareOp::kGt) return c > 0;
      if (op == CompareOp::kLe) return c <= 0;
      return c >= 0;
    }
    case CompareOp::kIn: return contains(b, a);
    case CompareOp::kNotIn: {
      ASSIGN_OR_RETURN(const bool in, contains(b, a));
      return !in;
    }
  }
  return false;
}

Result<Value> Interpreter::slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return Error{obj.undefined_message()};
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> off = utf8_offsets(s);
    ASSIGN_OR_RETURN(const SliceBounds b, slice_indices(start, stop, step, off.size() - 1));
    std::string out;
    for (size_t i : b.indices) out.append(s, off[i], off[i + 1] - off[i]);
    SPILLWAY_TRY(charge_bytes(out.size()));
    return Value::string(std::move(out));
  }
  if (obj.is_list() && !obj.as_list().is_iterator() && obj.as_list().flavor != ListFlavor::kDictKeys &&
      obj.as_list().flavor != ListFlavor::kDictValues && obj.as_list().flavor != ListFlavor::kDictItems) {
    const List& l = obj.as_list();
    ASSIGN_OR_RETURN(const SliceBounds b, slice_indices(start, stop, step, l.items.size()));
    SPILLWAY_TRY(charge(static_cast<int64_t>(b.indices.size())));
    std::vector<Value> out;
    out.reserve(b.indices.size());
    for (size_t i : b.indices) out.push_back(l.items[i]);
    if (l.flavor == ListFlavor::kRange) {
      const __int128 start = static_cast<__int128>(l.range_start) + static_cast<__int128>(b.lo) * l.range_step;
      const __int128 stop = static_cast<__int128>(l.range_start) + static_cast<__int128>(b.hi) * l.range_step;
      const __int128 step = static_cast<__int128>(l.range_step) * b.step;
      auto fits = [](__int128 x) { return x >= INT64_MIN && x <= INT64_MAX; };
      if (!fits(start) || !fits(stop) || !fits(step)) {  // only repr() would need the big bounds
        return Value::list(make_list(std::move(out)));
      }
      ListPtr r = make_list(std::move(out), ListFlavor::kRange);
      r->range_start = static_cast<int64_t>(start);
      r->range_stop = static_cast<int64_t>(stop);
      r->range_step = static_cast<int64_t>(step);
      return Value::list(std::move(r));
    }
    return Value::list(make_list(std::move(out), l.flavor == ListFlavor::kTuple ? ListFlavor::kTuple : ListFlavor::kList));
  }
  auto r = [](const Value& v) {
    auto s = py_repr(v, 256);
    return s.ok() ? *s : std::string("?");
  };
  return Value::undefined(object_type_repr(obj) + " has no element slice(" + r(start) + ", " + r(stop) + ", " +
                          r(step) + ")");
}

Result<std::vector<Value>> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return std::vector<Value>{};
    case Kind::kList: {
      List& l = v.as_list();
      SPILLWAY_TRY(charge(static_cast<int64_t>(l.items.size())));
      if (l.is_iterator()) {  // consumed, as a Python iterator
        std::vector<Value> items = std::move(l.items);
        l.items.clear();
        return items;
      }
      return l.items;
    }
    case Kind::kDict: {
      const Dict& d = v.as_dict();
      SPILLWAY_TRY(charge(static_cast<int64_t>(d.size())));
      std::vector<Value> keys;
      keys.reserve(d.size());
      for (const auto& [k, x] : d.entries) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      const std::string& s = v.as_string();
      SPILLWAY_TRY(charge(static_cast<int64_t>(s.size())));
      std::vector<Value> chars;
      size_t pos = 0;
      while (pos < s.size()) {
        const size_t start = pos;
        utf8_next(s, pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    default: return Error{"'" + py_type_name(v) + "' object is not iterable"};
  }
}

Result<Value> Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return Error{obj.undefined_message()};
  if (name.starts_with("__")) return unsafe(obj, name);
  switch (obj.kind()) {
    case Kind::kDict: {
      if (has_method(obj, name)) {
        if (is_unsafe_method(obj, name)) return unsafe(obj, name);
        return Value::object(std::make_shared<BoundMethod>(obj, name));
      }
      if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
      return make_undefined_attr(obj, name);
    }
    case Kind::kString:
    case Kind::kList:
      if (has_method(obj, name)) {
        if (is_unsafe_method(obj, name)) return unsafe(obj, name);
        return Value::object(std::make_shared<BoundMethod>(obj, name));
      }
      return make_undefined_attr(obj, name);
    case Kind::kObject: {
      Object& o = obj.as_object();
      switch (o.object_kind()) {
        case ObjectKind::kNamespace:
          if (const Value* v = static_cast<Namespace&>(o).attrs.find(std::string_view(name))) return *v;
          return make_undefined_attr(obj, name);
        case ObjectKind::kLoop: {
          const auto& l = static_cast<Loop&>(o);
          const auto index0 = static_cast<int64_t>(l.index0);
          const auto length = static_cast<int64_t>(l.items.size());
          if (name == "index0") return Value::integer(index0);
          if (name == "index") return Value::integer(index0 + 1);
          if (name == "revindex0") return Value::integer(length - index0 - 1);
          if (name == "revindex") return Value::integer(length - index0);
          if (name == "first") return Value::boolean(index0 == 0);
          if (name == "last") return Value::boolean(index0 + 1 == length);
          if (name == "length") return Value::integer(length);
          if (name == "depth0") return Value::integer(l.depth0);
          if (name == "depth") return Value::integer(l.depth0 + 1);
          if (name == "previtem") {
            if (index0 == 0) return Value::undefined("there is no previous item");
            return l.items[l.index0 - 1];
          }
          if (name == "nextitem") {
            if (index0 + 1 >= length) return Value::undefined("there is no next item");
            return l.items[l.index0 + 1];
          }
          if (name == "cycle" || name == "changed") return Value::object(std::make_shared<BoundMethod>(obj, name));
          return make_undefined_attr(obj, name);
        }
        case ObjectKind::kMacro: {
          const auto& m = static_cast<Macro&>(o);
          if (name == "name") return Value::string(m.is_caller ? "caller" : m.name);
          if (name == "arguments") {
            std::vector<Value> names;
            for (const auto& n : m.params->names) names.push_back(Value::string(n));
            return Value::list(make_list(std::move(names), ListFlavor::kTuple));
          }
          if (name == "catch_kwargs") return Value::boolean(m.params->uses_kwargs);
          if (name == "catch_varargs") return Value::boolean(m.params->uses_varargs);
          if (name == "caller") return Value::boolean(m.params->uses_caller);
          return make_undefined_attr(obj, name);
        }
        case ObjectKind::kCycler: {
          auto& c = static_cast<Cycler&>(o);
          if (name == "current") return c.items.empty() ? Value::none() : c.items[c.pos];
          if (name == "next" || name == "reset") return Value::object(std::make_shared<BoundMethod>(obj, name));
          return make_undefined_attr(obj, name);
        }
        default: return make_undefined_attr(obj, name);
      }
    }
    default: return make_undefined_attr(obj, name);
  }
}

Result<Value> Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return Error{obj.undefined_message()};
  if (obj.is_dict()) {
    if (!key.is_list() && !key.is_dict()) {
      if (const Value* v = obj.as_dict().find(key)) return *v;
    }
  } else if (obj.is_list() && key.is_integral()) {
    const List& l = obj.as_list();
    const bool subscriptable = l.flavor == ListFlavor::kList || l.flavor == ListFlavor::kTuple ||
                               l.flavor == ListFlavor::kRange;
    if (subscriptable) {
      int64_t i = key.to_int();
      const auto n = static_cast<int64_t>(l.items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return l.items[static_cast<size_t>(i)];
    }
  } else if (obj.is_string() && key.is_integral()) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> off = utf8_offsets(s);
    int64_t i = key.to_int();
    const auto n = static_cast<int64_t>(off.size() - 1);
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      const auto k = static_cast<size_t>(i);
      return Value::string(s.substr(off[k], off[k + 1] - off[k]));
    }
  }
  // jinja2: a failed subscript with a string falls back to the attribute.
  if (key.is_string() && !obj.is_none()) {
    if (obj.is_dict() || obj.is_string() || obj.is_list()) {
      if (!key.as_string().starts_with("__") && has_method(obj, key.as_string())) {
        return getattr(obj, key.as_string());
      }
      if (key.as_string().starts_with("__")) return getattr(obj, key.as_string());
    } else if (obj.is_object()) {
      return getattr(obj, key.as_string());
    }
  }
  return make_undefined_item(obj, key);
}

}  // namespace spillway::jinja
