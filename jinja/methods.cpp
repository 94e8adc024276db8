// Methods of str, dict and list values as Python defines them (the ones templates use;
// the rest of Python's method names resolve but fail when called).
#include <algorithm>
#include <set>

#include "jinja/interp.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja {


namespace {

const std::set<std::string_view>& str_methods() {
  static const std::set<std::string_view> k = {
      "capitalize", "casefold",   "center",     "count",      "encode",     "endswith",  "expandtabs",
      "find",       "format",     "format_map", "index",      "isalnum",    "isalpha",   "isascii",
      "isdecimal",  "isdigit",    "isidentifier", "islower",  "isnumeric",  "isprintable", "isspace",
      "istitle",    "isupper",    "join",       "ljust",      "lower",      "lstrip",    "maketrans",
      "partition",  "removeprefix", "removesuffix", "replace", "rfind",     "rindex",    "rjust",
      "rpartition", "rsplit",     "rstrip",     "split",      "splitlines", "startswith", "strip",
      "swapcase",   "title",      "translate",  "upper",      "zfill"};
  return k;
}
const std::set<std::string_view>& dict_methods() {
  static const std::set<std::string_view> k = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                               "pop", "popitem", "setdefault", "update", "values"};
  return k;
}
const std::set<std::string_view>& list_methods() {
  static const std::set<std::string_view> k = {"append", "clear", "copy",   "count",   "extend", "index",
                                               "insert", "pop",   "remove", "reverse", "sort"};
  return k;
}

bool is_plain_list(const Value& v) { return v.is_list() && v.as_list().flavor == ListFlavor::kList; }
bool is_tuple(const Value& v) { return v.is_list() && v.as_list().flavor == ListFlavor::kTuple; }

Error not_supported(const Value& receiver, std::string_view name) {
  return Error{py_type_name(receiver) + "." + std::string(name) + "() is not supported"};
}

Result<std::optional<std::string>> opt_str(const std::optional<Value>& v, std::string_view fn) {
  if (!v || v->is_none()) return std::optional<std::string>{};
  if (!v->is_string()) return Error{std::string(fn) + " arg must be None or str"};
  return std::optional<std::string>(v->as_string());
}

Result<int64_t> int_arg(const std::optional<Value>& v, int64_t def, std::string_view what) {
  if (!v || v->is_none()) return def;
  if (!v->is_integral()) {
    return Error{"'" + py_type_name(*v) + "' object cannot be interpreted as an integer (" + std::string(what) + ")"};
  }
  return v->to_int();
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(make_list(std::move(items)));
}

// Byte range of code points [start, end) with Python's clamping of negative indices.
std::pair<size_t, size_t> cp_range(const std::string& s, const std::optional<Value>& start,
                                   const std::optional<Value>& end) {
  const std::vector<size_t> off = utf8_offsets(s);
  const auto n = static_cast<int64_t>(off.size() - 1);
  auto clamp = [&](const std::optional<Value>& v, int64_t def) {
    if (!v || !v->is_integral()) return def;
    int64_t x = v->to_int();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  const int64_t a = clamp(start, 0);
  const int64_t b = clamp(end, n);
  if (a > b) return {off[static_cast<size_t>(a)], off[static_cast<size_t>(a)]};
  return {off[static_cast<size_t>(a)], off[static_cast<size_t>(b)]};
}

int64_t cp_index(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte_offset)));
}

std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t pos = 0;
  auto skip_ws = [&] {
    while (pos < s.size()) {
      size_t p = pos;
      if (!py_isspace(utf8_next(s, p))) break;
      pos = p;
    }
  };
  skip_ws();
  while (pos < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(s.substr(pos));
      return out;
    }
    const size_t start = pos;
    while (pos < s.size()) {
      size_t p = pos;
      if (py_isspace(utf8_next(s, p))) break;
      pos = p;
    }
    out.push_back(s.substr(start, pos - start));
    skip_ws();
  }
  return out;
}

