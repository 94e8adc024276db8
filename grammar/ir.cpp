#include "grammar/ir.h"

#include <cassert>
#include <cstdio>

namespace spillway::grammar {

Grammar::Grammar() {
  empty_ = push(Expr{ExprKind::kEmpty});
  nothing_ = push(Expr{ExprKind::kNothing});
}

ExprId Grammar::push(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<ExprId>(exprs_.size() - 1);
}

RuleId Grammar::declare_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), nothing_, false});
  return static_cast<RuleId>(rules_.size() - 1);
}

void Grammar::define_rule(RuleId rule, ExprId body) {
  assert(rule < rules_.size());
  rules_[rule].body = body;
  rules_[rule].defined = true;
}

ExprId Grammar::bytes(const ByteSet& set) {
  if (set.none()) return nothing_;
  Expr e{ExprKind::kBytes};
  e.bytes = set;
  return push(std::move(e));
}

ExprId Grammar::byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(static_cast<size_t>(b));
  return bytes(s);
}

ExprId Grammar::literal(std::string_view text) {
  if (text.empty()) return empty_;
  Expr e{ExprKind::kLiteral};
  e.literal = std::string(text);
  return push(std::move(e));
}

ExprId Grammar::seq(std::vector<ExprId> kids) {
  std::vector<ExprId> flat;
  for (ExprId k : kids) {
    if (k == nothing_) return nothing_;
    if (k == empty_) continue;
    flat.push_back(k);
  }
  if (flat.empty()) return empty_;
  if (flat.size() == 1) return flat[0];
  Expr e{ExprKind::kSeq};
  e.kids = std::move(flat);
  return push(std::move(e));
}

ExprId Grammar::alt(std::vector<ExprId> kids) {
  std::vector<ExprId> flat;
  for (ExprId k : kids)
    if (k != nothing_) flat.push_back(k);
  if (flat.empty()) return nothing_;
  if (flat.size() == 1) return flat[0];
  Expr e{ExprKind::kAlt};
  e.kids = std::move(flat);
  return push(std::move(e));
}

ExprId Grammar::repeat(ExprId kid, uint32_t min, uint32_t max) {
  if (max == 0 || kid == empty_) return empty_;
  if (kid == nothing_) return min == 0 ? empty_ : nothing_;
  if (min == 1 && max == 1) return kid;
  Expr e{ExprKind::kRepeat};
  e.min = min;
  e.max = max;
  e.kids = {kid};
  return push(std::move(e));
}

ExprId Grammar::call(RuleId rule) {
  Expr e{ExprKind::kCall};
  e.rule = rule;
  return push(std::move(e));
}

namespace {

void render_byte(std::string& out, int b) {
  if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\' && b != ']' && b != '-' && b != '[') {
    out += static_cast<char>(b);
  } else {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", b);
    out += buf;
  }
}

void render(const Grammar& g, ExprId id, std::string& out) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case ExprKind::kEmpty: out += "\"\""; break;
    case ExprKind::kNothing: out += "[]"; break;
    case ExprKind::kBytes: {
      out += '[';
      for (int b = 0; b < 256; ++b) {
        if (!e.bytes.test(static_cast<size_t>(b))) continue;
        int end = b;
        while (end + 1 < 256 && e.bytes.test(static_cast<size_t>(end + 1))) ++end;
        render_byte(out, b);
        if (end > b) { out += '-'; render_byte(out, end); }
        b = end;
      }
      out += ']';
      break;
    }
    case ExprKind::kLiteral:
      out += '"';
      for (unsigned char c : e.literal) render_byte(out, c);
      out += '"';
      break;
    case ExprKind::kSeq:
    case ExprKind::kAlt:
      out += '(';
      for (size_t i = 0; i < e.kids.size(); ++i) {
        if (i) out += e.kind == ExprKind::kSeq ? " " : " | ";
        render(g, e.kids[i], out);
      }
      out += ')';
      break;
    case ExprKind::kRepeat:
      render(g, e.kids[0], out);
      out += '{' + std::to_string(e.min) + ',' +
             (e.max == kUnbounded ? std::string() : std::to_string(e.max)) + '}';
      break;
    case ExprKind::kCall: out += g.rule(e.rule).name; break;
  }
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += rules_[r].name + (r == root_ ? " (root)" : "") + " ::= ";
    render(*this, rules_[r].body, out);
    out += '\n';
  }
  return out;
}

