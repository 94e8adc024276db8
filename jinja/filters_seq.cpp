// jinja2's filters over sequences: select / reject / selectattr / rejectattr, map, sort,
// dictsort, unique, min, max, join, sum, batch, slice, reverse.
#include <algorithm>
#include <unordered_set>

#include "jinja/filters_internal.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja::filters {


namespace {

Result<Value> lower_if_string(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(py_lower(v.as_string()));
  return v;
}

// jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
class AttrGetter {
 public:
  AttrGetter(Interpreter& interp, const std::optional<Value>& attribute) : interp_(interp) {
    if (!attribute || attribute->is_none()) return;
    if (attribute->is_string()) {
      const std::string& s = attribute->as_string();
      size_t start = 0;
      while (true) {
        const size_t dot = s.find('.', start);
        std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && part.size() < 18 &&
                            std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        parts_.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(std::move(part)));
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
    } else {
      parts_.push_back(*attribute);
    }
  }

  Result<Value> operator()(Value item, const std::optional<Value>& default_value = std::nullopt) const {
    for (const Value& part : parts_) {
      ASSIGN_OR_RETURN(item, interp_.getitem(item, part));
      if (default_value && !default_value->is_none() && item.is_undefined()) item = *default_value;
    }
    return item;
  }

 private:
  Interpreter& interp_;
  std::vector<Value> parts_;
};

// Sort keys for sort / dictsort / min / max / unique: lowercased strings, optional
// comma-separated attributes (compared as a list).
Result<Value> sort_key(Interpreter& interp, const Value& item, const std::optional<Value>& attribute,
                       bool case_sensitive, bool multi) {
  if (multi && attribute && attribute->is_string() && attribute->as_string().find(',') != std::string::npos) {
    std::vector<Value> keys;
    const std::string& spec = attribute->as_string();
    size_t start = 0;
    while (true) {
      const size_t comma = spec.find(',', start);
      const Value part = Value::string(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      ASSIGN_OR_RETURN(Value k, AttrGetter(interp, part)(item));
      ASSIGN_OR_RETURN(k, lower_if_string(k, case_sensitive));
      keys.push_back(std::move(k));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return Value::list(make_list(std::move(keys)));
  }
  ASSIGN_OR_RETURN(Value k, AttrGetter(interp, attribute)(item));
  return lower_if_string(k, case_sensitive);
}

Result<std::vector<Value>> sorted(std::vector<Value> items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status failed;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!failed.ok()) return false;
    auto c = py_compare(reverse ? keys[b] : keys[a], reverse ? keys[a] : keys[b], "<");
    if (!c.ok()) {
      failed = c.error();
      return false;
    }
    return *c == -1;
  });
  if (!failed.ok()) return failed.error();
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

}  // namespace

