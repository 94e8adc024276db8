// Python string formatting for templates: printf-style `fmt % values` (and the `format`
// filter) and str.format(), for the conversions and format specs templates use.
#include <cmath>
#include <cstdio>

#include "jinja/interp.h"
#include "jinja/print.h"
#include "jinja/unicode.h"

namespace spillway::jinja {


namespace {

constexpr int64_t kMaxWidth = 1 << 20;

struct Spec {
  char fill = ' ';
  char align = 0;  // '<', '>', '^', '=' or 0 (type default)
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  int64_t width = 0;
  int64_t precision = -1;
  char type = 0;
};

std::string apply_width(std::string body, const Spec& spec, bool numeric) {
  const auto len = static_cast<int64_t>(utf8_length(body));
  if (spec.width <= len) return body;
  const auto pad = static_cast<size_t>(spec.width - len);
  char align = spec.align ? spec.align : (numeric ? '>' : '<');
  char fill = spec.fill;
  if (spec.zero && !spec.align && numeric) {
    align = '=';
    fill = '0';
  }
  switch (align) {
    case '<': return body + std::string(pad, fill);
    case '^': return std::string(pad / 2, fill) + body + std::string(pad - pad / 2, fill);
    case '=': {
      size_t sign_len = (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) ? 1 : 0;
      if (body.size() > sign_len + 1 && body[sign_len] == '0' &&
          (body[sign_len + 1] == 'x' || body[sign_len + 1] == 'X' || body[sign_len + 1] == 'o' ||
           body[sign_len + 1] == 'b')) {
        sign_len += 2;
      }
      return body.substr(0, sign_len) + std::string(pad, fill) + body.substr(sign_len);
    }
    default: return std::string(pad, fill) + body;
  }
}

std::string c_format(const char* fmt, double d) {
  char buf[512];
  const int n = std::snprintf(buf, sizeof(buf), fmt, d);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), fmt, d);
  big.resize(static_cast<size_t>(n));
  return big;
}

// The digits of |v| in base 2, 8, 10 or 16 (no sign; INT64_MIN included).
std::string abs_digits(int64_t v, int base, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string out;
  do {
    out.insert(out.begin(), digits[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  } while (u != 0);
  return out;
}

std::string with_sign(std::string body, bool negative, char sign) {
  if (negative) return "-" + body;
  if (sign == '+') return "+" + body;
  if (sign == ' ') return " " + body;
  return body;
}

Result<std::string> format_float(double d, char type, int64_t precision, char sign, bool alternate) {
  if (precision > 1000) return Error{"precision too big"};
  if (std::isnan(d) || std::isinf(d)) {
    std::string s = std::isnan(d) ? "nan" : "inf";
    if (type == 'E' || type == 'F' || type == 'G') s = std::isnan(d) ? "NAN" : "INF";
    return with_sign(s, std::signbit(d) && !std::isnan(d), sign);
  }
  if (type == 0 && precision < 0) return with_sign(float_repr(std::fabs(d)), std::signbit(d), sign);
  const int p = static_cast<int>(precision < 0 ? 6 : precision);
  std::string fmt = std::string("%") + (alternate ? "#" : "") + "." + std::to_string(p);
  char t = type;
  if (type == 0) t = 'g';
  if (type == '%') t = 'f';
  fmt += t;
  std::string body = c_format(fmt.c_str(), std::fabs(type == '%' ? d * 100 : d));
  if (type == '%') body += '%';
  return with_sign(body, std::signbit(d), sign);
}

Result<std::string> format_value(Interpreter& interp, const Value& v, const Spec& spec) {
  if (v.is_undefined()) return Error{v.undefined_message()};
  if (v.is_integral() && !(v.is_bool() && spec.type == 0)) {
    const int64_t i = v.to_int();
    std::string body;
    switch (spec.type) {
      case 0:
      case 'd':
      case 'n': body = abs_digits(i, 10, false); break;
      case 'x':
      case 'X': body = (spec.alternate ? (spec.type == 'x' ? "0x" : "0X") : "") + abs_digits(i, 16, spec.type == 'X'); break;
      case 'o': body = (spec.alternate ? "0o" : "") + abs_digits(i, 8, false); break;
      case 'b': body = (spec.alternate ? "0b" : "") + abs_digits(i, 2, false); break;
      case 'c': {
        std::string c;
        if (i < 0 || i > 0x10FFFF) return Error{"%c arg not in range(0x110000)"};
        utf8_append(c, static_cast<char32_t>(i));
        return apply_width(c, spec, false);
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G':
      case '%': {
        ASSIGN_OR_RETURN(std::string f, format_float(static_cast<double>(i), spec.type, spec.precision, spec.sign, spec.alternate));
        return apply_width(f, spec, true);
      }
      default: return Error{std::string("Unknown format code '") + spec.type + "' for object of type 'int'"};
    }
    return apply_width(with_sign(body, i < 0, spec.sign), spec, true);
  }
  if (v.is_float()) {
    if (spec.type != 0 && std::string_view("eEfFgG%").find(spec.type) == std::string_view::npos) {
      return Error{std::string("Unknown format code '") + spec.type + "' for object of type 'float'"};
    }
    ASSIGN_OR_RETURN(std::string f, format_float(v.as_float(), spec.type, spec.precision, spec.sign, spec.alternate));
    return apply_width(f, spec, true);
  }
  if (spec.type != 0 && spec.type != 's') {
    return Error{std::string("Unknown format code '") + spec.type + "' for object of type '" + py_type_name(v) + "'"};
  }
  ASSIGN_OR_RETURN(std::string s, interp.to_str(v));
  if (spec.precision >= 0) {
    const std::vector<size_t> off = utf8_offsets(s);
    if (static_cast<size_t>(spec.precision) < off.size() - 1) s = s.substr(0, off[static_cast<size_t>(spec.precision)]);
  }
  return apply_width(s, spec, false);
}

Result<Spec> parse_format_spec(std::string_view s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    spec.fill = s[0];
    spec.align = s[1];
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') spec.alternate = true, ++i;
  if (i < s.size() && s[i] == '0') spec.zero = true, ++i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    spec.width = spec.width * 10 + (s[i++] - '0');
    if (spec.width > kMaxWidth) return Error{"format width too big"};
  }
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) return Error{"thousands separators are not supported"};
  if (i < s.size() && s[i] == '.') {
    ++i;
    spec.precision = 0;
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return Error{"Format specifier missing precision"};
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      spec.precision = spec.precision * 10 + (s[i++] - '0');
      if (spec.precision > kMaxWidth) return Error{"precision too big"};
    }
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) return Error{"Invalid format specifier"};
  return spec;
}

}  // namespace