ExprId utf8_multibyte_char(Grammar& g) {
  ExprId cont = g.byte_range(0x80, 0xBF);
  return g.alt({g.seq({g.byte_range(0xC2, 0xDF), cont}),
                g.seq({g.literal("\xE0"), g.byte_range(0xA0, 0xBF), cont}),
                g.seq({g.byte_range(0xE1, 0xEC), cont, cont}),
                g.seq({g.literal("\xED"), g.byte_range(0x80, 0x9F), cont}),
                g.seq({g.byte_range(0xEE, 0xEF), cont, cont}),
                g.seq({g.literal("\xF0"), g.byte_range(0x90, 0xBF), cont, cont}),
                g.seq({g.byte_range(0xF1, 0xF3), cont, cont, cont}),
                g.seq({g.literal("\xF4"), g.byte_range(0x80, 0x8F), cont, cont})});
}

JsonPieces add_json_pieces(Grammar& g) {
  JsonPieces p;
  ByteSet ws_inline;
  ws_inline.set(' ');
  ws_inline.set('\t');
  // The indentation after a newline is its own rule: spelled inline, its 21 states would be
  // copied at every whitespace site of a schema (most of the automaton); as a call it costs
  // one extra parse stack, and only after a newline.
  RuleId indent = g.add_rule("json_indent", g.repeat(g.bytes(ws_inline), 0, 20));
  p.ws = g.alt({g.empty(), g.literal(" "), g.seq({g.repeat(g.literal("\n"), 1, 2), g.call(indent)})});
  ByteSet safe;
  for (int b = 0x20; b < 0x80; ++b) safe.set(static_cast<size_t>(b));
  safe.reset('"');
  safe.reset('\\');
  ByteSet esc;
  for (char c : std::string("\"\\/bfnrt")) esc.set(static_cast<unsigned char>(c));
  ByteSet hex;
  for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<unsigned char>(c));
  ExprId escape = g.seq({g.literal("\\"), g.alt({g.bytes(esc), g.seq({g.literal("u"),
                                                   g.repeat(g.bytes(hex), 4, 4)})})});
  p.string_char = g.alt({g.bytes(safe), utf8_multibyte_char(g), escape});
  p.string_body = g.star(p.string_char);

  p.value = g.declare_rule("json_value");
  ExprId string = g.seq({g.literal("\""), p.string_body, g.literal("\"")});
  ExprId digit = g.byte_range('0', '9');
  ExprId integer = g.seq({g.optional(g.literal("-")),
                          g.alt({g.literal("0"), g.seq({g.byte_range('1', '9'), g.star(digit)})})});
  ByteSet e_set, sign;
  e_set.set('e'); e_set.set('E'); sign.set('+'); sign.set('-');
  ExprId number = g.seq({integer, g.optional(g.seq({g.literal("."), g.plus(digit)})),
                         g.optional(g.seq({g.bytes(e_set), g.optional(g.bytes(sign)), g.repeat(digit, 1, 2)}))});  // exponent <= 99: parses as a double
  ExprId v = g.call(p.value);
  ExprId member = g.seq({string, p.ws, g.literal(":"), p.ws, v, p.ws});
  ExprId object = g.seq({g.literal("{"), p.ws,
                         g.optional(g.seq({member, g.star(g.seq({g.literal(","), p.ws, member}))})),
                         g.literal("}")});
  ExprId item = g.seq({v, p.ws});
  ExprId array = g.seq({g.literal("["), p.ws,
                        g.optional(g.seq({item, g.star(g.seq({g.literal(","), p.ws, item}))})),
                        g.literal("]")});
  g.define_rule(p.value, g.alt({object, array, string, number, g.literal("true"),
                                g.literal("false"), g.literal("null")}));
  return p;
}

}  // namespace spillway::grammar
