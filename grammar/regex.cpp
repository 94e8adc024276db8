#include "grammar/regex.h"

#include <bitset>
#include <cstdio>
#include <string>

namespace spillway::grammar {

namespace {

struct CharSet {
  std::bitset<128> ascii;
  bool non_ascii = false;
  CharSet& add_range(int lo, int hi) {
    for (int c = lo; c <= hi; ++c) ascii.set(static_cast<size_t>(c));
    return *this;
  }
};

CharSet digit_set() { return CharSet{}.add_range('0', '9'); }
CharSet word_set() { return CharSet{}.add_range('0', '9').add_range('a', 'z').add_range('A', 'Z').add_range('_', '_'); }
CharSet space_set() {
  CharSet s;
  for (char c : std::string(" \t\n\r\v\f")) s.ascii.set(static_cast<size_t>(c));
  return s;
}
CharSet negate(CharSet s) {
  s.ascii.flip();
  s.non_ascii = !s.non_ascii;
  return s;
}

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view re, RegexMode mode, ExprId json_char)
      : g_(g), re_(re), mode_(mode), json_char_(json_char) {}

  Result<ExprId> parse() {
    std::vector<ExprId> branches;
    while (true) {
      bool start = false, end = false;
      if (peek('^')) { ++pos_; start = true; }
      auto seq = parse_seq(true, &end);
      if (!seq) return seq.error();
      ExprId e = *seq;
      if (mode_ == RegexMode::kJsonString) {
        ExprId any = g_.star(json_char_);
        e = g_.seq({start ? g_.empty() : any, e, end ? g_.empty() : any});
      }
      branches.push_back(e);
      if (pos_ >= re_.size()) break;
      if (re_[pos_] == '|') { ++pos_; continue; }
      return fail("unbalanced ')'");
    }
    return g_.alt(std::move(branches));
  }

 private:
  bool peek(char c) const { return pos_ < re_.size() && re_[pos_] == c; }
  Error fail(const std::string& what) const {
    return Error{"regex '" + std::string(re_) + "': " + what + " at offset " + std::to_string(pos_)};
  }

  Result<ExprId> parse_alt() {
    std::vector<ExprId> alts;
    while (true) {
      auto s = parse_seq(false, nullptr);
      if (!s) return s.error();
      alts.push_back(*s);
      if (peek('|')) { ++pos_; continue; }
      return g_.alt(std::move(alts));
    }
  }

  // top: the outermost level, where a final '$' is an anchor (reported through end).
  Result<ExprId> parse_seq(bool top, bool* end) {
    std::vector<ExprId> items;
    while (pos_ < re_.size() && re_[pos_] != '|' && re_[pos_] != ')') {
      if (re_[pos_] == '$') {
        if (top && (pos_ + 1 == re_.size() || re_[pos_ + 1] == '|')) { ++pos_; *end = true; break; }
        return fail("'$' anchor that is not at the end");
      }
      if (re_[pos_] == '^') return fail("'^' anchor that is not at the start");
      auto atom = parse_atom();
      if (!atom) return atom.error();
      auto q = parse_quantifier(*atom);
      if (!q) return q.error();
      items.push_back(*q);
    }
    if (!top && pos_ >= re_.size()) return fail("missing ')'");
    return g_.seq(std::move(items));
  }

  Result<ExprId> parse_quantifier(ExprId atom) {
    if (pos_ >= re_.size()) return atom;
    uint32_t lo = 0, hi = 0;
    char c = re_[pos_];
    if (c == '*') { lo = 0; hi = kUnbounded; ++pos_; }
    else if (c == '+') { lo = 1; hi = kUnbounded; ++pos_; }
    else if (c == '?') { lo = 0; hi = 1; ++pos_; }
    else if (c == '{') {
      size_t p = pos_ + 1;
      auto num = [&](uint32_t& out) {
        size_t s = p;
        uint64_t v = 0;
        while (p < re_.size() && re_[p] >= '0' && re_[p] <= '9' && v < 100000) v = v * 10 + static_cast<uint64_t>(re_[p++] - '0');
        out = static_cast<uint32_t>(v);
        return p > s;
      };
      if (!num(lo)) return atom;  // a literal '{'
      hi = lo;
      if (p < re_.size() && re_[p] == ',') {
        ++p;
        if (!num(hi)) hi = kUnbounded;
      }
      if (p >= re_.size() || re_[p] != '}') return atom;
      if (hi < lo) return fail("quantifier {n,m} with m < n");
      pos_ = p + 1;
    } else {
      return atom;
    }
    if (peek('?')) ++pos_;  // lazy: same language
    if (pos_ < re_.size() && (re_[pos_] == '*' || re_[pos_] == '+' || re_[pos_] == '?'))
      return fail("possessive or doubled quantifier");
    return g_.repeat(atom, lo, hi);
  }