Result<std::string> percent_format(Interpreter& interp, const std::string& fmt, const Value& values) {
  std::vector<Value> args;
  const Dict* mapping = nullptr;
  if (values.is_list() && values.as_list().flavor == ListFlavor::kTuple) {
    args = values.as_list().items;
  } else {
    if (values.is_dict()) mapping = &values.as_dict();
    args.push_back(values);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  size_t i = 0;
  auto take = [&]() -> Result<Value> {
    if (next >= args.size()) return Error{"not enough arguments for format string"};
    return args[next++];
  };
  while (i < fmt.size()) {
    const char c = fmt[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= fmt.size()) return Error{"incomplete format"};
    Value arg;
    bool have_arg = false;
    if (fmt[i] == '(') {
      if (mapping == nullptr) return Error{"format requires a mapping"};
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) return Error{"incomplete format key"};
      const Value* v = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (v == nullptr) return Error{string_repr(fmt.substr(i + 1, close - i - 1))};
      arg = *v;
      have_arg = true;
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    spec.align = '>';
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
      const char f = fmt[i++];
      if (f == '-') spec.align = '<';
      if (f == '+') spec.sign = '+';
      if (f == ' ' && spec.sign != '+') spec.sign = ' ';
      if (f == '#') spec.alternate = true;
      if (f == '0') spec.zero = true;
    }
    if (i < fmt.size() && fmt[i] == '*') {
      ASSIGN_OR_RETURN(const Value w, take());
      if (!w.is_integral()) return Error{"* wants int"};
      const int64_t width = w.to_int();
      if (width < -kMaxWidth || width > kMaxWidth) return Error{"format width too big"};
      spec.width = width;
      if (spec.width < 0) spec.align = '<', spec.width = -spec.width;
      ++i;
    } else {
      // Digits stop counting past the limit (no overflow); the check below rejects them.
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        if (spec.width <= kMaxWidth) spec.width = spec.width * 10 + (fmt[i] - '0');
        ++i;
      }
    }
    if (spec.width > kMaxWidth) return Error{"format width too big"};
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        if (spec.precision <= kMaxWidth) spec.precision = spec.precision * 10 + (fmt[i] - '0');
        ++i;
      }
      if (spec.precision > kMaxWidth) return Error{"precision too big"};
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) return Error{"incomplete format"};
    const char conv = fmt[i++];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!have_arg) {
      ASSIGN_OR_RETURN(arg, take());
    }
    if (spec.zero && spec.align == '>') spec.align = '=', spec.fill = '0';
    std::string piece;
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        if (conv == 's') {
          ASSIGN_OR_RETURN(piece, interp.to_str(arg));
        } else {
          ASSIGN_OR_RETURN(piece, py_repr(arg, interp.limits().max_string_bytes));
        }
        if (spec.precision >= 0) {
          const std::vector<size_t> off = utf8_offsets(piece);
          if (static_cast<size_t>(spec.precision) < off.size() - 1) piece = piece.substr(0, off[static_cast<size_t>(spec.precision)]);
        }
        spec.fill = ' ';
        if (spec.align == '=') spec.align = '>';
        out += apply_width(piece, spec, false);
        continue;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (arg.is_undefined()) return Error{arg.undefined_message()};
        if (!arg.is_number()) {
          return Error{std::string("%") + conv + " format: " + (conv == 'd' || conv == 'i' || conv == 'u' ? "a real number" : "an integer") +
                       " is required, not " + py_type_name(arg)};
        }
        Spec s2 = spec;
        s2.type = (conv == 'i' || conv == 'u') ? 'd' : conv;
        if (arg.is_float() && !(std::fabs(arg.as_float()) < 9.2e18)) {
          return Error{"cannot format this float as an integer (this interpreter's integers are 64-bit)"};
        }
        const int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_float())) : arg.to_int();
        ASSIGN_OR_RETURN(piece, format_value(interp, Value::integer(v), s2));
        if (s2.precision > 0) {
          // %.3d pads the digits with zeros
          std::string digits = abs_digits(v, s2.type == 'd' ? 10 : (s2.type == 'o' ? 8 : 16), s2.type == 'X');
          while (static_cast<int64_t>(digits.size()) < s2.precision) digits = "0" + digits;
          s2.precision = -1;
          piece = apply_width(with_sign(digits, v < 0, s2.sign), s2, true);
        }
        out += piece;
        continue;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (arg.is_undefined()) return Error{arg.undefined_message()};
        if (!arg.is_number()) return Error{std::string("must be real number, not ") + py_type_name(arg)};
        ASSIGN_OR_RETURN(piece, format_float(arg.to_double(), conv, spec.precision < 0 ? 6 : spec.precision, spec.sign, spec.alternate));
        out += apply_width(piece, spec, true);
        continue;
      }
      case 'c': {
        if (arg.is_string() && utf8_length(arg.as_string()) == 1) {
          piece = arg.as_string();
        } else if (arg.is_integral()) {
          const int64_t cp = arg.to_int();
          if (cp < 0 || cp > 0x10FFFF) return Error{"%c arg not in range(0x110000)"};
          utf8_append(piece, static_cast<char32_t>(cp));
        } else {
          return Error{"%c requires int or char"};
        }
        out += apply_width(piece, spec, false);
        continue;
      }
      default: return Error{std::string("unsupported format character '") + conv + "'"};
    }
  }
  if (!used_mapping && mapping == nullptr && next < args.size()) {
    return Error{"not all arguments converted during string formatting"};
  }
  return out;
}

