// jinja2's built-in filters (3.1.2 behaviour), with transformers' tojson. Filters that
// return generators in jinja2 (map, select, reject, selectattr, rejectattr, unique, batch,
// slice, items, reverse) return single-pass generator values here too, so `|length` on
// them fails and they are always true, as in jinja2.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "jinja/filters_internal.h"
#include "jinja/interp.h"
#include "jinja/parser.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja {

using filters::Args;
using filters::flag;
using filters::generator;
using filters::int_param;


namespace {
Result<int64_t> py_len(Interpreter&, const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return 0;
    case Kind::kString: return static_cast<int64_t>(utf8_length(v.as_string()));
    case Kind::kDict: return static_cast<int64_t>(v.as_dict().size());
    case Kind::kList:
      if (v.as_list().is_iterator()) break;
      return static_cast<int64_t>(v.as_list().items.size());
    case Kind::kObject:
      if (v.as_object().object_kind() == ObjectKind::kLoop) {
        return static_cast<int64_t>(static_cast<const Loop&>(v.as_object()).items.size());
      }
      break;
    default: break;
  }
  return Error{"object of type '" + py_type_name(v) + "' has no len()"};
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Python's int(str, base) for bases 2..36 and 0; nullopt when it would raise.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, nullptr, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  auto prefix = [&](char p) {
    return i + 1 < s.size() && s[i] == '0' && (s[i + 1] | 0x20) == p;
  };
  if ((base == 16 || base == 0) && prefix('x')) base = 16, i += 2;
  else if ((base == 8 || base == 0) && prefix('o')) base = 8, i += 2;
  else if ((base == 2 || base == 0) && prefix('b')) base = 2, i += 2;
  else if (base == 0) base = 10;
  if (base < 2 || base > 36 || i >= s.size()) return std::nullopt;
  uint64_t value = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = (c | 0x20) - 'a' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    if (value > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
      return std::nullopt;
    }
    value = value * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    prev_digit = true;
  }
  return neg ? -static_cast<int64_t>(value) : static_cast<int64_t>(value);
}

// Python's float(str); nullopt when it would raise.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      const bool ok = i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
                      std::isdigit(static_cast<unsigned char>(s[i + 1]));
      if (!ok) return std::nullopt;
      continue;
    }
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-')) return std::nullopt;
    clean += c;
  }
  if (clean.empty()) return std::nullopt;
  std::string lower = py_lower(clean);
  const std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

double round_half_even(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits == 0) return std::nearbyint(x);
  if (ndigits > 0) {
    if (ndigits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, x);
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

Result<Value> filter_tojson(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("tojson", call, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions o;
  o.ensure_ascii = flag(a[0]);
  o.sort_keys = flag(a[3]);
  o.max_bytes = interp.limits().max_string_bytes;
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      o.indent = a[1]->as_string();
    } else if (a[1]->is_integral()) {
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(a[1]->to_int(), 0, 1024)), ' ');
    } else {
      return Error{"indent must be an int, a str or None"};
    }
    o.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const Value& sep = *a[2];
    if (!sep.is_list() || sep.as_list().items.size() != 2 || !sep.as_list().items[0].is_string() ||
        !sep.as_list().items[1].is_string()) {
      return Error{"separators must be a pair of strings"};
    }
    o.item_separator = sep.as_list().items[0].as_string();
    o.key_separator = sep.as_list().items[1].as_string();
  }
  ASSIGN_OR_RETURN(std::string s, to_json(v, o));
  SPILLWAY_TRY(interp.charge_bytes(s.size()));
  return Value::string(std::move(s));
}

