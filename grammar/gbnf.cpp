#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <string>

namespace spillway::grammar {

namespace {

std::vector<uint8_t> encode(uint32_t cp) {
  if (cp < 0x80) return {static_cast<uint8_t>(cp)};
  if (cp < 0x800) return {static_cast<uint8_t>(0xC0 | (cp >> 6)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  if (cp < 0x10000)
    return {static_cast<uint8_t>(0xE0 | (cp >> 12)), static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)),
            static_cast<uint8_t>(0x80 | (cp & 0x3F))};
  return {static_cast<uint8_t>(0xF0 | (cp >> 18)), static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F)),
          static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F)), static_cast<uint8_t>(0x80 | (cp & 0x3F))};
}

// Byte strings of equal length n, lexicographically in [lo, hi] (continuations 80-BF).
ExprId byte_seq_range(Grammar& g, const std::vector<uint8_t>& lo, const std::vector<uint8_t>& hi, size_t i) {
  if (i == lo.size()) return g.empty();
  if (i + 1 == lo.size()) return g.byte_range(lo[i], hi[i]);
  if (lo[i] == hi[i]) return g.seq({g.byte_range(lo[i], lo[i]), byte_seq_range(g, lo, hi, i + 1)});
  std::vector<uint8_t> top(lo.size(), 0xBF), bottom(lo.size(), 0x80);
  std::vector<ExprId> alts{g.seq({g.byte_range(lo[i], lo[i]), byte_seq_range(g, lo, top, i + 1)}),
                           g.seq({g.byte_range(hi[i], hi[i]), byte_seq_range(g, bottom, hi, i + 1)})};
  if (hi[i] - lo[i] > 1) {
    std::vector<ExprId> mid{g.byte_range(static_cast<uint8_t>(lo[i] + 1), static_cast<uint8_t>(hi[i] - 1))};
    for (size_t k = i + 1; k < lo.size(); ++k) mid.push_back(g.byte_range(0x80, 0xBF));
    alts.push_back(g.seq(std::move(mid)));
  }
  return g.alt(std::move(alts));
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view t) : t_(t) {}

  Result<Grammar> parse() {
    skip(true);
    while (pos_ < t_.size()) {
      std::string name = take_name();
      if (name.empty()) return fail("expected a rule name");
      skip(false);
      if (t_.substr(pos_, 3) != "::=") return fail("expected '::='");
      pos_ += 3;
      skip(true);
      auto body = parse_alts(false);
      if (!body) return body.error();
      RuleId r = rule(name);
      if (defined_.count(name)) return fail("rule '" + name + "' defined twice");
      defined_[name] = true;
      g_.define_rule(r, *body);
      skip(true);
    }
    if (!rules_.count("root")) return Error{"GBNF grammar has no 'root' rule"};
    g_.set_root(rules_["root"]);
    return std::move(g_);
  }

 private:
  Error fail(const std::string& what) const {
    size_t line = 1 + static_cast<size_t>(std::count(t_.begin(), t_.begin() + static_cast<std::ptrdiff_t>(std::min(pos_, t_.size())), '\n'));
    return Error{"GBNF grammar: " + what + " at line " + std::to_string(line)};
  }
  RuleId rule(const std::string& name) {
    auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    return rules_[name] = g_.declare_rule(name);
  }
  void skip(bool newlines) {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '#') { while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_; }
      else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) ++pos_;
      else break;
    }
  }
  std::string take_name() {
    size_t s = pos_;
    while (pos_ < t_.size() && (isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '-' || t_[pos_] == '_')) ++pos_;
    return std::string(t_.substr(s, pos_ - s));
  }

  Result<uint32_t> take_char() {
    if (pos_ >= t_.size()) return fail("unexpected end");
    unsigned char c = static_cast<unsigned char>(t_[pos_]);
    if (c == '\\') {
      if (++pos_ >= t_.size()) return fail("trailing backslash");
      char e = t_[pos_++];
      auto hex = [&](size_t n) -> Result<uint32_t> {
        uint32_t v = 0;
        for (size_t i = 0; i < n; ++i, ++pos_) {
          if (pos_ >= t_.size() || !isxdigit(static_cast<unsigned char>(t_[pos_]))) return fail("bad hex escape");
          v = v * 16 + static_cast<uint32_t>(std::stoi(std::string(1, t_[pos_]), nullptr, 16));
        }
        return v;
      };
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: return static_cast<uint32_t>(static_cast<unsigned char>(e));
      }
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len && pos_ + i < t_.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(t_[pos_ + i]) & 0x3F);
    pos_ += len;
    return cp;
  }

  Result<ExprId> parse_alts(bool nested) {
    std::vector<ExprId> alts;
    while (true) {
      auto s = parse_seq(nested);
      if (!s) return s;
      alts.push_back(*s);
      skip(nested);
      if (pos_ < t_.size() && t_[pos_] == '|') { ++pos_; skip(true); continue; }
      return g_.alt(std::move(alts));
    }
  }

  Result<ExprId> parse_seq(bool nested) {
    std::vector<ExprId> items;
    while (true) {
      skip(nested);
      if (pos_ >= t_.size()) break;
      char c = t_[pos_];
      ExprId e;
      if (c == '"') {
        ++pos_;
        std::string lit;
        while (pos_ < t_.size() && t_[pos_] != '"') {
          auto cp = take_char();
          if (!cp) return cp.error();
          for (uint8_t b : encode(*cp)) lit += static_cast<char>(b);
        }
        if (pos_ >= t_.size()) return fail("unterminated literal");
        ++pos_;
        e = g_.literal(lit);
      } else if (c == '[') {
        ++pos_;
        bool neg = pos_ < t_.size() && t_[pos_] == '^';
        if (neg) ++pos_;
        std::vector<std::pair<uint32_t, uint32_t>> ranges;
        while (pos_ < t_.size() && t_[pos_] != ']') {
          auto lo = take_char();
          if (!lo) return lo.error();
          uint32_t hi = *lo;
          if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']') {
            ++pos_;
            auto h = take_char();
            if (!h) return h.error();
            hi = *h;
          }
          if (hi < *lo) return fail("reversed class range");
          ranges.push_back({*lo, hi});
        }
        if (pos_ >= t_.size()) return fail("unterminated class");
        ++pos_;
        e = class_expr(ranges, neg);
      } else if (c == '.') {
        ++pos_;
        e = class_expr({}, true);
      } else if (c == '(') {
        ++pos_;
        skip(true);
        auto inner = parse_alts(true);
        if (!inner) return inner;
        skip(true);
        if (pos_ >= t_.size() || t_[pos_] != ')') return fail("missing ')'");
        ++pos_;
        e = *inner;
      } else if (isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
        size_t save = pos_;
        std::string name = take_name();
        size_t after = pos_;
        skip(false);
        if (t_.substr(pos_, 3) == "::=") { pos_ = save; break; }  // next rule
        pos_ = after;
        e = g_.call(rule(name));
      } else {
        break;
      }
      // quantifiers
      if (pos_ < t_.size()) {
        char q = t_[pos_];
        if (q == '*') { ++pos_; e = g_.star(e); }
        else if (q == '+') { ++pos_; e = g_.plus(e); }
        else if (q == '?') { ++pos_; e = g_.optional(e); }
        else if (q == '{') {
          ++pos_;
          auto num = [&]() -> long {
            skip(false);
            size_t s = pos_;
            while (pos_ < t_.size() && isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
            if (s == pos_ || pos_ - s > 6) return -1;
            return std::stol(std::string(t_.substr(s, pos_ - s)));
          };
          long lo = num(), hi = lo;
          if (lo < 0) return fail("bad repetition");
          skip(false);
          if (pos_ < t_.size() && t_[pos_] == ',') {
            ++pos_;
            skip(false);
            hi = pos_ < t_.size() && t_[pos_] == '}' ? -1 : num();
          }
          skip(false);
          if (pos_ >= t_.size() || t_[pos_] != '}') return fail("missing '}'");
          ++pos_;
          if (hi >= 0 && hi < lo) return fail("repetition {m,n} with n < m");
          e = g_.repeat(e, static_cast<uint32_t>(lo), hi < 0 ? kUnbounded : static_cast<uint32_t>(hi));
        }
      }
      items.push_back(e);
    }
    return g_.seq(std::move(items));
  }

  ExprId class_expr(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool neg) {
    std::sort(ranges.begin(), ranges.end());
    if (neg) {
      std::vector<std::pair<uint32_t, uint32_t>> out;
      uint32_t next = 0;
      for (auto [lo, hi] : ranges) {
        if (lo > next) out.push_back({next, lo - 1});
        next = std::max(next, hi + 1);
      }
      if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
      ranges = std::move(out);
    }
    std::vector<ExprId> alts;
    for (auto [lo, hi] : ranges) alts.push_back(utf8_code_point_range(g_, lo, hi));
    return g_.alt(std::move(alts));
  }

  Grammar g_;
  std::string_view t_;
  size_t pos_ = 0;
  std::map<std::string, RuleId> rules_;
  std::map<std::string, bool> defined_;
};

}  // namespace

ExprId utf8_code_point_range(Grammar& g, uint32_t lo, uint32_t hi) {
  static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  std::vector<ExprId> alts;
  uint32_t start = 0;
  for (uint32_t b : bounds) {
    uint32_t a = std::max(lo, start), z = std::min(hi, b);
    if (a <= z) {
      // Surrogates are not characters.
      if (a <= 0xDFFF && z >= 0xD800) {
        if (a < 0xD800) alts.push_back(byte_seq_range(g, encode(a), encode(0xD7FF), 0));
        if (z > 0xDFFF) alts.push_back(byte_seq_range(g, encode(0xE000), encode(z), 0));
      } else {
        alts.push_back(byte_seq_range(g, encode(a), encode(z), 0));
      }
    }
    start = b + 1;
  }
  return g.alt(std::move(alts));
}

Result<Grammar> gbnf_grammar(std::string_view text) {
  GbnfParser p(text);
  return p.parse();
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
  Grammar g;
  std::vector<ExprId> alts;
  for (const auto& c : choices) alts.push_back(g.literal(c));
  g.set_root(g.add_rule("root", g.alt(std::move(alts))));
  return g;
}

}  // namespace spillway::grammar