std::vector<std::string> rsplit_whitespace(const std::string& s, int64_t maxsplit) {
  const std::vector<char32_t> cps = utf8_decode(s);
  std::vector<std::string> out;
  int64_t end = static_cast<int64_t>(cps.size());
  auto is_ws = [&](int64_t i) { return py_isspace(cps[static_cast<size_t>(i)]); };
  while (end > 0 && is_ws(end - 1)) --end;
  while (end > 0) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(utf8_encode(std::vector<char32_t>(cps.begin(), cps.begin() + end)));
      break;
    }
    int64_t start = end;
    while (start > 0 && !is_ws(start - 1)) --start;
    out.push_back(utf8_encode(std::vector<char32_t>(cps.begin() + start, cps.begin() + end)));
    end = start;
    while (end > 0 && is_ws(end - 1)) --end;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

std::vector<std::string> rsplit_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string::npos) break;
    out.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_lines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  size_t pos = 0;
  size_t line_start = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const char32_t cp = utf8_next(s, pos);
    const bool brk = cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' || (cp >= 0x1C && cp <= 0x1E) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    out.push_back(s.substr(line_start, (keepends ? pos : start) - line_start));
    line_start = pos;
  }
  if (line_start < s.size()) out.push_back(s.substr(line_start));
  return out;
}

std::string title_case(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    const char32_t cp = utf8_next(s, pos);
    const bool cased = py_iscased_lower(cp) || py_iscased_upper(cp);
    if (cased) {
      utf8_append(out, prev_cased ? simple_lower(cp) : simple_upper(cp));
    } else {
      utf8_append(out, cp);
    }
    prev_cased = cased;
  }
  return out;
}

Result<std::string> pad(const std::string& s, const CallArgs& args, std::string_view fn, int align) {
  ASSIGN_OR_RETURN(auto a, bind_args(fn, args, {"width", "fillchar"}, 1));
  ASSIGN_OR_RETURN(const int64_t width, int_arg(a[0], 0, "width"));
  std::string fill = " ";
  if (a[1]) {
    if (!a[1]->is_string() || utf8_length(a[1]->as_string()) != 1) {
      return Error{"The fill character must be exactly one character long"};
    }
    fill = a[1]->as_string();
  }
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  if (width > (int64_t{1} << 24)) return Error{"string too large"};
  const int64_t total = width - len;
  int64_t left = 0;
  if (align == 0) {
    left = total / 2 + (total & width & 1);
  } else if (align > 0) {
    left = total;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

Result<bool> affix_match(const std::string& s, const Value& affix, bool prefix, std::string_view fn) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.as_string());
  if (is_tuple(affix)) {
    for (const Value& a : affix.as_list().items) {
      if (!a.is_string()) return Error{"tuple for " + std::string(fn) + " must only contain str"};
      if (one(a.as_string())) return true;
    }
    return false;
  }
  return Error{std::string(fn) + " first arg must be str or a tuple of str, not " + py_type_name(affix)};
}

