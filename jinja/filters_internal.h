// Filters of jinja_filters_seq.cpp (the ones over sequences), used by apply_filter, and
// small helpers shared by the filter files. Internal to the filters.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "jinja/interp.h"

namespace spillway::jinja::filters {

using Args = std::vector<std::optional<Value>>;

inline Value generator(std::vector<Value> items, const char* name) {
  ListPtr l = make_list(std::move(items), ListFlavor::kGenerator);
  l->generator_name = name;
  return Value::list(std::move(l));
}

inline bool flag(const std::optional<Value>& v, bool def = false) { return v ? truthy(*v) : def; }

inline Result<int64_t> int_param(const std::optional<Value>& v, int64_t def, std::string_view what) {
  if (!v || v->is_none()) return def;
  if (v->is_undefined()) return Error{v->undefined_message()};
  if (!v->is_integral()) return Error{std::string(what) + " must be an integer, not " + py_type_name(*v)};
  return v->to_int();
}

Result<Value> select_or_reject(Interpreter& interp, const Value& v, const CallArgs& call, bool select, bool attr);
Result<Value> filter_map(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_sort(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_dictsort(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_min_max(Interpreter& interp, const Value& v, const CallArgs& call, bool max);
Result<Value> filter_unique(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_join(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_sum(Interpreter& interp, const Value& v, const CallArgs& call);
Result<Value> filter_batch_or_slice(Interpreter& interp, const Value& v, const CallArgs& call, bool batch);
Result<Value> filter_reverse(Interpreter& interp, const Value& v);

}  // namespace spillway::jinja::filters
