// IR -> per-rule NFA (Thompson) -> per-rule DFA (subset construction over bytes and calls)
// -> one flat CompiledGrammar. Also checks for undefined rules and left recursion, and
// marks string-loop states (kStringLoop) for the matcher's fast path.
#include "grammar/fsm.h"

#include "grammar/utf8.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <unordered_map>

namespace spillway::grammar {

namespace {

struct NState {
  std::vector<uint32_t> eps;
  std::vector<std::pair<uint32_t, uint32_t>> byte_edges;  // (byteset index, target)
  std::vector<std::pair<RuleId, uint32_t>> call_edges;
};

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    size_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return h;
  }
};

}  // namespace

class Compiler {
 public:
  Compiler(const Grammar& g, const CompileLimits& limits)
      : g_(g), limits_(limits), t0_(std::chrono::steady_clock::now()) {}

  Result<std::shared_ptr<const CompiledGrammar>> run() {
    auto out = std::make_shared<CompiledGrammar>();
    out_ = out.get();
    out->root_ = g_.root();
    out->rule_start_.assign(g_.rule_count(), 0);
    for (RuleId r = 0; r < g_.rule_count(); ++r) {
      out->rule_names_.push_back(g_.rule(r).name);
      if (!g_.rule(r).defined) return Error{"grammar rule '" + g_.rule(r).name + "' is used but not defined"};
    }
    for (RuleId r = 0; r < g_.rule_count(); ++r) {
      SPILLWAY_TRY(compile_rule(r));
    }
    SPILLWAY_TRY(check_left_recursion());
    SPILLWAY_TRY(mark_string_loops());
    SPILLWAY_TRY(compute_live_chars());
    SPILLWAY_TRY(mark_exact_chars());
    SPILLWAY_TRY(compute_slice_classes());
    out->compile_work_ = work_;
    return std::shared_ptr<const CompiledGrammar>(std::move(out));
  }

 private:
  Status over_time() {
    if (++tick_ % 256 != 0) return {};
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (s > limits_.max_seconds)
      return Error{"grammar compile took longer than its cap of " + std::to_string(limits_.max_seconds) + " s"};
    return {};
  }