Result<Value> string_method(Interpreter& interp, const Value& self, std::string_view name, const CallArgs& args) {
  const std::string& s = self.as_string();
  auto no_args = [&]() -> Status {
    if (!args.args.empty() || !args.kwargs.empty()) return Error{std::string(name) + "() takes no arguments"};
    return {};
  };
  auto all_of = [&](auto pred) {
    if (s.empty()) return false;
    size_t pos = 0;
    while (pos < s.size()) {
      if (!pred(utf8_next(s, pos))) return false;
    }
    return true;
  };
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    SPILLWAY_TRY(no_args());
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "lower" || name == "casefold") return Value::string(py_lower(s));
    if (name == "title") return Value::string(title_case(s));
    if (name == "swapcase") {
      std::string out;
      size_t pos = 0;
      while (pos < s.size()) {
        const char32_t cp = utf8_next(s, pos);
        utf8_append(out, py_iscased_upper(cp) ? simple_lower(cp) : simple_upper(cp));
      }
      return Value::string(std::move(out));
    }
    if (s.empty()) return self;
    size_t pos = 0;
    const char32_t first = utf8_next(s, pos);
    std::string out;
    utf8_append(out, simple_upper(first));
    out += py_lower(std::string_view(s).substr(pos));
    return Value::string(std::move(out));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"chars"}));
    ASSIGN_OR_RETURN(const auto chars, opt_str(a[0], name));
    return Value::string(py_strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"sep", "maxsplit"}));
    ASSIGN_OR_RETURN(const auto sep, opt_str(a[0], "must be str or None"));
    ASSIGN_OR_RETURN(const int64_t maxsplit, int_arg(a[1], -1, "maxsplit"));
    SPILLWAY_TRY(interp.charge_bytes(s.size()));
    if (!sep) return str_list(name == "split" ? split_whitespace(s, maxsplit) : rsplit_whitespace(s, maxsplit));
    if (sep->empty()) return Error{"empty separator"};
    return str_list(name == "split" ? split_sep(s, *sep, maxsplit) : rsplit_sep(s, *sep, maxsplit));
  }
  if (name == "splitlines") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"keepends"}));
    return str_list(split_lines(s, a[0] && truthy(*a[0])));
  }
  if (name == "startswith" || name == "endswith") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"prefix", "start", "end"}, 1));
    const auto [b, e] = cp_range(s, a[1], a[2]);
    ASSIGN_OR_RETURN(const bool r, affix_match(s.substr(b, e - b), *a[0], name == "startswith", name));
    return Value::boolean(r);
  }
  if (name == "replace") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"old", "new", "count"}, 2));
    if (!a[0]->is_string() || !a[1]->is_string()) return Error{"replace() argument must be str"};
    ASSIGN_OR_RETURN(int64_t count, int_arg(a[2], -1, "count"));
    const std::string& from = a[0]->as_string();
    const std::string& to = a[1]->as_string();
    std::string out;
    if (from.empty()) {
      size_t pos = 0;
      int64_t done = 0;
      while (true) {
        if (count >= 0 && done >= count) {
          out += s.substr(pos);
          break;
        }
        out += to;
        ++done;
        if (pos >= s.size()) break;
        const size_t start = pos;
        utf8_next(s, pos);
        out += s.substr(start, pos - start);
        if (out.size() > interp.limits().max_string_bytes) return Error{"string too large"};
      }
    } else {
      size_t pos = 0;
      int64_t done = 0;
      while (count < 0 || done < count) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
        ++done;
        if (out.size() > interp.limits().max_string_bytes) return Error{"string too large"};
      }
      out.append(s, pos, std::string::npos);
    }
    SPILLWAY_TRY(interp.charge_bytes(out.size()));
    return Value::string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"sub", "start", "end"}, 1));
    if (!a[0]->is_string()) return Error{"must be str, not " + py_type_name(*a[0])};
    const std::string& sub = a[0]->as_string();
    const auto [b, e] = cp_range(s, a[1], a[2]);
    const std::string hay = s.substr(b, e - b);
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(hay)) + 1);
      int64_t n = 0;
      for (size_t p = hay.find(sub); p != std::string::npos; p = hay.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t hit = (name == "find" || name == "index") ? hay.find(sub) : hay.rfind(sub);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") return Error{"substring not found"};
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, b + hit));
  }
  if (name == "join") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"iterable"}, 1));
    ASSIGN_OR_RETURN(const std::vector<Value> items, interp.iterate(*a[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return Error{"sequence item " + std::to_string(i) + ": expected str instance, " + py_type_name(items[i]) +
                     " found"};
      }
      if (i > 0) out += s;
      out += items[i].as_string();
      if (out.size() > interp.limits().max_string_bytes) return Error{"string too large"};
    }
    SPILLWAY_TRY(interp.charge_bytes(out.size()));
    return Value::string(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ASSIGN_OR_RETURN(std::string out, pad(s, args, name, name == "center" ? 0 : (name == "ljust" ? -1 : 1)));
    return Value::string(std::move(out));
  }
  if (name == "zfill") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"width"}, 1));
    ASSIGN_OR_RETURN(const int64_t width, int_arg(a[0], 0, "width"));
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return self;
    if (width > (int64_t{1} << 24)) return Error{"string too large"};
    std::string zeros(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) return Value::string(s.substr(0, 1) + zeros + s.substr(1));
    return Value::string(zeros + s);
  }
  if (name == "partition" || name == "rpartition") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"sep"}, 1));
    if (!a[0]->is_string()) return Error{"must be str, not " + py_type_name(*a[0])};
    const std::string& sep = a[0]->as_string();
    if (sep.empty()) return Error{"empty separator"};
    const size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    std::vector<Value> parts;
    if (hit == std::string::npos) {
      if (name == "partition") {
        parts = {self, Value::string(""), Value::string("")};
      } else {
        parts = {Value::string(""), Value::string(""), self};
      }
    } else {
      parts = {Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))};
    }
    return Value::list(make_list(std::move(parts), ListFlavor::kTuple));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"affix"}, 1));
    if (!a[0]->is_string()) return Error{"must be str, not " + py_type_name(*a[0])};
    const std::string& x = a[0]->as_string();
    if (name == "removeprefix" && s.starts_with(x)) return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && !x.empty() && s.ends_with(x)) return Value::string(s.substr(0, s.size() - x.size()));
    return self;
  }
  if (name == "format") {
    ASSIGN_OR_RETURN(std::string out, str_format(interp, s, args));
    SPILLWAY_TRY(interp.charge_bytes(out.size()));
    return Value::string(std::move(out));
  }
  if (name == "isalpha" || name == "isalnum" || name == "isdigit" || name == "isdecimal" || name == "isnumeric" ||
      name == "isspace" || name == "isascii" || name == "islower" || name == "isupper" || name == "isprintable") {
    SPILLWAY_TRY(no_args());
    if (name == "isalpha") return Value::boolean(all_of(py_isalpha));
    if (name == "isalnum") return Value::boolean(all_of(py_isalnum));
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value::boolean(all_of(py_isdigit));
    if (name == "isspace") return Value::boolean(all_of(py_isspace));
    if (name == "isprintable") return Value::boolean(s.empty() || all_of(py_isprintable));
    if (name == "isascii") {
      return Value::boolean(std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
    }
    bool has_cased = false;
    bool ok = true;
    size_t pos = 0;
    while (pos < s.size()) {
      const char32_t cp = utf8_next(s, pos);
      const bool lower = py_iscased_lower(cp);
      const bool upper = py_iscased_upper(cp);
      if (lower || upper) has_cased = true;
      if (name == "islower" && upper) ok = false;
      if (name == "isupper" && lower) ok = false;
    }
    return Value::boolean(has_cased && ok);
  }
  return not_supported(self, name);
}