  // One character of the regex (UTF-8 decoded to its byte string).
  std::string take_utf8() {
    unsigned char c = static_cast<unsigned char>(re_[pos_]);
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    std::string s(re_.substr(pos_, len));
    pos_ += len;
    return s;
  }

  Result<int> hex(size_t digits) {
    if (pos_ + digits > re_.size()) return fail("short hex escape");
    int v = 0;
    for (size_t i = 0; i < digits; ++i) {
      char c = re_[pos_ + i];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return fail("bad hex escape");
      v = v * 16 + d;
    }
    pos_ += digits;
    return v;
  }

  static std::string utf8(int cp) {
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else if (cp < 0x800) { s += static_cast<char>(0xC0 | (cp >> 6)); s += static_cast<char>(0x80 | (cp & 0x3F)); }
    else { s += static_cast<char>(0xE0 | (cp >> 12)); s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)); s += static_cast<char>(0x80 | (cp & 0x3F)); }
    return s;
  }

  // After a backslash: a class (set) or one character (text).
  Status parse_escape(CharSet* set, bool* is_set, std::string* text) {
    if (pos_ >= re_.size()) return fail("trailing backslash");
    char c = re_[pos_++];
    *is_set = true;
    switch (c) {
      case 'd': *set = digit_set(); return {};
      case 'D': *set = negate(digit_set()); return {};
      case 'w': *set = word_set(); return {};
      case 'W': *set = negate(word_set()); return {};
      case 's': *set = space_set(); return {};
      case 'S': *set = negate(space_set()); return {};
      default: break;
    }
    *is_set = false;
    switch (c) {
      case 'n': *text = "\n"; return {};
      case 't': *text = "\t"; return {};
      case 'r': *text = "\r"; return {};
      case 'f': *text = "\f"; return {};
      case 'v': *text = "\v"; return {};
      case '0': *text = std::string(1, '\0'); return {};
      case 'x': { auto v = hex(2); if (!v) return v.error(); *text = utf8(*v); return {}; }
      case 'u': { auto v = hex(4); if (!v) return v.error(); *text = utf8(*v); return {}; }
      case 'b': case 'B': return fail("word-boundary assertion \\" + std::string(1, c));
      default:
        if (c >= '1' && c <= '9') return fail("backreference");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return fail(std::string("unknown escape \\") + c);
        *text = std::string(1, c);
        return {};
    }
  }

  Result<ExprId> parse_class() {
    ++pos_;  // '['
    bool neg = false;
    if (peek('^')) { neg = true; ++pos_; }
    CharSet set;
    bool first = true;
    while (pos_ < re_.size() && (re_[pos_] != ']' || first)) {
      first = false;
      int lo = -1;
      if (re_[pos_] == '\\') {
        ++pos_;
        CharSet s;
        bool is_set = false;
        std::string text;
        SPILLWAY_TRY(parse_escape(&s, &is_set, &text));
        if (is_set) { set.ascii |= s.ascii; set.non_ascii |= s.non_ascii; continue; }
        if (text.size() != 1 || static_cast<unsigned char>(text[0]) >= 0x80) return fail("non-ASCII character in a class");
        lo = static_cast<unsigned char>(text[0]);
      } else {
        if (static_cast<unsigned char>(re_[pos_]) >= 0x80) return fail("non-ASCII character in a class");
        lo = static_cast<unsigned char>(re_[pos_++]);
      }
      int hi = lo;
      if (pos_ + 1 < re_.size() && re_[pos_] == '-' && re_[pos_ + 1] != ']') {
        ++pos_;
        if (re_[pos_] == '\\') {
          ++pos_;
          CharSet s;
          bool is_set = false;
          std::string text;
          SPILLWAY_TRY(parse_escape(&s, &is_set, &text));
          if (is_set || text.size() != 1 || static_cast<unsigned char>(text[0]) >= 0x80) return fail("bad class range");
          hi = static_cast<unsigned char>(text[0]);
        } else {
          if (static_cast<unsigned char>(re_[pos_]) >= 0x80) return fail("non-ASCII range in a class");
          hi = static_cast<unsigned char>(re_[pos_++]);
        }
        if (hi < lo) return fail("reversed class range");
      }
      set.add_range(lo, hi);
    }
    if (!peek(']')) return fail("missing ']'");
    ++pos_;
    return emit_set(neg ? negate(set) : set);
  }

  Result<ExprId> parse_atom() {
    char c = re_[pos_];
    if (c == '(') {
      ++pos_;
      if (peek('?')) {
        if (pos_ + 1 < re_.size() && re_[pos_ + 1] == ':') pos_ += 2;
        else return fail("lookaround or named group");
      }
      auto e = parse_alt();
      if (!e) return e;
      if (!peek(')')) return fail("missing ')'");
      ++pos_;
      return e;
    }
    if (c == '[') return parse_class();
    if (c == '.') { ++pos_; CharSet s; s.ascii.set('\n'); return emit_set(negate(s)); }
    if (c == '*' || c == '+' || c == '?') return fail("quantifier without an operand");
    if (c == '\\') {
      ++pos_;
      CharSet s;
      bool is_set = false;
      std::string text;
      SPILLWAY_TRY(parse_escape(&s, &is_set, &text));
      if (is_set) return emit_set(s);
      return emit_text(text);
    }
    return emit_text(take_utf8());
  }

  // The JSON-escaped spelling of one ASCII character (what nlohmann::json::dump writes).
  static std::string json_escape(int c) {
    switch (c) {
      case '"': return "\\\"";
      case '\\': return "\\\\";
      case '\b': return "\\b";
      case '\f': return "\\f";
      case '\n': return "\\n";
      case '\r': return "\\r";
      case '\t': return "\\t";
      default: break;
    }
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      return buf;
    }
    return std::string(1, static_cast<char>(c));
  }

  ExprId emit_text(const std::string& text) {
    if (mode_ == RegexMode::kBytes) return g_.literal(text);
    std::string out;
    for (unsigned char c : text) out += c < 0x80 ? json_escape(c) : std::string(1, static_cast<char>(c));
    return g_.literal(out);
  }

  ExprId emit_set(const CharSet& s) {
    std::vector<ExprId> alts;
    ByteSet direct;
    for (int c = 0; c < 128; ++c) {
      if (!s.ascii.test(static_cast<size_t>(c))) continue;
      std::string e = mode_ == RegexMode::kBytes ? std::string(1, static_cast<char>(c)) : json_escape(c);
      if (e.size() == 1) direct.set(static_cast<unsigned char>(e[0]));
      else alts.push_back(g_.literal(e));
      if (mode_ == RegexMode::kJsonString && c == '/') alts.push_back(g_.literal("\\/"));
    }
    alts.push_back(g_.bytes(direct));
    if (s.non_ascii) alts.push_back(utf8_multibyte_char(g_));
    return g_.alt(std::move(alts));
  }

  Grammar& g_;
  std::string_view re_;
  RegexMode mode_;
  ExprId json_char_;
  size_t pos_ = 0;
};

}  // namespace

Result<ExprId> compile_regex(Grammar& g, std::string_view regex, RegexMode mode, ExprId json_char) {
  RegexParser p(g, regex, mode, json_char);
  return p.parse();
}

Result<Grammar> regex_grammar(std::string_view regex) {
  Grammar g;
  auto e = compile_regex(g, regex, RegexMode::kBytes);
  if (!e) return e.error();
  g.set_root(g.add_rule("root", *e));
  return g;
}

}  // namespace spillway::grammar