Result<std::string> str_format(Interpreter& interp, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      return Error{"Single '}' encountered in format string"};
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    // {field_name!conversion:spec}; nested {} in the spec are not supported.
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return Error{"expected '}' before end of string"};
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    if (field.find('{') != std::string::npos) return Error{"nested format fields are not supported"};
    std::string spec_text;
    char conversion = 0;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) return Error{"expected ':' after conversion specifier"};
      conversion = field[bang + 1];
      field.resize(bang);
    }
    size_t p = 0;
    while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
    const std::string first = field.substr(0, p);
    Value v;
    if (first.empty() || std::all_of(first.begin(), first.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      size_t index = auto_index;
      if (first.empty()) {
        ++auto_index;
      } else {
        index = std::stoul(first.substr(0, 9));
      }
      if (index >= args.args.size()) return Error{"Replacement index " + std::to_string(index) + " out of range for positional args tuple"};
      v = args.args[index];
    } else {
      bool found = false;
      for (const auto& [k, x] : args.kwargs) {
        if (k == first) {
          v = x;
          found = true;
          break;
        }
      }
      if (!found) return Error{string_repr(first)};
    }
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t e = p + 1;
        while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
        ASSIGN_OR_RETURN(v, interp.getattr(v, field.substr(p + 1, e - p - 1)));
        p = e;
      } else {
        const size_t e = field.find(']', p);
        if (e == std::string::npos) return Error{"Missing ']' in format string"};
        const std::string key = field.substr(p + 1, e - p - 1);
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        ASSIGN_OR_RETURN(v, interp.getitem(v, numeric ? Value::integer(std::stoll(key.substr(0, 18))) : Value::string(key)));
        p = e + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      ASSIGN_OR_RETURN(std::string r, py_repr(v, interp.limits().max_string_bytes));
      v = Value::string(std::move(r));
    } else if (conversion == 's') {
      ASSIGN_OR_RETURN(std::string s, interp.to_str(v));
      v = Value::string(std::move(s));
    } else if (conversion != 0) {
      return Error{std::string("Unknown conversion specifier ") + conversion};
    }
    ASSIGN_OR_RETURN(const Spec spec, parse_format_spec(spec_text));
    ASSIGN_OR_RETURN(std::string piece, format_value(interp, v, spec));
    out += piece;
    if (out.size() > interp.limits().max_string_bytes) return Error{"string too large"};
  }
  return out;
}

}  // namespace spillway::jinja