Value dict_view(const Dict& d, ListFlavor flavor) {
  std::vector<Value> items;
  items.reserve(d.size());
  for (const auto& [k, v] : d.entries) {
    if (flavor == ListFlavor::kDictKeys) {
      items.push_back(k);
    } else if (flavor == ListFlavor::kDictValues) {
      items.push_back(v);
    } else {
      items.push_back(Value::list(make_list({k, v}, ListFlavor::kTuple)));
    }
  }
  return Value::list(make_list(std::move(items), flavor));
}

Result<Value> dict_method(Interpreter& interp, const Value& self, std::string_view name, const CallArgs& args) {
  const Dict& d = self.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    if (!args.args.empty() || !args.kwargs.empty()) return Error{std::string(name) + "() takes no arguments"};
    SPILLWAY_TRY(interp.charge(static_cast<int64_t>(d.size())));
    return dict_view(d, name == "items" ? ListFlavor::kDictItems
                        : name == "keys" ? ListFlavor::kDictKeys
                                         : ListFlavor::kDictValues);
  }
  if (name == "get") {
    if (!args.kwargs.empty()) return Error{"get() takes no keyword arguments"};
    if (args.args.empty() || args.args.size() > 2) return Error{"get expected 1 or 2 arguments"};
    const Value& key = args.args[0];
    if (key.is_list() || key.is_dict()) return Error{"unhashable type: '" + py_type_name(key) + "'"};
    if (const Value* v = d.find(key)) return *v;
    return args.args.size() == 2 ? args.args[1] : Value::none();
  }
  if (name == "copy") {
    auto copy = std::make_shared<Dict>(d);
    return Value::dict(std::move(copy));
  }
  return not_supported(self, name);
}

