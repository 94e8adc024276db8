#include "jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "jinja/unicode.h"

namespace spillway::jinja {
namespace {

Error syntax_error(int line, const std::string& message) {
  return Error{"syntax error at line " + std::to_string(line) + ": " + message};
}

int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python `\s` at s[pos]: its length in bytes, 0 if not whitespace.
size_t space_len(std::string_view s, size_t pos) {
  const auto b = static_cast<unsigned char>(s[pos]);
  if (b < 0x80) return py_isspace(b) ? 1 : 0;
  size_t p = pos;
  const char32_t cp = utf8_next(s, p);
  return py_isspace(cp) ? p - pos : 0;
}

size_t skip_spaces(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const size_t n = space_len(s, pos);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

// Python str.rstrip() (all Unicode whitespace).
std::string_view rstrip_spaces(std::string_view s) {
  const std::vector<size_t> off = utf8_offsets(s);
  size_t end = off.size() - 1;
  while (end > 0) {
    size_t p = off[end - 1];
    if (!py_isspace(utf8_next(s, p))) break;
    --end;
  }
  return s.substr(0, off[end]);
}

bool all_spaces(std::string_view s) {
  if (s.empty()) return false;
  return skip_spaces(s, 0) == s.size();
}

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp >= 0xD800 && cp <= 0xDFFF) {  // a lone surrogate: kept as its 3-byte form
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    utf8_append(out, cp);
  }
}

// The body of a string literal decoded as jinja2 does: Python's "unicode-escape" codec
// after non-ASCII characters were backslash-replaced.
Result<std::string> decode_string(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= body.size()) return syntax_error(line, "\\ at end of string");
    const char e = body[i + 1];
    i += 2;
    switch (e) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        char32_t cp = 0;
        for (int k = 0; k < digits; ++k) {
          const int h = i + k < body.size() ? hex_value(body[i + k]) : -1;
          if (h < 0) {
            return syntax_error(line, std::string("truncated \\") + e + std::string(digits, 'X') + " escape");
          }
          cp = cp * 16 + static_cast<char32_t>(h);
        }
        if (cp > 0x10FFFF) return syntax_error(line, "illegal Unicode character");
        i += digits;
        append_code_point(out, cp);
        break;
      }
      case 'N': return syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k, ++i) {
            cp = cp * 8 + static_cast<char32_t>(body[i] - '0');
          }
          append_code_point(out, cp);
        } else if (static_cast<unsigned char>(e) >= 0x80) {
          // backslashreplace turned the character into \xNN / \uNNNN / \UNNNNNNNN, and the
          // codec then read "\\" as one backslash: the escape text stays.
          size_t p = i - 1;
          const char32_t cp = utf8_next(body, p);
          i = p;
          static const char* kHex = "0123456789abcdef";
          const int digits = cp < 0x100 ? 2 : (cp < 0x10000 ? 4 : 8);
          out += '\\';
          out += cp < 0x100 ? 'x' : (cp < 0x10000 ? 'u' : 'U');
          for (int k = digits - 1; k >= 0; --k) out += kHex[(cp >> (4 * k)) & 0xF];
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  Result<std::vector<Token>> run() {
    while (pos_ < s_.size()) {
      const size_t open = find_open(pos_);
      if (open == std::string::npos) {
        emit_data(std::string_view(s_).substr(pos_));
        pos_ = s_.size();
        break;
      }
      const char kind = s_[open + 1];
      const char sign = open + 2 < s_.size() && (s_[open + 2] == '-' || s_[open + 2] == '+') ? s_[open + 2] : 0;
      size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(open, raw_end);
      std::string_view text = std::string_view(s_).substr(pos_, open - pos_);
      strip_before_tag(text, sign, kind != '{');
      if (raw) {
        line_starting_ = s_[raw_end - 1] == '\n';
        line_ += count_newlines(std::string_view(s_).substr(open, raw_end - open));
        pos_ = raw_end;
        SPILLWAY_TRY(lex_raw_body());
      } else if (kind == '#') {
        SPILLWAY_TRY(lex_comment(open + 2 + (sign ? 1 : 0)));
      } else {
        line_starting_ = false;
        push(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin);
        pos_ = open + 2 + (sign ? 1 : 0);
        SPILLWAY_TRY(lex_tag(kind == '{'));
      }
    }
    push(TokenType::kEof);
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    size_t p = from;
    while ((p = s_.find('{', p)) != std::string::npos) {
      if (p + 1 < s_.size() && (s_[p + 1] == '%' || s_[p + 1] == '{' || s_[p + 1] == '#')) return p;
      ++p;
    }
    return std::string::npos;
  }

  bool starts_with(size_t p, std::string_view what) const {
    return s_.compare(p, what.size(), what) == 0;
  }

  // {%(-|+|)\s*raw\s*(?:-%}\s*|%})  at p; *end is set past the match.
  bool match_raw_begin(size_t p, size_t& end) const {
    size_t q = p + 2;
    if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ++q;
    q = skip_spaces(s_, q);
    if (!starts_with(q, "raw")) return false;
    q = skip_spaces(s_, q + 3);
    if (starts_with(q, "-%}")) {
      end = skip_spaces(s_, q + 3);
      return true;
    }
    if (starts_with(q, "%}")) {
      end = q + 2;
      return true;
    }
    return false;
  }

  // jinja2's OptionalLStrip: `-` strips all whitespace before the tag; otherwise, for
  // block and comment tags, lstrip_blocks strips spaces between the line start and the tag.
  void strip_before_tag(std::string_view text, char sign, bool lstrip_applies) {
    int stripped_newlines = 0;
    if (sign == '-') {
      const std::string_view kept = rstrip_spaces(text);
      stripped_newlines = count_newlines(text.substr(kept.size()));
      text = kept;
    } else if (sign != '+' && lstrip_applies) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) text = text.substr(0, l_pos);
    }
    emit_data(text);
    line_ += stripped_newlines;
  }

  void emit_data(std::string_view text) {
    if (!text.empty()) {
      Token t;
      t.type = TokenType::kData;
      t.line = line_;
      t.text = std::string(text);
      tokens_.push_back(std::move(t));
    }
    line_ += count_newlines(text);
  }

  void push(TokenType type) {
    Token t;
    t.type = type;
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  Status lex_comment(size_t from) {
    for (size_t j = from; j + 1 < s_.size(); ++j) {
      size_t end = 0;
      if (starts_with(j, "+#}")) {
        end = j + 3;
      } else if (starts_with(j, "-#}")) {
        end = skip_spaces(s_, j + 3);
      } else if (starts_with(j, "#}")) {
        end = j + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      } else {
        continue;
      }
      line_ += count_newlines(std::string_view(s_).substr(pos_, end - pos_));
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return {};
    }
    return syntax_error(line_, "Missing end of comment tag");
  }

  Status lex_raw_body() {
    for (size_t j = pos_; j + 1 < s_.size(); ++j) {
      if (!starts_with(j, "{%")) continue;
      size_t q = j + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      q = skip_spaces(s_, q);
      if (!starts_with(q, "endraw")) continue;
      q = skip_spaces(s_, q + 6);
      size_t end = 0;
      if (starts_with(q, "+%}")) {
        end = q + 3;
      } else if (starts_with(q, "-%}")) {
        end = skip_spaces(s_, q + 3);
      } else if (starts_with(q, "%}")) {
        end = q + 2;
        if (end < s_.size() && s_[end] == '\n') ++end;
      } else {
        continue;
      }
      strip_before_tag(std::string_view(s_).substr(pos_, j - pos_), sign, true);
      line_ += count_newlines(std::string_view(s_).substr(j, end - j));
      line_starting_ = s_[end - 1] == '\n';
      pos_ = end;
      return {};
    }
    return syntax_error(line_, "Missing end of raw directive");
  }

  // Inside {{ }} or {% %}: operands and operators up to the matching end tag.
  Status lex_tag(bool variable) {
    std::vector<char> balance;
    while (pos_ < s_.size()) {
      if (balance.empty()) {
        size_t end = 0;
        if (variable) {
          if (starts_with(pos_, "-}}")) end = skip_spaces(s_, pos_ + 3);
          else if (starts_with(pos_, "}}")) end = pos_ + 2;
        } else {
          if (starts_with(pos_, "+%}")) {
            end = pos_ + 3;
          } else if (starts_with(pos_, "-%}")) {
            end = skip_spaces(s_, pos_ + 3);
          } else if (starts_with(pos_, "%}")) {
            end = pos_ + 2;
            if (end < s_.size() && s_[end] == '\n') ++end;
          }
        }
        if (end != 0) {
          push(variable ? TokenType::kVariableEnd : TokenType::kBlockEnd);
          line_ += count_newlines(std::string_view(s_).substr(pos_, end - pos_));
          line_starting_ = s_[end - 1] == '\n';
          pos_ = end;
          return {};
        }
      }
      if (const size_t n = space_len(s_, pos_); n > 0) {
        if (s_[pos_] == '\n') ++line_;
        pos_ += n;
        continue;
      }
      const char c = s_[pos_];
      if (is_digit(c)) {
        SPILLWAY_TRY(lex_number());
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        Token t;
        t.type = TokenType::kName;
        t.line = line_;
        t.text = s_.substr(pos_, e - pos_);
        tokens_.push_back(std::move(t));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        SPILLWAY_TRY(lex_string(c));
      } else {
        SPILLWAY_TRY(lex_operator(balance));
      }
    }
    return {};  // end of template inside a tag: the parser reports it
  }

  // Digits with optional single underscores between them, starting at p.
  size_t scan_digits(size_t p) const {
    if (p >= s_.size() || !is_digit(s_[p])) return p;
    ++p;
    while (p < s_.size()) {
      if (is_digit(s_[p])) {
        ++p;
      } else if (s_[p] == '_' && p + 1 < s_.size() && is_digit(s_[p + 1])) {
        p += 2;
      } else {
        break;
      }
    }
    return p;
  }

  Status lex_number() {
    const size_t start = pos_;
    const size_t int_end = scan_digits(start);
    // float_re: digits, then a fraction and/or an exponent; never after a '.'.
    size_t p = int_end;
    bool is_float = false;
    if (start == 0 || s_[start - 1] != '.') {
      size_t q = p;
      bool fraction = false;
      if (q < s_.size() && s_[q] == '.' && q + 1 < s_.size() && is_digit(s_[q + 1])) {
        q = scan_digits(q + 1);
        fraction = true;
      }
      size_t r = q;
      bool exponent = false;
      if (r < s_.size() && (s_[r] == 'e' || s_[r] == 'E')) {
        size_t t = r + 1;
        if (t < s_.size() && (s_[t] == '+' || s_[t] == '-')) ++t;
        if (t < s_.size() && is_digit(s_[t])) {
          r = scan_digits(t);
          exponent = true;
        }
      }
      if (exponent) {
        p = r, is_float = true;
      } else if (fraction) {
        p = q, is_float = true;
      }
    }
    Token t;
    t.line = line_;
    if (is_float) {
      std::string text;
      for (size_t i = start; i < p; ++i) {
        if (s_[i] != '_') text += s_[i];
      }
      t.type = TokenType::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
      pos_ = p;
      tokens_.push_back(std::move(t));
      return {};
    }
    // integer_re: 0b / 0o / 0x prefixes, [1-9] digits, or zeros.
    int base = 10;
    size_t digits_start = start;
    size_t end = int_end;
    if (s_[start] == '0' && start + 1 < s_.size()) {
      const char x = static_cast<char>(s_[start + 1] | 0x20);
      base = x == 'b' ? 2 : (x == 'o' ? 8 : (x == 'x' ? 16 : 10));
      if (base != 10) {
        size_t q = start + 2;
        auto ok = [&](char ch) {
          const int h = hex_value(ch);
          return h >= 0 && h < base;
        };
        while (q < s_.size()) {
          if (ok(s_[q])) {
            ++q;
          } else if (s_[q] == '_' && q + 1 < s_.size() && ok(s_[q + 1])) {
            q += 2;
          } else {
            break;
          }
        }
        if (q == start + 2) {
          base = 10;
        } else {
          digits_start = start + 2;
          end = q;
        }
      }
      if (base == 10) {  // "0(_?0)*"
        end = start + 1;
        while (end < s_.size()) {
          if (s_[end] == '0') {
            ++end;
          } else if (s_[end] == '_' && end + 1 < s_.size() && s_[end + 1] == '0') {
            end += 2;
          } else {
            break;
          }
        }
      }
    }
    uint64_t value = 0;
    for (size_t i = digits_start; i < end; ++i) {
      if (s_[i] == '_') continue;
      const uint64_t d = static_cast<uint64_t>(hex_value(s_[i]));
      if (value > (static_cast<uint64_t>(INT64_MAX) - d) / static_cast<uint64_t>(base)) {
        return syntax_error(line_, "integer literal too large");
      }
      value = value * static_cast<uint64_t>(base) + d;
    }
    t.type = TokenType::kInteger;
    t.int_value = static_cast<int64_t>(value);
    pos_ = end;
    tokens_.push_back(std::move(t));
    return {};
  }

  Status lex_string(char quote) {
    size_t p = pos_ + 1;
    while (p < s_.size() && s_[p] != quote) {
      if (s_[p] == '\\') ++p;
      ++p;
    }
    if (p >= s_.size()) return syntax_error(line_, std::string("unexpected char '") + quote + "'");
    const std::string_view body = std::string_view(s_).substr(pos_ + 1, p - pos_ - 1);
    auto decoded = decode_string(body, line_);
    if (!decoded.ok()) return decoded.error();
    Token t;
    t.type = TokenType::kString;
    t.line = line_;
    t.text = std::move(decoded).value();
    tokens_.push_back(std::move(t));
    line_ += count_newlines(body);
    pos_ = p + 1;
    return {};
  }

  Status lex_operator(std::vector<char>& balance) {
    struct Op {
      std::string_view text;
      TokenType type;
    };
    static const Op kOps[] = {
        {"**", TokenType::kPow}, {"//", TokenType::kFloorDiv}, {"==", TokenType::kEq},
        {"!=", TokenType::kNe},  {">=", TokenType::kGe},       {"<=", TokenType::kLe},
        {"+", TokenType::kAdd},  {"-", TokenType::kSub},       {"/", TokenType::kDiv},
        {"*", TokenType::kMul},  {"%", TokenType::kMod},       {"~", TokenType::kTilde},
        {"[", TokenType::kLBracket}, {"]", TokenType::kRBracket}, {"(", TokenType::kLParen},
        {")", TokenType::kRParen},   {"{", TokenType::kLBrace},   {"}", TokenType::kRBrace},
        {">", TokenType::kGt},   {"<", TokenType::kLt},        {"=", TokenType::kAssign},
        {".", TokenType::kDot},  {":", TokenType::kColon},     {"|", TokenType::kPipe},
        {",", TokenType::kComma}, {";", TokenType::kSemicolon},
    };
    for (const Op& op : kOps) {
      if (!starts_with(pos_, op.text)) continue;
      const char c = op.text[0];
      if (op.text.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
      } else if (op.text.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) return syntax_error(line_, std::string("unexpected '") + c + "'");
        const char expected = balance.back();
        balance.pop_back();
        if (expected != c) {
          return syntax_error(line_, std::string("unexpected '") + c + "', expected '" + expected + "'");
        }
      }
      push(op.type);
      pos_ += op.text.size();
      return {};
    }
    size_t p = pos_;
    std::string ch;
    utf8_append(ch, utf8_next(s_, p));
    return syntax_error(line_, "unexpected char '" + ch + "'");
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kData: return "template data / text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kName: return token.text;
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kAdd: return "+";
    case TokenType::kSub: return "-";
    case TokenType::kMul: return "*";
    case TokenType::kDiv: return "/";
    case TokenType::kFloorDiv: return "//";
    case TokenType::kMod: return "%";
    case TokenType::kPow: return "**";
    case TokenType::kTilde: return "~";
    case TokenType::kLBracket: return "[";
    case TokenType::kRBracket: return "]";
    case TokenType::kLParen: return "(";
    case TokenType::kRParen: return ")";
    case TokenType::kLBrace: return "{";
    case TokenType::kRBrace: return "}";
    case TokenType::kEq: return "==";
    case TokenType::kNe: return "!=";
    case TokenType::kGt: return ">";
    case TokenType::kGe: return ">=";
    case TokenType::kLt: return "<";
    case TokenType::kLe: return "<=";
    case TokenType::kAssign: return "=";
    case TokenType::kDot: return ".";
    case TokenType::kColon: return ":";
    case TokenType::kPipe: return "|";
    case TokenType::kComma: return ",";
    case TokenType::kSemicolon: return ";";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

}  // namespace spillway::jinja