Result<Value> filter_indent(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("indent", call, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0]) {
    if (a[0]->is_string()) {
      indention = a[0]->as_string();
    } else {
      ASSIGN_OR_RETURN(const int64_t w, int_param(a[0], 4, "width"));
      indention = std::string(static_cast<size_t>(std::clamp<int64_t>(w, 0, 4096)), ' ');
    }
  }
  if (v.is_undefined()) return Error{v.undefined_message()};
  ASSIGN_OR_RETURN(std::string s, interp.to_str(v));
  s += "\n";
  const std::vector<Value> lines_v = [&] {
    std::vector<Value> out;
    CallArgs none;
    auto r = call_builtin_method(interp, Value::string(s), "splitlines", none);
    if (r.ok()) out = r->as_list().items;
    return out;
  }();
  std::string rv;
  if (flag(a[2])) {
    for (size_t i = 0; i < lines_v.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines_v[i].as_string();
    }
  } else {
    for (size_t i = 0; i < lines_v.size(); ++i) {
      const std::string& line = lines_v[i].as_string();
      if (i > 0) {
        rv += "\n";
        if (!line.empty()) rv += indention;
      }
      rv += line;
      if (rv.size() > interp.limits().max_string_bytes) return Error{"string too large"};
    }
  }
  if (flag(a[1])) rv = indention + rv;
  SPILLWAY_TRY(interp.charge_bytes(rv.size()));
  return Value::string(std::move(rv));
}

Result<Value> filter_title(Interpreter& interp, const Value& v) {
  ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
  std::string out;
  bool at_word_start = true;
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8_next(s, pos);
    const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
    if (sep) {
      utf8_append(out, cp);
      at_word_start = true;
    } else {
      utf8_append(out, at_word_start ? simple_upper(cp) : simple_lower(cp));
      at_word_start = false;
    }
  }
  return Value::string(std::move(out));
}

Result<Value> filter_round(const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("round", call, {"precision", "method"}));
  ASSIGN_OR_RETURN(const int64_t precision, int_param(a[0], 0, "precision"));
  std::string method = "common";
  if (a[1]) {
    if (!a[1]->is_string()) return Error{"method must be common, ceil or floor"};
    method = a[1]->as_string();
  }
  if (method != "common" && method != "ceil" && method != "floor") return Error{"method must be common, ceil or floor"};
  if (v.is_undefined()) return Error{v.undefined_message()};
  if (!v.is_number()) return Error{"type " + py_type_name(v) + " doesn't define __round__ method"};
  if (method == "common") {
    if (v.is_integral()) {
      const int64_t i = v.to_int();
      if (precision >= 0) return Value::integer(i);
      if (precision < -18) return Value::integer(0);
      int64_t p = 1;
      for (int64_t k = 0; k < -precision; ++k) p *= 10;
      const double r = std::nearbyint(static_cast<double>(i) / static_cast<double>(p));
      return Value::integer(static_cast<int64_t>(r) * p);
    }
    return Value::number(round_half_even(v.as_float(), precision));
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double x = v.to_double() * p;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Result<Value> filter_int(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("int", call, {"default", "base"}));
  const Value def = a[0] ? *a[0] : Value::integer(0);
  ASSIGN_OR_RETURN(const int64_t base, int_param(a[1], 10, "base"));
  if (v.is_integral()) return Value::integer(v.to_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) return def;
    const double t = std::trunc(v.as_float());
    if (std::fabs(t) >= 9.2e18) return Error{"integer overflow (this interpreter's integers are 64-bit)"};
    return Value::integer(static_cast<int64_t>(t));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), static_cast<int>(base))) return Value::integer(*i);
    if (auto f = parse_float(v.as_string()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(std::trunc(*f)));
    }
    return def;
  }
  (void)interp;
  return def;
}

Result<Value> filter_float(const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("float", call, {"default"}));
  const Value def = a[0] ? *a[0] : Value::number(0.0);
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is_string()) {
    if (auto f = parse_float(v.as_string())) return Value::number(*f);
  }
  return def;
}