Result<Value> list_method(Interpreter& interp, const Value& self, std::string_view name, const CallArgs& args) {
  List& l = self.as_list();
  if (name == "count" || name == "index") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"value", "start", "stop"}, 1));
    int64_t n = 0;
    const auto size = static_cast<int64_t>(l.items.size());
    ASSIGN_OR_RETURN(int64_t start, int_arg(a[1], 0, "start"));
    ASSIGN_OR_RETURN(int64_t stop, int_arg(a[2], size, "stop"));
    if (start < 0) start = std::max<int64_t>(0, start + size);
    if (stop < 0) stop = std::max<int64_t>(0, stop + size);
    stop = std::min(stop, size);
    for (int64_t i = (name == "count" ? 0 : start); i < (name == "count" ? size : stop); ++i) {
      ASSIGN_OR_RETURN(const bool eq, py_equal(l.items[static_cast<size_t>(i)], *a[0]));
      if (!eq) continue;
      if (name == "index") return Value::integer(i);
      ++n;
    }
    if (name == "index") {
      auto r = py_repr(*a[0], 256);
      return Error{(r.ok() ? *r : std::string("value")) + " is not in list"};
    }
    return Value::integer(n);
  }
  if (l.flavor != ListFlavor::kList) return not_supported(self, name);
  if (name == "pop") {
    ASSIGN_OR_RETURN(auto a, bind_args(name, args, {"index"}));
    if (l.items.empty()) return Error{"pop from empty list"};
    ASSIGN_OR_RETURN(int64_t i, int_arg(a[0], -1, "index"));
    const auto n = static_cast<int64_t>(l.items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Error{"pop index out of range"};
    Value v = std::move(l.items[static_cast<size_t>(i)]);
    l.items.erase(l.items.begin() + i);
    return v;
  }
  if (name == "clear") {
    if (!args.args.empty() || !args.kwargs.empty()) return Error{"clear() takes no arguments"};
    l.items.clear();
    return Value::none();
  }
  if (name == "copy") {
    SPILLWAY_TRY(interp.charge(static_cast<int64_t>(l.items.size())));
    return Value::list(make_list(l.items));
  }
  return not_supported(self, name);
}

}  // namespace

bool has_method(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case Kind::kString: return str_methods().count(name) != 0;
    case Kind::kDict: return dict_methods().count(name) != 0;
    case Kind::kList:
      if (is_plain_list(receiver)) return list_methods().count(name) != 0;
      if (is_tuple(receiver)) return name == "count" || name == "index";
      return false;
    case Kind::kObject: {
      const ObjectKind k = receiver.as_object().object_kind();
      if (k == ObjectKind::kLoop) return name == "cycle" || name == "changed";
      if (k == ObjectKind::kCycler) return name == "next" || name == "reset";
      return false;
    }
    default: return false;
  }
}

bool is_unsafe_method(const Value& receiver, std::string_view name) {
  if (receiver.is_dict()) {
    return name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" || name == "update";
  }
  if (is_plain_list(receiver)) {
    // jinja2 3.1.2's list of MutableSequence methods; pop and clear stay allowed.
    return name == "append" || name == "reverse" || name == "insert" || name == "sort" || name == "extend" ||
           name == "remove";
  }
  return false;
}

Result<Value> call_builtin_method(Interpreter& interp, const Value& receiver, std::string_view name,
                                  const CallArgs& args) {
  switch (receiver.kind()) {
    case Kind::kString: return string_method(interp, receiver, name, args);
    case Kind::kDict: return dict_method(interp, receiver, name, args);
    case Kind::kList: return list_method(interp, receiver, name, args);
    default: return Error{"'" + py_type_name(receiver) + "' object has no attribute '" + std::string(name) + "'"};
  }
}

}  // namespace spillway::jinja
