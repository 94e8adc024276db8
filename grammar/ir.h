// Grammar IR: a context-free grammar whose rule bodies are regular expressions over bytes
// with calls to other rules (a recursive transition network). Every front end (JSON Schema,
// regex, choice list, GBNF) builds one of these; grammar/fsm.h compiles it for the matcher.
//
// Ownership: a Grammar owns its expression arena; ExprId / RuleId index into it.
// Not thread-safe while being built; immutable afterwards.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::grammar {

using ExprId = uint32_t;
using RuleId = uint32_t;
using ByteSet = std::bitset<256>;

enum class ExprKind : uint8_t {
  kEmpty,    // matches the empty string
  kNothing,  // matches no string at all
  kBytes,    // one byte from `bytes`
  kLiteral,  // the byte string `literal`
  kSeq,      // kids in order
  kAlt,      // one of kids
  kRepeat,   // kids[0] repeated [min, max] times (max == kUnbounded: no upper bound)
  kCall,     // the rule `rule`
};

inline constexpr uint32_t kUnbounded = UINT32_MAX;

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  uint32_t min = 0, max = 0;  // kRepeat
  RuleId rule = 0;            // kCall
  ByteSet bytes = {};         // kBytes
  std::string literal = {};   // kLiteral
  std::vector<ExprId> kids = {};  // kSeq, kAlt, kRepeat
};

struct Rule {
  std::string name;
  ExprId body = 0;
  bool defined = false;
};

class Grammar {
 public:
  Grammar();

  // Rules: declare first (so bodies can call them, recursively), then define.
  RuleId declare_rule(std::string name);
  void define_rule(RuleId rule, ExprId body);
  RuleId add_rule(std::string name, ExprId body) {
    RuleId r = declare_rule(std::move(name));
    define_rule(r, body);
    return r;
  }
  void set_root(RuleId rule) { root_ = rule; }

  ExprId empty() const { return empty_; }
  ExprId nothing() const { return nothing_; }
  ExprId bytes(const ByteSet& set);
  ExprId byte_range(uint8_t lo, uint8_t hi);
  ExprId literal(std::string_view text);
  ExprId seq(std::vector<ExprId> kids);
  ExprId alt(std::vector<ExprId> kids);
  ExprId repeat(ExprId kid, uint32_t min, uint32_t max);
  ExprId optional(ExprId kid) { return repeat(kid, 0, 1); }
  ExprId star(ExprId kid) { return repeat(kid, 0, kUnbounded); }
  ExprId plus(ExprId kid) { return repeat(kid, 1, kUnbounded); }
  ExprId call(RuleId rule);

  const Expr& expr(ExprId id) const { return exprs_[id]; }
  const Rule& rule(RuleId id) const { return rules_[id]; }
  size_t rule_count() const { return rules_.size(); }
  size_t expr_count() const { return exprs_.size(); }
  RuleId root() const { return root_; }

  // Debug rendering in a GBNF-like notation.
  std::string to_string() const;

 private:
  ExprId push(Expr e);
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  ExprId empty_ = 0, nothing_ = 0;
  RuleId root_ = 0;
};

// Shared building blocks (JSON text), used by several front ends.
struct JsonPieces {
  ExprId ws;            // bounded whitespace: "" | " " | "\n"{1,2} [ \t]{0,20}
  ExprId string_char;   // one JSON string character: safe UTF-8 char or escape sequence
  ExprId string_body;   // string_char*
  RuleId value;         // any JSON value (generic, recursive)
};
JsonPieces add_json_pieces(Grammar& g);

// One complete multi-byte UTF-8 character (exact: no overlong forms, no surrogates).
ExprId utf8_multibyte_char(Grammar& g);

}  // namespace spillway::grammar