Result<Value> select_or_reject(Interpreter& interp, const Value& v, const CallArgs& call, bool select, bool attr) {
  if (!truthy(v)) return generator({}, "select_or_reject");
  std::optional<AttrGetter> getter;
  size_t off = 0;
  if (attr) {
    if (call.args.empty()) return Error{"Missing parameter for attribute name"};
    getter.emplace(interp, call.args[0]);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (call.args.size() > off) {
    const Value& name = call.args[off];
    if (!name.is_string()) return Error{"test name must be a string"};
    test = name.as_string();
    test_args.args.assign(call.args.begin() + static_cast<std::ptrdiff_t>(off) + 1, call.args.end());
    test_args.kwargs = call.kwargs;
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::vector<Value> out;
  for (Value& item : items) {
    Value subject = item;
    if (getter) {
      ASSIGN_OR_RETURN(subject, (*getter)(item));
    }
    bool pass = false;
    if (test) {
      ASSIGN_OR_RETURN(pass, interp.call_test(*test, subject, test_args));
    } else {
      pass = truthy(subject);
    }
    if (pass == select) out.push_back(std::move(item));
  }
  return generator(std::move(out), "select_or_reject");
}

Result<Value> filter_map(Interpreter& interp, const Value& v, const CallArgs& call) {
  if (!truthy(v)) return generator({}, "sync_do_map");
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::vector<Value> out;
  out.reserve(items.size());
  const Value* attribute = nullptr;
  const Value* default_value = nullptr;
  for (const auto& [k, x] : call.kwargs) {
    if (k == "attribute") attribute = &x;
    if (k == "default") default_value = &x;
  }
  if (call.args.empty() && attribute != nullptr) {
    for (const auto& [k, x] : call.kwargs) {
      if (k != "attribute" && k != "default") return Error{"Unexpected keyword argument '" + k + "'"};
    }
    AttrGetter getter(interp, *attribute);
    std::optional<Value> def;
    if (default_value != nullptr) def = *default_value;
    for (Value& item : items) {
      ASSIGN_OR_RETURN(Value mapped, getter(std::move(item), def));
      out.push_back(std::move(mapped));
    }
    return generator(std::move(out), "sync_do_map");
  }
  if (call.args.empty()) return Error{"map requires a filter argument"};
  if (!call.args[0].is_string()) return Error{"map filter name must be a string"};
  const std::string name = call.args[0].as_string();
  CallArgs rest;
  rest.args.assign(call.args.begin() + 1, call.args.end());
  rest.kwargs = call.kwargs;
  for (Value& item : items) {
    ASSIGN_OR_RETURN(Value mapped, interp.call_filter(name, item, rest));
    out.push_back(std::move(mapped));
  }
  return generator(std::move(out), "sync_do_map");
}

Result<Value> filter_sort(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("sort", call, {"reverse", "case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value k, sort_key(interp, item, a[2], flag(a[1]), true));
    keys.push_back(std::move(k));
  }
  SPILLWAY_TRY(interp.charge(static_cast<int64_t>(items.size()) * 8));
  ASSIGN_OR_RETURN(std::vector<Value> out, sorted(std::move(items), std::move(keys), flag(a[0])));
  return Value::list(make_list(std::move(out)));
}

Result<Value> filter_dictsort(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("dictsort", call, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return Error{"'" + py_type_name(v) + "' object has no attribute 'items'"};
  int pos = 0;
  if (a[1]) {
    if (!a[1]->is_string() || (a[1]->as_string() != "key" && a[1]->as_string() != "value")) {
      return Error{"You can only sort by either \"key\" or \"value\""};
    }
    pos = a[1]->as_string() == "key" ? 0 : 1;
  }
  std::vector<Value> items;
  std::vector<Value> keys;
  for (const auto& [k, x] : v.as_dict().entries) {
    items.push_back(Value::list(make_list({k, x}, ListFlavor::kTuple)));
    ASSIGN_OR_RETURN(Value key, lower_if_string(pos == 0 ? k : x, flag(a[0])));
    keys.push_back(std::move(key));
  }
  ASSIGN_OR_RETURN(std::vector<Value> out, sorted(std::move(items), std::move(keys), flag(a[2])));
  return Value::list(make_list(std::move(out)));
}

Result<Value> filter_min_max(Interpreter& interp, const Value& v, const CallArgs& call, bool max) {
  ASSIGN_OR_RETURN(Args a, bind_args(max ? "max" : "min", call, {"case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  ASSIGN_OR_RETURN(Value best_key, sort_key(interp, items[0], a[1], flag(a[0]), false));
  for (size_t i = 1; i < items.size(); ++i) {
    ASSIGN_OR_RETURN(Value k, sort_key(interp, items[i], a[1], flag(a[0]), false));
    ASSIGN_OR_RETURN(const int c, py_compare(k, best_key, max ? ">" : "<"));
    if ((max && c == 1) || (!max && c == -1)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Result<Value> filter_unique(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("unique", call, {"case_sensitive", "attribute"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::vector<Value> out;
  std::vector<Value> seen;
  std::unordered_set<std::string> seen_strings;
  for (Value& item : items) {
    ASSIGN_OR_RETURN(Value key, sort_key(interp, item, a[1], flag(a[0]), false));
    if (key.is_list() || key.is_dict()) return Error{"unhashable type: '" + py_type_name(key) + "'"};
    if (key.is_string()) {
      if (!seen_strings.insert(key.as_string()).second) continue;
    } else {
      bool dup = false;
      for (const Value& s : seen) {
        ASSIGN_OR_RETURN(const bool eq, py_equal(s, key));
        if (eq) {
          dup = true;
          break;
        }
      }
      if (dup) continue;
      SPILLWAY_TRY(interp.charge(static_cast<int64_t>(seen.size())));
      seen.push_back(std::move(key));
    }
    out.push_back(std::move(item));
  }
  return generator(std::move(out), "do_unique");
}

Result<Value> filter_join(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("join", call, {"d", "attribute"}));
  std::string sep;
  if (a[0]) {
    ASSIGN_OR_RETURN(sep, interp.to_str(*a[0]));
  }
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::optional<AttrGetter> getter;
  if (a[1] && !a[1]->is_none()) getter.emplace(interp, a[1]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    Value item = items[i];
    if (getter) {
      ASSIGN_OR_RETURN(item, (*getter)(std::move(item)));
    }
    SPILLWAY_TRY(append_str(out, item, interp.limits().max_string_bytes));
  }
  SPILLWAY_TRY(interp.charge_bytes(out.size()));
  return Value::string(std::move(out));
}

Result<Value> filter_sum(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("sum", call, {"attribute", "start"}));
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  Value total = a[1] ? *a[1] : Value::integer(0);
  if (total.is_string()) return Error{"sum() can't sum strings [use ''.join(seq) instead]"};
  std::optional<AttrGetter> getter;
  if (a[0] && !a[0]->is_none()) getter.emplace(interp, a[0]);
  for (Value& item : items) {
    if (getter) {
      ASSIGN_OR_RETURN(item, (*getter)(std::move(item)));
    }
    ASSIGN_OR_RETURN(total, interp.binary_op(BinaryOp::kAdd, total, item));
  }
  return total;
}

Result<Value> filter_batch_or_slice(Interpreter& interp, const Value& v, const CallArgs& call, bool batch) {
  ASSIGN_OR_RETURN(Args a, bind_args(batch ? "batch" : "slice", call, {batch ? "linecount" : "slices", "fill_with"}, 1));
  ASSIGN_OR_RETURN(const int64_t n, int_param(a[0], 1, batch ? "linecount" : "slices"));
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  const bool fill = a[1] && !a[1]->is_none();
  // Each group is a new list: charge for it up front.
  const int64_t groups_made = batch ? (n > 0 ? static_cast<int64_t>(items.size()) / n + 1 : 0)
                                    : std::min<int64_t>(n, static_cast<int64_t>(interp.limits().max_list_items) + 1);
  SPILLWAY_TRY(interp.charge(8 * std::max<int64_t>(groups_made, 0)));
  std::vector<Value> groups;
  if (batch) {
    if (n <= 0) return Error{"batch linecount must be positive"};
    std::vector<Value> tmp;
    for (Value& item : items) {
      if (static_cast<int64_t>(tmp.size()) == n) {
        groups.push_back(Value::list(make_list(std::move(tmp))));
        tmp.clear();
      }
      tmp.push_back(std::move(item));
    }
    if (!tmp.empty()) {
      while (fill && static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*a[1]);
      groups.push_back(Value::list(make_list(std::move(tmp))));
    }
  } else {
    if (n <= 0) return Error{"integer division or modulo by zero"};
    if (n > static_cast<int64_t>(interp.limits().max_list_items)) return Error{"list too large"};
    const auto length = static_cast<int64_t>(items.size());
    const int64_t per = length / n;
    const int64_t extra = length % n;
    int64_t offset = 0;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t start = offset + k * per;
      if (k < extra) ++offset;
      const int64_t end = offset + (k + 1) * per;
      std::vector<Value> tmp(items.begin() + start, items.begin() + end);
      if (fill && k >= extra) tmp.push_back(*a[1]);
      groups.push_back(Value::list(make_list(std::move(tmp))));
    }
  }
  return generator(std::move(groups), batch ? "do_batch" : "sync_do_slice");
}

Result<Value> filter_reverse(Interpreter& interp, const Value& v) {
  if (v.is_string()) {
    std::vector<char32_t> cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  const bool reversible = v.is_undefined() || v.is_dict() ||
                          (v.is_list() && !v.as_list().is_iterator() && v.as_list().flavor != ListFlavor::kDictItems &&
                           v.as_list().flavor != ListFlavor::kDictKeys && v.as_list().flavor != ListFlavor::kDictValues);
  ASSIGN_OR_RETURN(std::vector<Value> items, interp.iterate(v));
  std::reverse(items.begin(), items.end());
  if (reversible) return Value::list(make_list(std::move(items), ListFlavor::kReverseIterator));
  return Value::list(make_list(std::move(items)));
}

}  // namespace spillway::jinja::filters