  // Counts `units` of work (see CompileLimits::max_work) and enforces both caps: the work
  // cap exactly, the wall clock every 64k units.
  Status charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work)
      return Error{"grammar too complex: compiling it needs more than " + std::to_string(limits_.max_work) +
                   " steps (a regex or schema with many bounded repeats of broad classes)"};
    if (work_ >= next_clock_check_) {
      next_clock_check_ = work_ + 65536;
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      if (s > limits_.max_seconds)
        return Error{"grammar compile took longer than its cap of " + std::to_string(limits_.max_seconds) + " s"};
    }
    return {};
  }

  Result<uint32_t> new_nstate() {
    if (++total_nfa_ > limits_.max_nfa_states)
      return Error{"grammar too large: more than " + std::to_string(limits_.max_nfa_states) + " automaton states"};
    nfa_.emplace_back();
    return static_cast<uint32_t>(nfa_.size() - 1);
  }

  uint32_t byteset_index(const ByteSet& s) {
    auto [it, inserted] = byteset_ids_.try_emplace(s, static_cast<uint32_t>(bytesets_.size()));
    if (inserted) {
      bytesets_.push_back(s);
      byteset_bytes_.emplace_back();
      for (int b = 0; b < 256; ++b)
        if (s.test(static_cast<size_t>(b))) byteset_bytes_.back().push_back(static_cast<uint8_t>(b));
    }
    return it->second;
  }

  Status build(ExprId id, uint32_t in, uint32_t out) {
    SPILLWAY_TRY(over_time());
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty: nfa_[in].eps.push_back(out); return {};
      case ExprKind::kNothing: return {};
      case ExprKind::kBytes: nfa_[in].byte_edges.push_back({byteset_index(e.bytes), out}); return {};
      case ExprKind::kLiteral: {
        uint32_t cur = in;
        for (size_t i = 0; i < e.literal.size(); ++i) {
          uint32_t nxt = out;
          if (i + 1 < e.literal.size()) {
            auto s = new_nstate();
            if (!s) return s.error();
            nxt = *s;
          }
          ByteSet b;
          b.set(static_cast<unsigned char>(e.literal[i]));
          nfa_[cur].byte_edges.push_back({byteset_index(b), nxt});
          cur = nxt;
        }
        return {};
      }
      case ExprKind::kSeq: {
        uint32_t cur = in;
        for (size_t i = 0; i < e.kids.size(); ++i) {
          uint32_t nxt = out;
          if (i + 1 < e.kids.size()) {
            auto s = new_nstate();
            if (!s) return s.error();
            nxt = *s;
          }
          SPILLWAY_TRY(build(e.kids[i], cur, nxt));
          cur = nxt;
        }
        return {};
      }
      case ExprKind::kAlt:
        for (ExprId k : e.kids) {
          // Fresh entry/exit per branch so that loops inside one branch cannot leak into another.
          auto a = new_nstate();
          if (!a) return a.error();
          auto b = new_nstate();
          if (!b) return b.error();
          nfa_[in].eps.push_back(*a);
          nfa_[*b].eps.push_back(out);
          SPILLWAY_TRY(build(k, *a, *b));
        }
        return {};
      case ExprKind::kRepeat: {
        uint32_t cur = in;
        for (uint32_t i = 0; i < e.min; ++i) {
          auto s = new_nstate();
          if (!s) return s.error();
          SPILLWAY_TRY(build(e.kids[0], cur, *s));
          cur = *s;
        }
        if (e.max == kUnbounded) {
          auto loop = new_nstate();
          if (!loop) return loop.error();
          auto body_end = new_nstate();
          if (!body_end) return body_end.error();
          nfa_[cur].eps.push_back(*loop);
          nfa_[*loop].eps.push_back(out);
          nfa_[*body_end].eps.push_back(*loop);
          return build(e.kids[0], *loop, *body_end);
        }
        for (uint32_t i = e.min; i < e.max; ++i) {
          auto s = new_nstate();
          if (!s) return s.error();
          nfa_[cur].eps.push_back(out);
          SPILLWAY_TRY(build(e.kids[0], cur, *s));
          cur = *s;
        }
        nfa_[cur].eps.push_back(out);
        return {};
      }
      case ExprKind::kCall: nfa_[in].call_edges.push_back({e.rule, out}); return {};
    }
    return {};
  }

  void closure(std::vector<uint32_t>& set) {
    std::vector<uint32_t> work = set;
    while (!work.empty()) {
      uint32_t s = work.back();
      work.pop_back();
      work_ += 1 + nfa_[s].eps.size();
      for (uint32_t t : nfa_[s].eps) {
        if (mark_[t] != mark_gen_) {
          mark_[t] = mark_gen_;
          set.push_back(t);
          work.push_back(t);
        }
      }
    }
    std::sort(set.begin(), set.end());
  }

  // The epsilon closure of seed, keeping only the states that matter for the future (those
  // with byte or call edges, and the accept state): two closures with the same future are
  // then one DFA state, which is what makes string loops self-loops.
  std::vector<uint32_t> closed(const std::vector<uint32_t>& seed) {
    ++mark_gen_;
    if (mark_.size() < nfa_.size()) mark_.resize(nfa_.size(), 0);
    std::vector<uint32_t> set;
    for (uint32_t s : seed)
      if (mark_[s] != mark_gen_) { mark_[s] = mark_gen_; set.push_back(s); }
    closure(set);
    std::erase_if(set, [&](uint32_t s) {
      return s != accept_ && nfa_[s].byte_edges.empty() && nfa_[s].call_edges.empty();
    });
    return set;
  }

  Status compile_rule(RuleId r) {
    nfa_.clear();
    auto in = new_nstate();
    if (!in) return in.error();
    auto acc = new_nstate();
    if (!acc) return acc.error();
    SPILLWAY_TRY(build(g_.rule(r).body, *in, *acc));
    const uint32_t accept = *acc;
    accept_ = accept;

    std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
    std::vector<std::vector<uint32_t>> sets;
    const uint32_t base = static_cast<uint32_t>(out_->states_.size());
    auto intern = [&](std::vector<uint32_t> set) -> Result<uint32_t> {
      auto [it, inserted] = ids.try_emplace(set, base + static_cast<uint32_t>(sets.size()));
      if (inserted) {
        if (base + sets.size() + 1 > limits_.max_dfa_states)
          return Error{"grammar too large: more than " + std::to_string(limits_.max_dfa_states) + " automaton states"};
        sets.push_back(std::move(set));
        out_->states_.push_back(State{});
      }
      return it->second;
    };
    auto start = intern(closed({*in}));
    if (!start) return start.error();
    out_->rule_start_[r] = *start;

    std::vector<std::vector<uint32_t>> buckets(256);  // byte -> NFA targets
    for (size_t i = 0; i < sets.size(); ++i) {
      SPILLWAY_TRY(over_time());
      const std::vector<uint32_t> cur = sets[i];
      State st{};
      st.range_begin = static_cast<uint32_t>(out_->ranges_.size());
      for (auto& b : buckets) b.clear();
      uint64_t units = 256;
      for (uint32_t s : cur)
        for (auto [bs, t] : nfa_[s].byte_edges) {
          units += byteset_bytes_[bs].size();
          for (uint8_t b : byteset_bytes_[bs]) buckets[b].push_back(t);
        }
      SPILLWAY_TRY(charge(units));
      uint32_t prev_target = UINT32_MAX;
      for (int b = 0; b < 256; ++b) {
        const auto& targets = buckets[static_cast<size_t>(b)];
        uint32_t target = UINT32_MAX;
        if (!targets.empty()) {
          if (b > 0 && prev_target != UINT32_MAX && targets == buckets[static_cast<size_t>(b - 1)]) {
            target = prev_target;
          } else {
            auto t = intern(closed(targets));
            if (!t) return t.error();
            target = *t;
          }
        }
        prev_target = target;
        if (target == UINT32_MAX) continue;
        auto& rs = out_->ranges_;
        if (rs.size() > st.range_begin && rs.back().target == target && rs.back().hi + 1 == b) {
          rs.back().hi = static_cast<uint8_t>(b);
        } else {
          rs.push_back(ByteRange{static_cast<uint8_t>(b), static_cast<uint8_t>(b), target});
        }
      }
      st.range_end = static_cast<uint32_t>(out_->ranges_.size());
      std::map<RuleId, std::vector<uint32_t>> by_rule;
      for (uint32_t s : cur)
        for (auto [rule, t] : nfa_[s].call_edges) by_rule[rule].push_back(t);
      st.call_begin = static_cast<uint32_t>(out_->calls_.size());
      for (auto& [rule, ts] : by_rule) {
        auto t = intern(closed(ts));
        if (!t) return t.error();
        out_->calls_.push_back(CallEdge{rule, *t});
      }
      st.call_end = static_cast<uint32_t>(out_->calls_.size());
      st.flags = std::binary_search(cur.begin(), cur.end(), accept) ? kFinal : 0;
      out_->states_[base + i] = st;
    }
    return {};
  }

  // A rule is nullable when its start reaches a final state through calls of nullable rules
  // only; left recursion is a cycle in "R may call S before consuming a byte".
  Status check_left_recursion() {
    const size_t n = g_.rule_count();
    std::vector<char> nullable(n, 0);
    auto explore = [&](RuleId r, std::vector<RuleId>* calls_seen) {
      std::vector<uint32_t> work{out_->rule_start_[r]};
      std::vector<uint32_t> seen{work[0]};
      bool fin = false;
      while (!work.empty()) {
        uint32_t s = work.back();
        work.pop_back();
        const State& st = out_->states_[s];
        work_ += 1 + seen.size();
        if (st.flags & kFinal) fin = true;
        for (const CallEdge* c = out_->calls_begin(st); c != out_->calls_end(st); ++c) {
          if (calls_seen) calls_seen->push_back(c->rule);
          if (nullable[c->rule] && std::find(seen.begin(), seen.end(), c->ret) == seen.end()) {
            seen.push_back(c->ret);
            work.push_back(c->ret);
          }
        }
      }
      return fin;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (RuleId r = 0; r < n; ++r)
        if (!nullable[r] && explore(r, nullptr)) { nullable[r] = 1; changed = true; }
    }
    std::vector<std::vector<RuleId>> left(n);
    for (RuleId r = 0; r < n; ++r) explore(r, &left[r]);
    std::vector<int> color(n, 0);  // 0 new, 1 on stack, 2 done
    std::string cycle;
    std::function<bool(RuleId)> dfs = [&](RuleId r) {
      color[r] = 1;
      for (RuleId s : left[r]) {
        if (color[s] == 1) { cycle = g_.rule(s).name; return true; }
        if (color[s] == 0 && dfs(s)) return true;
      }
      color[r] = 2;
      return false;
    };
    for (RuleId r = 0; r < n; ++r)
      if (color[r] == 0 && dfs(r))
        return Error{"grammar is left-recursive through rule '" + cycle + "'"};
    return {};
  }

  // The (DFA state, UTF-8 state) pairs one product walk has visited (the walks below): a
  // stamp per pair, so a lookup costs O(1) however many pairs the walk holds. utf8_step's
  // states are 0..7.
  void new_pair_walk() {
    if (pair_stamp_.size() < out_->states_.size() * 8) pair_stamp_.resize(out_->states_.size() * 8, 0);
    ++pair_gen_;
  }
  bool pair_seen(uint32_t t, int u) const { return pair_stamp_[size_t{t} * 8 + static_cast<size_t>(u)] == pair_gen_; }
  void mark_pair(uint32_t t, int u) { pair_stamp_[size_t{t} * 8 + static_cast<size_t>(u)] = pair_gen_; }

  // kStringLoop: every safe ASCII byte (0x20-0x7F but '"' and '\\') and every complete
  // UTF-8 multi-byte character (lead C2-F4, continuations 80-BF) leads from s back to s.
  Status mark_string_loops() {
    for (uint32_t s = 0; s < out_->states_.size(); ++s) {
      SPILLWAY_TRY(charge(96));
      bool ok = true;
      for (int b = 0x20; b < 0x80 && ok; ++b)
        if (b != '"' && b != '\\' && out_->next(s, static_cast<uint8_t>(b)) != s) ok = false;
      if (!ok) continue;
      // Product walk with the UTF-8 automaton (grammar/utf8.h) over non-ASCII bytes.
      std::vector<std::pair<uint32_t, int>> work{{s, 0}};
      size_t seen = 0;
      new_pair_walk();
      while (!work.empty() && ok) {
        auto [q, u] = work.back();
        work.pop_back();
        work_ += 128;
        for (int b = 0x80; b <= 0xFF && ok; ++b) {
          int nu = utf8_step(u, static_cast<uint8_t>(b));
          if (nu < 0) continue;
          uint32_t t = out_->next(q, static_cast<uint8_t>(b));
          if (t == UINT32_MAX) { ok = false; break; }
          if (nu == 0) { if (t != s) ok = false; continue; }
          if (pair_seen(t, nu)) continue;
          if (seen > 64) { ok = false; break; }
          mark_pair(t, nu);
          ++seen;
          work.push_back({t, nu});
        }
      }
      if (ok) out_->states_[s].flags |= kStringLoop;
    }
    return {};
  }

  // Character-level successors of s over safe characters; false if some safe character
  // has no transition from s.
  // A successor without byte transitions stands for the rules it calls (the matcher keeps
  // their start frames, not it); one that only ends its rule counts as a dead end (what
  // follows the pop is not known here: conservative).
  bool add_successor(uint32_t t, std::vector<uint32_t>& out, int depth = 0) {
    const State& st = out_->states_[t];
    if (st.range_end > st.range_begin) {
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
      return true;
    }
    if (st.call_end == st.call_begin || depth > 4) return false;
    for (const CallEdge* c = out_->calls_begin(st); c != out_->calls_end(st); ++c)
      if (!add_successor(out_->rule_start_[c->rule], out, depth + 1)) return false;
    return true;
  }

  bool safe_successors(uint32_t s, std::vector<uint32_t>& out) {
    out.clear();
    for (int b = 0x20; b < 0x80; ++b) {
      if (b == '"' || b == '\\') continue;
      uint32_t t = out_->next(s, static_cast<uint8_t>(b));
      if (t == UINT32_MAX || !add_successor(t, out)) return false;
    }
    std::vector<std::pair<uint32_t, int>> work{{s, 0}};
    size_t seen = 0;
    new_pair_walk();
    while (!work.empty()) {
      auto [q, u] = work.back();
      work.pop_back();
      work_ += 128;
      for (int b = 0x80; b <= 0xFF; ++b) {
        int nu = utf8_step(u, static_cast<uint8_t>(b));
        if (nu < 0) continue;
        uint32_t t = out_->next(q, static_cast<uint8_t>(b));
        if (t == UINT32_MAX) return false;
        if (nu == 0) {
          if (!add_successor(t, out)) return false;
          continue;
        }
        if (pair_seen(t, nu)) continue;
        if (seen > 256) return false;
        mark_pair(t, nu);
        ++seen;
        work.push_back({t, nu});
      }
    }
    return true;
  }

  // live_chars = distance (in characters) to a state that cannot read some safe character.
  Status compute_live_chars() {
    const uint32_t n = static_cast<uint32_t>(out_->states_.size());
    std::vector<std::vector<uint32_t>> preds(n);
    std::vector<uint32_t> dist(n, UINT32_MAX), queue, succ;
    for (uint32_t s = 0; s < n; ++s) {
      SPILLWAY_TRY(charge(96 + succ.size()));
      // Cheap filter: a state without a transition on 'a' is a dead end at once.
      if (out_->next(s, 'a') == UINT32_MAX || !safe_successors(s, succ)) {
        dist[s] = 0;
        queue.push_back(s);
        continue;
      }
      for (uint32_t t : succ) preds[t].push_back(s);
    }
    for (size_t i = 0; i < queue.size(); ++i) {
      uint32_t t = queue[i];
      if (dist[t] >= 254) continue;
      work_ += 1 + preds[t].size();
      for (uint32_t p : preds[t])
        if (dist[p] == UINT32_MAX) { dist[p] = dist[t] + 1; queue.push_back(p); }
    }
    for (uint32_t s = 0; s < n; ++s)
      out_->states_[s].live_chars = dist[s] == UINT32_MAX ? kLiveUnbounded : static_cast<uint8_t>(std::min<uint32_t>(dist[s], 254));
    return charge(n);
  }

  // Every safe-character successor of s (ASCII safe bytes, complete UTF-8 characters);
  // false when one may call a rule or end its rule (the stack then holds frames that are
  // not known here), the UTF-8 product walk grows too large, or there are more than
  // kExactFrontier successors (mark_exact_chars gives up on such a level anyway).
  // Called once per state through safe_successors_of (memoised).
  static constexpr size_t kExactFrontier = 64;
  bool any_safe_successors(uint32_t s, std::vector<uint32_t>& out) {
    out.clear();
    work_ += 96;
    auto add = [&](uint32_t t) {
      const State& st = out_->states_[t];
      if (st.range_end == st.range_begin || st.call_end != st.call_begin || (st.flags & kFinal)) return false;
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
      return out.size() <= kExactFrontier;
    };
    for (int b = 0x20; b < 0x80; ++b) {
      if (b == '"' || b == '\\') continue;
      const uint32_t t = out_->next(s, static_cast<uint8_t>(b));
      if (t != UINT32_MAX && !add(t)) return false;
    }
    std::vector<std::pair<uint32_t, int>> work{{s, 0}};
    size_t seen = 0;
    new_pair_walk();
    while (!work.empty()) {
      auto [q, u] = work.back();
      work.pop_back();
      work_ += 128;
      for (int b = 0x80; b <= 0xFF; ++b) {
        const int nu = utf8_step(u, static_cast<uint8_t>(b));
        if (nu < 0) continue;
        const uint32_t t = out_->next(q, static_cast<uint8_t>(b));
        if (t == UINT32_MAX) continue;
        if (nu == 0) {
          if (!add(t)) return false;
          continue;
        }
        const State& mid = out_->states_[t];
        if (mid.call_end != mid.call_begin || (mid.flags & kFinal)) return false;
        if (pair_seen(t, nu)) continue;
        if (seen > 256) return false;
        mark_pair(t, nu);
        ++seen;
        work.push_back({t, nu});
      }
    }
    return true;
  }

  // any_safe_successors(s), computed on first use: true and the successors in
  // succ_pool_[succ_begin_[s], succ_end_[s]), or false. The breadth-first search below asks
  // for the same states from many starts (each state of a chain of bounded repeats is in
  // the search of up to 16 states before it); without the memo the compile was quadratic
  // in such chains and spent seconds in the UTF-8 product walks.
  enum : uint8_t { kSuccUnknown = 0, kSuccOk = 1, kSuccFail = 2 };
  bool safe_successors_of(uint32_t s) {
    if (succ_status_[s] == kSuccUnknown) {
      const bool ok = any_safe_successors(s, succ_tmp_);
      succ_status_[s] = ok ? kSuccOk : kSuccFail;
      succ_begin_[s] = static_cast<uint32_t>(succ_pool_.size());
      if (ok) succ_pool_.insert(succ_pool_.end(), succ_tmp_.begin(), succ_tmp_.end());
      succ_end_[s] = static_cast<uint32_t>(succ_pool_.size());
    }
    return succ_status_[s] == kSuccOk;
  }

  // kExactChars for states with live_chars in [1, 16) from which no live_chars + 1 safe
  // characters can be read: breadth-first over safe-character successors, giving up on a
  // level of more than kExactFrontier states.
  static constexpr uint8_t kExactCharsBelow = 16;  // = TokenTrie::kShortSliceChars
  Status mark_exact_chars() {
    const uint32_t n = static_cast<uint32_t>(out_->states_.size());
    succ_status_.assign(n, kSuccUnknown);
    succ_begin_.assign(n, 0);
    succ_end_.assign(n, 0);
    succ_pool_.clear();
    std::vector<uint32_t> frontier, next, stamp(n, 0);
    uint32_t gen = 0;
    for (uint32_t s = 0; s < n; ++s) {
      State& st = out_->states_[s];
      // live_chars 0: no safe character is sure to be readable; such states keep the walk
      // (cheap where none is readable, e.g. the end of a maxLength string).
      if (st.live_chars >= kExactCharsBelow || st.live_chars == 0) continue;
      SPILLWAY_TRY(charge(1));
      frontier.assign(1, s);
      bool ok = true;
      for (uint32_t d = 0; d <= st.live_chars && ok && !frontier.empty(); ++d) {
        next.clear();
        ++gen;
        for (uint32_t q : frontier) {
          if (!safe_successors_of(q)) { ok = false; break; }
          work_ += 1 + succ_end_[q] - succ_begin_[q];
          for (uint32_t i = succ_begin_[q]; i < succ_end_[q]; ++i) {
            const uint32_t t = succ_pool_[i];
            if (stamp[t] != gen) { stamp[t] = gen; next.push_back(t); }
          }
          if (next.size() > kExactFrontier) { ok = false; break; }
        }
        frontier.swap(next);
      }
      if (ok && frontier.empty()) st.flags |= kExactChars;
    }
    return {};
  }

  // slice_class: for each byte class of the IR with >= kMinSliceClassBytes bytes, the
  // byte-level analogue of live_chars: dist(s) = shortest path, over edges on the class's
  // bytes, to a dead end (a state where some byte of the class has no transition or leads
  // to a state without byte transitions: conservative, since calls and pops are not
  // followed). States with dist >= kClassSliceBytes get the largest such class
  // (class_live = kClassSliceBytes); others get a class whose count is exact
  // (class_live = dist, and no dist + 1 bytes of the class can be read: a hostname
  // label's last characters).
  Status compute_slice_classes() {
    const uint32_t n = static_cast<uint32_t>(out_->states_.size());
    for (State& st : out_->states_) { st.slice_class = kNoSliceClass; st.class_live = 0; }
    std::vector<size_t> order;
    for (size_t i = 0; i < bytesets_.size(); ++i)
      if (bytesets_[i].count() >= kMinSliceClassBytes) order.push_back(i);
    if (order.empty()) return {};
    // Largest classes first: a state keeps the first class that qualifies.
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytesets_[a].count() > bytesets_[b].count(); });
    // good[s]: the bytes that lead from s to a state with byte transitions.
    std::vector<ByteSet> good(n);
    for (uint32_t s = 0; s < n; ++s) {
      const State& st = out_->states_[s];
      for (const ByteRange* r = out_->ranges_begin(st); r != out_->ranges_end(st); ++r) {
        const State& t = out_->states_[r->target];
        if (t.range_end != t.range_begin) good[s] |= range_set(*r);
      }
    }
    std::vector<uint32_t> live, index(n), dist;
    std::vector<std::pair<uint32_t, uint32_t>> edges;  // (target, source) among live states
    std::vector<char> assigned(n, 0);
    // A state that reads fewer than kClassSliceBytes bytes of every class but exactly r of
    // some class (no r + 1): (that class, r + 1), used if no class gives kClassSliceBytes.
    std::vector<std::pair<size_t, uint8_t>> pending(n, {0, 0});
    for (size_t ci : order) {
      SPILLWAY_TRY(charge(n));
      const ByteSet& cls = bytesets_[ci];
      live.clear();
      for (uint32_t s = 0; s < n; ++s)
        if ((cls & ~good[s]).none()) { index[s] = static_cast<uint32_t>(live.size()); live.push_back(s); }
      if (live.empty()) continue;
      // dist over the live states; a successor that is not live is a dead end (dist 0).
      dist.assign(live.size(), UINT32_MAX);
      edges.clear();
      std::vector<uint32_t> queue;
      for (uint32_t i = 0; i < live.size(); ++i) {
        bool near_dead = false;
        const State& st = out_->states_[live[i]];
        for (const ByteRange* r = out_->ranges_begin(st); r != out_->ranges_end(st); ++r) {
          if ((cls & range_set(*r)).none()) continue;
          const uint32_t t = r->target;
          if ((cls & ~good[t]).none()) edges.emplace_back(index[t], i);
          else near_dead = true;
        }
        if (near_dead) { dist[i] = 1; queue.push_back(i); }
      }
      SPILLWAY_TRY(charge(live.size() + 2 * edges.size()));
      std::sort(edges.begin(), edges.end());
      for (size_t q = 0; q < queue.size(); ++q) {
        const uint32_t t = queue[q];
        if (dist[t] >= kClassSliceBytes) continue;
        auto it = std::lower_bound(edges.begin(), edges.end(), std::pair<uint32_t, uint32_t>{t, 0});
        for (; it != edges.end() && it->first == t; ++it)
          if (dist[it->second] == UINT32_MAX) { dist[it->second] = dist[t] + 1; queue.push_back(it->second); }
      }
      for (uint32_t i = 0; i < live.size(); ++i) {
        const uint32_t st = live[i];
        // States the JSON-string slices already cover need no class (and its slice is not
        // built).
        const State& sst = out_->states_[st];
        if (assigned[st] || sst.live_chars >= kExactCharsBelow || (sst.flags & (kStringLoop | kExactChars))) continue;
        if (dist[i] >= kClassSliceBytes) {
          assigned[st] = 1;
          out_->states_[st].slice_class = class_id(ci);
          out_->states_[st].class_live = kClassSliceBytes;
        } else if (pending[st].second == 0 && exact_class_count(st, ci, dist[i])) {
          pending[st] = {ci, static_cast<uint8_t>(dist[i] + 1)};
        }
      }
    }
    for (uint32_t st = 0; st < n; ++st) {
      if (assigned[st] || pending[st].second == 0) continue;
      out_->states_[st].slice_class = class_id(pending[st].first);
      out_->states_[st].class_live = static_cast<uint8_t>(pending[st].second - 1);
    }
    return charge(n);
  }

  static ByteSet range_set(const ByteRange& r) {
    ByteSet m;
    m.set();
    m >>= 255 - (r.hi - r.lo);
    m <<= r.lo;
    return m;
  }

  // The grammar's id of IR byteset ci as a slice class (registered on first use).
  uint16_t class_id(size_t ci) {
    auto [it, inserted] = slice_class_ids_.try_emplace(ci, static_cast<uint16_t>(out_->slice_classes_.size()));
    if (inserted) out_->slice_classes_.push_back(bytesets_[ci]);
    return it->second;
  }

  // Whether no string of r + 1 bytes of class ci can be read from s, no state on the way
  // calling a rule or ending its rule (what follows a pop is not known here).
  bool exact_class_count(uint32_t s, size_t ci, uint32_t r) {
    std::vector<uint32_t> frontier{s}, next;
    for (uint32_t d = 0; d <= r; ++d) {
      next.clear();
      for (uint32_t q : frontier) {
        const State& qs = out_->states_[q];
        work_ += 1 + (qs.range_end - qs.range_begin) + next.size();
        for (const ByteRange* r = out_->ranges_begin(qs); r != out_->ranges_end(qs); ++r) {
          if ((bytesets_[ci] & range_set(*r)).none()) continue;
          const uint32_t t = r->target;
          const State& ts = out_->states_[t];
          if (ts.call_end != ts.call_begin || (ts.flags & kFinal)) return false;
          if (std::find(next.begin(), next.end(), t) == next.end()) next.push_back(t);
        }
      }
      if (next.size() > 64) return false;
      frontier.swap(next);
      if (frontier.empty()) return true;
    }
    return frontier.empty();
  }

  const Grammar& g_;
  CompileLimits limits_;
  std::chrono::steady_clock::time_point t0_;
  CompiledGrammar* out_ = nullptr;
  std::vector<NState> nfa_;
  std::vector<ByteSet> bytesets_;
  std::vector<std::vector<uint8_t>> byteset_bytes_;
  uint32_t accept_ = 0;
  std::unordered_map<ByteSet, uint32_t> byteset_ids_;
  std::unordered_map<size_t, uint16_t> slice_class_ids_;
  std::vector<uint32_t> mark_;
  uint32_t mark_gen_ = 0;
  uint64_t total_nfa_ = 0;
  uint64_t tick_ = 0;
  uint64_t work_ = 0;  // see charge()
  uint64_t next_clock_check_ = 65536;
  std::vector<uint8_t> succ_status_;  // safe_successors_of's memo
  std::vector<uint32_t> pair_stamp_;  // new_pair_walk()
  uint32_t pair_gen_ = 0;
  std::vector<uint32_t> succ_begin_, succ_end_, succ_pool_, succ_tmp_;
};

Result<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::compile(const Grammar& g,
                                                                         const CompileLimits& limits) {
  Compiler c(g, limits);
  return c.run();
}

}  // namespace spillway::grammar