Result<Value> filter_truncate(Interpreter& interp, const Value& v, const CallArgs& call) {
  ASSIGN_OR_RETURN(Args a, bind_args("truncate", call, {"length", "killwords", "end", "leeway"}));
  ASSIGN_OR_RETURN(const int64_t length, int_param(a[0], 255, "length"));
  std::string end = "...";
  if (a[2]) {
    ASSIGN_OR_RETURN(end, interp.to_str(*a[2]));
  }
  ASSIGN_OR_RETURN(const int64_t leeway, int_param(a[3], 5, "leeway"));
  ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
  const auto end_len = static_cast<int64_t>(utf8_length(end));
  if (length < end_len) return Error{"expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length)};
  if (leeway < 0) return Error{"expected leeway >= 0, got " + std::to_string(leeway)};
  const std::vector<size_t> off = utf8_offsets(s);
  const auto n = static_cast<int64_t>(off.size() - 1);
  if (n <= length + leeway) return Value::string(s);
  std::string head = s.substr(0, off[static_cast<size_t>(length - end_len)]);
  if (!flag(a[1])) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head = head.substr(0, space);
  }
  return Value::string(head + end);
}

Result<Value> filter_wordcount(Interpreter& interp, const Value& v) {
  ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
  int64_t count = 0;
  bool in_word = false;
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8_next(s, pos);
    const bool word = cp == '_' || py_isalnum(cp);
    if (word && !in_word) ++count;
    in_word = word;
  }
  return Value::integer(count);
}

Result<Value> string_filter(Interpreter& interp, std::string_view name, const Value& v, const CallArgs& call) {
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "center") {
    ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
    CallArgs c = call;
    return call_builtin_method(interp, Value::string(s), name, c);
  }
  if (name == "trim") {
    ASSIGN_OR_RETURN(Args a, bind_args("trim", call, {"chars"}));
    ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
    CallArgs c;
    if (a[0]) c.args.push_back(*a[0]);
    return call_builtin_method(interp, Value::string(s), "strip", c);
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(Args a, bind_args("replace", call, {"old", "new", "count"}, 2));
    ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
    ASSIGN_OR_RETURN(const std::string from, interp.to_str(*a[0]));
    ASSIGN_OR_RETURN(const std::string to, interp.to_str(*a[1]));
    CallArgs c;
    c.args = {Value::string(from), Value::string(to)};
    if (a[2] && !a[2]->is_none()) c.args.push_back(*a[2]);
    return call_builtin_method(interp, Value::string(s), "replace", c);
  }
  // escape, e, forceescape
  if (v.is_undefined()) return Value::string("");
  ASSIGN_OR_RETURN(const std::string s, interp.to_str(v));
  return Value::string(html_escape(s));
}

}  // namespace

