#include "jinja/print.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "jinja/unicode.h"

namespace spillway::jinja {
namespace {

Error too_deep() { return Error{"value nested too deeply to print"}; }

Status repr_into(std::string& out, const Value& v, uint32_t depth, size_t limit);

Error too_large() { return Error{"string too large"}; }

Status repr_items(std::string& out, const std::vector<Value>& items, uint32_t depth, size_t limit) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    SPILLWAY_TRY(repr_into(out, items[i], depth + 1, limit));
  }
  return {};
}

Status repr_dict_body(std::string& out, const Dict& d, uint32_t depth, size_t limit) {
  out += '{';
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (i > 0) out += ", ";
    SPILLWAY_TRY(repr_into(out, d.entries[i].first, depth + 1, limit));
    out += ": ";
    SPILLWAY_TRY(repr_into(out, d.entries[i].second, depth + 1, limit));
  }
  out += '}';
  return {};
}

Status repr_into(std::string& out, const Value& v, uint32_t depth, size_t limit) {
  if (depth > kMaxValueDepth) return too_deep();
  if (out.size() > limit) return too_large();
  if (v.is_string() && out.size() + v.as_string().size() > limit) return too_large();
  switch (v.kind()) {
    case Kind::kUndefined: out += "Undefined"; return {};
    case Kind::kNone: out += "None"; return {};
    case Kind::kBool: out += v.as_bool() ? "True" : "False"; return {};
    case Kind::kInt: out += std::to_string(v.as_int()); return {};
    case Kind::kFloat: out += float_repr(v.as_float()); return {};
    case Kind::kString: out += string_repr(v.as_string()); return {};
    case Kind::kList: {
      const List& l = v.as_list();
      switch (l.flavor) {
        case ListFlavor::kList:
          out += '[';
          SPILLWAY_TRY(repr_items(out, l.items, depth, limit));
          out += ']';
          return {};
        case ListFlavor::kTuple:
          out += '(';
          SPILLWAY_TRY(repr_items(out, l.items, depth, limit));
          if (l.items.size() == 1) out += ',';
          out += ')';
          return {};
        case ListFlavor::kGenerator:
          out += "<generator object " + l.generator_name + " at 0x7f0000000000>";
          return {};
        case ListFlavor::kReverseIterator:
          out += "<list_reverseiterator object at 0x7f0000000000>";
          return {};
        case ListFlavor::kDictKeys:
        case ListFlavor::kDictValues:
        case ListFlavor::kDictItems:
          out += py_type_name(v) + "([";
          SPILLWAY_TRY(repr_items(out, l.items, depth, limit));
          out += "])";
          return {};
        case ListFlavor::kRange:
          out += "range(" + std::to_string(l.range_start) + ", " + std::to_string(l.range_stop);
          if (l.range_step != 1) out += ", " + std::to_string(l.range_step);
          out += ')';
          return {};
      }
      return {};
    }
    case Kind::kDict: return repr_dict_body(out, v.as_dict(), depth, limit);
    case Kind::kObject: {
      const Object& o = v.as_object();
      if (o.object_kind() == ObjectKind::kNamespace) {
        out += "<Namespace ";
        SPILLWAY_TRY(repr_dict_body(out, static_cast<const Namespace&>(o).attrs, depth, limit));
        out += '>';
        return {};
      }
      out += o.repr();
      return {};
    }
  }
  return {};
}

