// Global functions of the template environment: jinja2's (range as the sandbox's
// safe_range, dict, namespace, cycler, joiner) and transformers' (raise_exception,
// strftime_now).
#include "jinja/interp.h"
#include "jinja/print.h"

namespace spillway::jinja {


namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Result<Value> range(Interpreter& interp, const CallArgs& call) {
  if (!call.kwargs.empty()) return Error{"range() takes no keyword arguments"};
  if (call.args.empty() || call.args.size() > 3) {
    return Error{"range expected at most 3 arguments, got " + std::to_string(call.args.size())};
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < call.args.size(); ++i) {
    const Value& a = call.args[i];
    if (a.is_undefined()) return Error{a.undefined_message()};
    if (!a.is_integral()) return Error{"'" + py_type_name(a) + "' object cannot be interpreted as an integer"};
    v[i] = a.to_int();
  }
  int64_t start = 0, stop = 0, step = 1;
  if (call.args.size() == 1) {
    stop = v[0];
  } else {
    start = v[0], stop = v[1];
    if (call.args.size() == 3) step = v[2];
  }
  if (step == 0) return Error{"range() arg 3 must not be zero"};
  // Length without overflow: count steps in long double.
  long double span = step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  const long double n = span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
  if (n > kMaxRange) {
    return Error{"Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000)."};
  }
  const auto count = static_cast<int64_t>(n);
  SPILLWAY_TRY(interp.charge(count));
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  // Every item lies between start and stop, so stepping never overflows; the step after the
  // last item is not taken.
  int64_t value = start;
  for (int64_t i = 0; i < count; ++i) {
    items.push_back(Value::integer(value));
    if (i + 1 < count) value += step;
  }
  ListPtr list = make_list(std::move(items), ListFlavor::kRange);
  list->range_start = start;
  list->range_stop = stop;
  list->range_step = step;
  return Value::list(std::move(list));
}

// dict(*args, **kwargs) into d.
Status fill_dict(Interpreter& interp, Dict& d, const CallArgs& call, const char* fn) {
  if (call.args.size() > 1) return Error{std::string(fn) + " expected at most 1 argument, got " + std::to_string(call.args.size())};
  if (call.args.size() == 1) {
    const Value& src = call.args[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().entries) d.set(k, v);
    } else {
      ASSIGN_OR_RETURN(const std::vector<Value> pairs, interp.iterate(src));
      for (size_t i = 0; i < pairs.size(); ++i) {
        ASSIGN_OR_RETURN(const std::vector<Value> kv, interp.iterate(pairs[i]));
        if (kv.size() != 2) {
          return Error{"dictionary update sequence element #" + std::to_string(i) + " has length " +
                       std::to_string(kv.size()) + "; 2 is required"};
        }
        if (kv[0].is_list() || kv[0].is_dict()) return Error{"unhashable type: '" + py_type_name(kv[0]) + "'"};
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : call.kwargs) d.set(std::string_view(k), v);
  update_depth(d);
  if (d.depth >= kMaxValueDepth) return Error{"value nested too deeply"};
  return {};
}

void add(Frame& globals, const std::string& name, Builtin::Fn fn) {
  globals.set(name, Value::object(std::make_shared<Builtin>(name, std::move(fn))));
}

}  // namespace

void install_builtins(Frame& globals) {
  add(globals, "range", range);
  add(globals, "dict", [](Interpreter& interp, const CallArgs& call) -> Result<Value> {
    DictPtr d = make_dict();
    SPILLWAY_TRY(fill_dict(interp, *d, call, "dict"));
    return Value::dict(std::move(d));
  });
  add(globals, "namespace", [](Interpreter& interp, const CallArgs& call) -> Result<Value> {
    auto ns = interp.new_namespace();
    SPILLWAY_TRY(fill_dict(interp, ns->attrs, call, "namespace"));
    return Value::object(std::move(ns));
  });
  add(globals, "cycler", [](Interpreter&, const CallArgs& call) -> Result<Value> {
    if (!call.kwargs.empty()) return Error{"cycler() takes no keyword arguments"};
    auto c = std::make_shared<Cycler>();
    c->items = call.args;
    return Value::object(std::move(c));
  });
  add(globals, "joiner", [](Interpreter&, const CallArgs& call) -> Result<Value> {
    ASSIGN_OR_RETURN(auto a, bind_args("joiner", call, {"sep"}));
    auto j = std::make_shared<Joiner>();
    if (a[0]) {
      if (!a[0]->is_string()) return Error{"joiner separator must be a string"};
      j->separator = a[0]->as_string();
    }
    return Value::object(std::move(j));
  });
  add(globals, "lipsum", [](Interpreter&, const CallArgs&) -> Result<Value> {
    return Error{"lipsum() is not supported"};
  });
  add(globals, "raise_exception", [](Interpreter& interp, const CallArgs& call) -> Result<Value> {
    ASSIGN_OR_RETURN(auto a, bind_args("raise_exception", call, {"message"}, 1));
    ASSIGN_OR_RETURN(std::string message, interp.to_str(*a[0]));
    return interp.raise(std::move(message));
  });
  add(globals, "strftime_now", [](Interpreter& interp, const CallArgs& call) -> Result<Value> {
    ASSIGN_OR_RETURN(auto a, bind_args("strftime_now", call, {"format"}, 1));
    if (!a[0]->is_string()) return Error{"strftime() argument 1 must be str, not " + py_type_name(*a[0])};
    return interp.strftime_now(a[0]->as_string());
  });
}

}  // namespace spillway::jinja