std::optional<Result<Value>> apply_filter(Interpreter& interp, std::string_view name, const Value& v,
                                          const CallArgs& call) {
  if (name == "tojson") return filter_tojson(interp, v, call);
  if (name == "trim" || name == "upper" || name == "lower" || name == "capitalize" || name == "replace" ||
      name == "center" || name == "escape" || name == "e" || name == "forceescape") {
    return string_filter(interp, name, v, call);
  }
  if (name == "title") return filter_title(interp, v);
  if (name == "length" || name == "count") {
    auto n = py_len(interp, v);
    if (!n.ok()) return Result<Value>(n.error());
    return Result<Value>(Value::integer(*n));
  }
  if (name == "default" || name == "d") {
    auto a = bind_args(name, call, {"default_value", "boolean"});
    if (!a.ok()) return Result<Value>(a.error());
    const Value def = (*a)[0] ? *(*a)[0] : Value::string("");
    if (v.is_undefined() || (flag((*a)[1]) && !truthy(v))) return Result<Value>(def);
    return Result<Value>(v);
  }
  if (name == "string" || name == "safe") {
    auto s = interp.to_str(v);
    if (!s.ok()) return Result<Value>(s.error());
    return Result<Value>(Value::string(std::move(s).value()));
  }
  if (name == "list") {
    auto items = interp.iterate(v);
    if (!items.ok()) return Result<Value>(items.error());
    return Result<Value>(Value::list(make_list(std::move(items).value())));
  }
  if (name == "first" || name == "last") {
    if (name == "last" && v.is_list() && v.as_list().is_iterator()) {
      return Result<Value>(Error{"'" + py_type_name(v) + "' object is not reversible"});
    }
    auto items = interp.iterate(v);
    if (!items.ok()) return Result<Value>(items.error());
    if (items->empty()) {
      return Result<Value>(Value::undefined(name == "first" ? "No first item, sequence was empty."
                                                            : "No last item, sequence was empty."));
    }
    return Result<Value>(name == "first" ? items->front() : items->back());
  }
  if (name == "items") {
    if (v.is_undefined()) return Result<Value>(generator({}, "do_items"));
    if (!v.is_dict()) return Result<Value>(Error{"Can only get item pairs from a mapping."});
    std::vector<Value> pairs;
    for (const auto& [k, x] : v.as_dict().entries) pairs.push_back(Value::list(make_list({k, x}, ListFlavor::kTuple)));
    return Result<Value>(generator(std::move(pairs), "do_items"));
  }
  if (name == "join") return filters::filter_join(interp, v, call);
  if (name == "map") return filters::filter_map(interp, v, call);
  if (name == "select") return filters::select_or_reject(interp, v, call, true, false);
  if (name == "reject") return filters::select_or_reject(interp, v, call, false, false);
  if (name == "selectattr") return filters::select_or_reject(interp, v, call, true, true);
  if (name == "rejectattr") return filters::select_or_reject(interp, v, call, false, true);
  if (name == "sort") return filters::filter_sort(interp, v, call);
  if (name == "dictsort") return filters::filter_dictsort(interp, v, call);
  if (name == "unique") return filters::filter_unique(interp, v, call);
  if (name == "min") return filters::filter_min_max(interp, v, call, false);
  if (name == "max") return filters::filter_min_max(interp, v, call, true);
  if (name == "sum") return filters::filter_sum(interp, v, call);
  if (name == "reverse") return filters::filter_reverse(interp, v);
  if (name == "batch") return filters::filter_batch_or_slice(interp, v, call, true);
  if (name == "slice") return filters::filter_batch_or_slice(interp, v, call, false);
  if (name == "int") return filter_int(interp, v, call);
  if (name == "float") return filter_float(v, call);
  if (name == "round") return filter_round(v, call);
  if (name == "indent") return filter_indent(interp, v, call);
  if (name == "truncate") return filter_truncate(interp, v, call);
  if (name == "wordcount") return filter_wordcount(interp, v);
  if (name == "abs") {
    if (v.is_undefined()) return Result<Value>(Error{v.undefined_message()});
    if (v.is_float()) return Result<Value>(Value::number(std::fabs(v.as_float())));
    if (v.is_integral()) {
      const int64_t i = v.to_int();
      if (i == INT64_MIN) return Result<Value>(Error{"integer overflow (this interpreter's integers are 64-bit)"});
      return Result<Value>(Value::integer(i < 0 ? -i : i));
    }
    return Result<Value>(Error{"bad operand type for abs(): '" + py_type_name(v) + "'"});
  }
  if (name == "attr") {
    auto a = bind_args("attr", call, {"name"}, 1);
    if (!a.ok()) return Result<Value>(a.error());
    const Value& attr = *(*a)[0];
    if (!attr.is_string()) return Result<Value>(Error{"attribute name must be a string"});
    if (v.is_dict() && !has_method(v, attr.as_string())) {
      return Result<Value>(Value::undefined("'dict object' has no attribute " + string_repr(attr.as_string())));
    }
    return interp.getattr(v, attr.as_string());
  }
  if (name == "format") {
    if (!call.args.empty() && !call.kwargs.empty()) {
      return Result<Value>(Error{"can't handle positional and keyword arguments at the same time"});
    }
    auto s = interp.to_str(v);
    if (!s.ok()) return Result<Value>(s.error());
    Value values;
    if (!call.kwargs.empty()) {
      DictPtr d = make_dict();
      for (const auto& [k, x] : call.kwargs) d->set(std::string_view(k), x);
      values = Value::dict(std::move(d));
    } else {
      values = Value::list(make_list(call.args, ListFlavor::kTuple));
    }
    auto out = percent_format(interp, *s, values);
    if (!out.ok()) return Result<Value>(out.error());
    return Result<Value>(Value::string(std::move(out).value()));
  }
  if (is_known_filter(name)) {
    return Result<Value>(Error{"the '" + std::string(name) + "' filter is not supported"});
  }
  return std::nullopt;
}

}  // namespace spillway::jinja