void append_hex(std::string& out, uint32_t value, int digits) {
  static const char* kHex = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(value >> (4 * i)) & 0xF];
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t pos = 0;
  while (pos < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b >= 0x80) {
      const size_t start = pos;
      const char32_t cp = utf8_next(s, pos);
      if (!ensure_ascii) {
        out.append(s.substr(start, pos - start));
      } else if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        out += "\\u";
        append_hex(out, 0xD800 + (v >> 10), 4);
        out += "\\u";
        append_hex(out, 0xDC00 + (v & 0x3FF), 4);
      } else {
        out += "\\u";
        append_hex(out, cp, 4);
      }
      continue;
    }
    ++pos;
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (b < 0x20) {
          out += "\\u";
          append_hex(out, b, 4);
        } else {
          out += static_cast<char>(b);
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

Error not_serializable(const Value& v) {
  std::string type = py_type_name(v);
  if (v.is_object() && v.as_object().object_kind() == ObjectKind::kLoop) type = "LoopContext";
  return Error{"Object of type " + type + " is not JSON serializable"};
}

class JsonWriter {
 public:
  JsonWriter(std::string& out, const JsonOptions& o) : out_(out), o_(o) {}

  Status write(const Value& v, uint32_t level) {
    if (level > kMaxValueDepth) return Error{"Circular reference detected or value nested too deeply"};
    if (out_.size() > o_.max_bytes) return too_large();
    if (v.is_string() && out_.size() + v.as_string().size() > o_.max_bytes) return too_large();
    switch (v.kind()) {
      case Kind::kNone: out_ += "null"; return {};
      case Kind::kBool: out_ += v.as_bool() ? "true" : "false"; return {};
      case Kind::kInt: out_ += std::to_string(v.as_int()); return {};
      case Kind::kFloat: out_ += json_float(v.as_float()); return {};
      case Kind::kString: json_string(out_, v.as_string(), o_.ensure_ascii); return {};
      case Kind::kList: {
        const List& l = v.as_list();
        if (l.flavor != ListFlavor::kList && l.flavor != ListFlavor::kTuple) return not_serializable(v);
        if (l.items.empty()) {
          out_ += "[]";
          return {};
        }
        out_ += '[';
        for (size_t i = 0; i < l.items.size(); ++i) {
          separator(i, level + 1);
          SPILLWAY_TRY(write(l.items[i], level + 1));
        }
        close(level, ']');
        return {};
      }
      case Kind::kDict: return write_dict(v.as_dict(), level);
      default: return not_serializable(v);
    }
  }

 private:
  void separator(size_t index, uint32_t level) {
    if (index > 0) out_ += o_.item_separator;
    if (o_.indent) {
      out_ += '\n';
      for (uint32_t i = 0; i < level; ++i) out_ += *o_.indent;
    }
  }

  void close(uint32_t level, char c) {
    if (o_.indent) {
      out_ += '\n';
      for (uint32_t i = 0; i < level; ++i) out_ += *o_.indent;
    }
    out_ += c;
  }

  Status write_key(const Value& k) {
    switch (k.kind()) {
      case Kind::kString: json_string(out_, k.as_string(), o_.ensure_ascii); return {};
      case Kind::kInt: out_ += '"' + std::to_string(k.as_int()) + '"'; return {};
      case Kind::kFloat: out_ += '"' + json_float(k.as_float()) + '"'; return {};
      case Kind::kBool: out_ += k.as_bool() ? "\"true\"" : "\"false\""; return {};
      case Kind::kNone: out_ += "\"null\""; return {};
      default:
        return Error{"keys must be str, int, float, bool or None, not " + py_type_name(k)};
    }
  }

  Status write_dict(const Dict& d, uint32_t level) {
    if (d.entries.empty()) {
      out_ += "{}";
      return {};
    }
    std::vector<size_t> order(d.entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (o_.sort_keys) {
      Status failed;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (!failed.ok()) return false;
        auto less = py_less(d.entries[a].first, d.entries[b].first);
        if (!less.ok()) {
          failed = less.error();
          return false;
        }
        return *less;
      });
      if (!failed.ok()) return failed;
    }
    out_ += '{';
    for (size_t i = 0; i < order.size(); ++i) {
      separator(i, level + 1);
      const auto& [k, v] = d.entries[order[i]];
      SPILLWAY_TRY(write_key(k));
      out_ += o_.key_separator;
      SPILLWAY_TRY(write(v, level + 1));
    }
    close(level, '}');
    return {};
  }

  std::string& out_;
  const JsonOptions& o_;
};

}  // namespace

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  const int decpt = exponent + 1;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += exponent < 0 ? '-' : '+';
    const int a = std::abs(exponent);
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(static_cast<size_t>(decpt - n), '0');
    out += ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt));
    out += '.';
    out += digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const char32_t cp = utf8_next(s, pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (py_isprintable(cp)) {
      out.append(s.substr(start, pos - start));
    } else if (cp < 0x100) {
      out += "\\x";
      append_hex(out, cp, 2);
    } else if (cp < 0x10000) {
      out += "\\u";
      append_hex(out, cp, 4);
    } else {
      out += "\\U";
      append_hex(out, cp, 8);
    }
  }
  out += quote;
  return out;
}

Result<std::string> py_repr(const Value& v, size_t max_bytes) {
  std::string out;
  SPILLWAY_TRY(repr_into(out, v, 0, max_bytes));
  if (out.size() > max_bytes) return too_large();
  return out;
}

Status append_str(std::string& out, const Value& v, size_t max_bytes) {
  if (v.is_string()) {
    if (out.size() + v.as_string().size() > max_bytes) return too_large();
    out += v.as_string();
    return {};
  }
  if (v.is_undefined()) return {};
  SPILLWAY_TRY(repr_into(out, v, 0, max_bytes));
  if (out.size() > max_bytes) return too_large();
  return {};
}

Result<std::string> py_str(const Value& v, size_t max_bytes) {
  if (v.is_string()) {
    if (v.as_string().size() > max_bytes) return too_large();
    return v.as_string();
  }
  std::string out;
  SPILLWAY_TRY(append_str(out, v, max_bytes));
  return out;
}

Result<std::string> to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  JsonWriter writer(out, options);
  SPILLWAY_TRY(writer.write(v, 0));
  if (out.size() > options.max_bytes) return too_large();
  return out;
}

}  // namespace spillway::jinja
