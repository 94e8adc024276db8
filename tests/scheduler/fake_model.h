// Test doubles for the scheduler: a fake tokenizer, a fake "model" (a deterministic
// function from a whole context to logits), a FakeRunner that keeps a fake KV store, and a
// naive reference generator that runs the same model without any scheduler, blocks or cache.
//
// The FakeRunner writes each computed token's id and position into its (block, offset)
// cell through the block table it is given, and builds every logit row from the context it
// READS BACK through the block table. A wrong block table, a bad prefix-cache hit or a
// block freed and reused too early changes the context, hence the output, and
// corrupt_reads counts the cells that did not hold the expected position.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "engine/sampling/sampling.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/config.h"
#include "scheduler/request.h"
#include "scheduler/runner.h"
#include "scheduler/step_plans.h"

namespace spillway::scheduler::testing {

// Vocabulary: 0 <unk>, 1 <s>, 2 </s> (EOS), 3 <|eot|> (end of turn), 4..29 'a'..'z',
// 30 ' ', 31 '.', 32 / 33 the two bytes of "é", 34..63 two-letter tokens "ab", "bc", ...
class FakeTokenizer final : public engine::Tokenizer {
 public:
  static constexpr int32_t kVocab = 64;
  static constexpr int32_t kEos = 2, kEot = 3, kSpace = 30, kDot = 31, kEAcute0 = 32, kEAcute1 = 33;
  static int32_t letter(char c) { return 4 + (c - 'a'); }

  FakeTokenizer() {
    texts_ = {"<unk>", "<s>", "</s>", "<|eot|>"};
    for (char c = 'a'; c <= 'z'; ++c) texts_.emplace_back(1, c);
    texts_.push_back(" ");
    texts_.push_back(".");
    texts_.push_back("\xC3");
    texts_.push_back("\xA9");
    for (int i = 0; texts_.size() < size_t(kVocab); ++i) {
      texts_.push_back(std::string{char('a' + i % 26), char('a' + (i + 1) % 26)});
    }
  }

  std::vector<int32_t> encode(std::string_view text, bool, bool) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(c == ' ' ? kSpace : c == '.' ? kDot : letter(c));
    return ids;
  }
  std::string token_bytes(int32_t id, bool include_special) const override {
    if (is_special(id) && !include_special) return "";
    return texts_[id];
  }
  const std::string& token_text(int32_t id) const override { return texts_[id]; }
  int32_t n_vocab() const override { return kVocab; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return kEos; }
  bool add_bos() const override { return false; }
  bool add_eos() const override { return false; }
  bool is_end_of_generation(int32_t id) const override { return id == kEos || id == kEot; }
  bool is_special(int32_t id) const override { return id < 4; }
  std::optional<int32_t> find_token(std::string_view text) const override {
    for (size_t i = 0; i < texts_.size(); ++i) {
      if (texts_[i] == text) return static_cast<int32_t>(i);
    }
    return std::nullopt;
  }

  // Text of generated ids as a client should see it (specials skipped).
  std::string text_of(std::span<const int32_t> ids) const {
    std::string s;
    for (int32_t id : ids) s += token_bytes(id, false);
    return s;
  }

 private:
  std::vector<std::string> texts_;
};

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t context_hash(std::span<const int32_t> ctx) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : ctx) h = mix(h ^ static_cast<uint32_t>(t + 7));
  return h;
}

// The fake model's greedy choice: a function of the whole context.
using NextToken = std::function<int32_t(std::span<const int32_t> context)>;

// Default: a letter that depends on every token of the context (never a special token).
inline int32_t hashed_letter(std::span<const int32_t> ctx) {
  return FakeTokenizer::letter('a') + static_cast<int32_t>(context_hash(ctx) % 26);
}

// Logits: the greedy token gets 6, the other ordinary tokens pseudo-random values in
// [0, 4) from the context, specials -30 (so sampling rarely stops by accident).
inline void fake_logits(std::span<const int32_t> ctx, const NextToken& next, float* logits) {
  const uint64_t h = context_hash(ctx);
  for (int32_t i = 0; i < FakeTokenizer::kVocab; ++i) {
    logits[i] = i < 4 ? -30.0f : static_cast<float>(mix(h + i) % 4000) / 1000.0f;
  }
  logits[next(ctx)] = 6.0f;
}

// One BatchSequence as the fake runner saw it.
struct SeenSequence {
  int64_t start = 0;
  int32_t n_tokens = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> block_table;
};

struct SeenStep {
  int32_t n_tokens = 0;
  std::vector<SeenSequence> sequences;
  int32_t n_rows = 0;
};

class FakeRunner final : public ModelRunner {
 public:
  FakeRunner(int32_t block_size, int32_t n_blocks, NextToken next = hashed_letter,
             int32_t max_batch_tokens = 4096)
      : block_size_(block_size),
        n_blocks_(n_blocks),
        next_(std::move(next)),
        cell_token_(size_t(n_blocks) * block_size, -1),
        cell_position_(size_t(n_blocks) * block_size, -1),
        plans_(max_batch_tokens) {}

  Status execute(const StepBatch& batch, StepResult& result) override {
    if (before_execute) before_execute();
    if (fail_next_) {
      fail_next_ = false;
      return Error{"injected runner failure"};
    }
    const engine::ForwardBatch& fb = batch.forward;
    SeenStep seen;
    seen.n_tokens = static_cast<int32_t>(fb.tokens.size());
    seen.n_rows = static_cast<int32_t>(fb.logit_rows.size());
    plans_.record(seen.n_tokens);
    std::vector<int32_t> token_sequence(fb.tokens.size(), -1);
    if (slot_tokens_.size() < size_t(n_state_slots)) slot_tokens_.resize(n_state_slots);
    for (const StepBatch::StateTransfer& s : batch.end_saves) {  // before the restores
      if (s.state_slot < 0 || s.state_slot >= n_state_slots) {
        ++state_errors;
        continue;
      }
      snapshots_[s.snapshot] = slot_tokens_[s.state_slot];
      ++end_saves;
    }
    for (const StepBatch::StateTransfer& r : batch.state_restores) {
      if (slot_tokens_.size() < size_t(n_state_slots)) slot_tokens_.resize(n_state_slots);
      auto it = snapshots_.find(r.snapshot);
      if (it == snapshots_.end() || r.state_slot < 0 || r.state_slot >= n_state_slots) {
        ++state_errors;
        continue;
      }
      slot_tokens_[r.state_slot] = it->second;
      ++restores;
    }
    for (size_t s = 0; s < fb.sequences.size(); ++s) {
      const engine::BatchSequence& seq = fb.sequences[s];
      SeenSequence ss{seq.start_position, seq.n_tokens, {}, seq.block_table};
      if (n_state_slots > 0) check_state_slot(fb, s);
      for (int32_t i = 0; i < seq.n_tokens; ++i) {
        const int64_t pos = seq.start_position + i;
        const int32_t token = fb.tokens[seq.first_token + i];
        const size_t c = cell(seq.block_table, pos);
        cell_token_[c] = token;
        cell_position_[c] = pos;
        token_sequence[seq.first_token + i] = static_cast<int32_t>(s);
        ss.tokens.push_back(token);
        ++computed_at_[pos];
      }
      seen.sequences.push_back(std::move(ss));
    }
    result.tokens.resize(fb.logit_rows.size());
    canvas_logits_.assign(fb.logit_rows.size() * FakeTokenizer::kVocab, 0.0f);
    for (size_t r = 0; r < fb.logit_rows.size(); ++r) {
      const int32_t t = fb.logit_rows[r];
      const engine::BatchSequence& seq = fb.sequences[token_sequence[t]];
      const int64_t last = seq.start_position + (t - seq.first_token);
      // A canvas row sees the whole canvas (read back like any context) and its own row.
      const bool canvas = seq.mode == engine::AttentionMode::Canvas;
      const int64_t end = canvas ? seq.canvas_end : last + 1;
      std::vector<int32_t> ctx;
      for (int64_t p = 0; p < end; ++p) {
        const size_t c = cell(seq.block_table, p);
        if (cell_position_[c] != p) ++corrupt_reads;
        ctx.push_back(cell_token_[c] < 0 ? 0 : cell_token_[c]);
      }
      if (canvas) ctx.push_back(static_cast<int32_t>(1000 + last));
      float* logits = canvas_logits_.data() + r * FakeTokenizer::kVocab;
      fake_logits(ctx, next_, logits);
      const RowSampling& row = batch.rows[r];
      if (row.sampler == nullptr) continue;  // a canvas row: committed below
      result.tokens[r] = row.sampler->sample(logits, FakeTokenizer::kVocab, row.history,
                                             static_cast<size_t>(row.n_prompt), row.banned);
    }
    for (const StepBatch::StateTransfer& s : batch.state_saves) {
      if (s.state_slot < 0 || s.state_slot >= n_state_slots) {
        ++state_errors;
        continue;
      }
      snapshots_[s.snapshot] = slot_tokens_[s.state_slot];
      ++saves;
    }
    commit_canvases(batch, canvas_logits_.data(), FakeTokenizer::kVocab);
    total_tokens += seen.n_tokens;
    steps.push_back(std::move(seen));
    return Status::Ok();
  }

  int32_t n_vocab() const override { return FakeTokenizer::kVocab; }
  int32_t block_size() const override { return block_size_; }
  int32_t n_kv_blocks() const override { return n_blocks_; }
  int32_t live_step_plans() const override { return plans_.live(); }

  void fail_next_step() { fail_next_ = true; }

  // Recurrent-state slots, as a hybrid model's runner has them (0: none). Each slot records
  // the tokens fed through it since its sequence's position 0: a sequence must arrive with
  // its slot holding exactly its first start_position tokens, and no two sequences of a step
  // may share a slot; violations are counted in state_errors.
  int32_t n_state_slots = 0;
  int32_t state_errors = 0;
  void check_state_slot(const engine::ForwardBatch& fb, size_t s) {
    const engine::BatchSequence& seq = fb.sequences[s];
    if (slot_tokens_.size() < size_t(n_state_slots)) slot_tokens_.resize(n_state_slots);
    if (seq.state_slot < 0 || seq.state_slot >= n_state_slots) {
      ++state_errors;
      return;
    }
    for (size_t o = 0; o < s; ++o) state_errors += fb.sequences[o].state_slot == seq.state_slot ? 1 : 0;
    std::vector<int32_t>& fed = slot_tokens_[seq.state_slot];
    if (seq.start_position == 0) fed.clear();
    if (static_cast<int64_t>(fed.size()) != seq.start_position) ++state_errors;
    fed.resize(seq.start_position);
    // The state must be the state of the sequence's own prefix: the tokens in its KV.
    for (int64_t p = 0; p < seq.start_position; ++p) {
      const size_t c = cell(seq.block_table, p);
      if (cell_position_[c] != p || cell_token_[c] != fed[p]) {
        ++state_errors;
        break;
      }
    }
    fed.insert(fed.end(), fb.tokens.begin() + seq.first_token, fb.tokens.begin() + seq.first_token + seq.n_tokens);
  }
  std::vector<std::vector<int32_t>> slot_tokens_;
  std::map<int32_t, std::vector<int32_t>> snapshots_;  // snapshot slot -> the tokens of its state
  int32_t restores = 0, saves = 0, end_saves = 0;
  // How many times the token at each position was computed (over all sequences).
  const std::map<int64_t, int32_t>& computed_at() const { return computed_at_; }

  std::vector<float> canvas_logits_;  // this step's logit rows [rows, kVocab]

  std::function<void()> before_execute;  // test hook, called on the engine thread
  void between_steps() override {
    if (on_between_steps) on_between_steps();
  }
  std::function<void()> on_between_steps;  // test hook: every engine-loop iteration
  std::vector<SeenStep> steps;
  int64_t total_tokens = 0;
  int64_t corrupt_reads = 0;

 private:
  size_t cell(const std::vector<int32_t>& table, int64_t pos) const {
    const int32_t block = table.at(pos / block_size_);
    return size_t(block) * block_size_ + pos % block_size_;
  }

  int32_t block_size_, n_blocks_;
  NextToken next_;
  std::vector<int32_t> cell_token_;
  std::vector<int64_t> cell_position_;
  std::map<int64_t, int32_t> computed_at_;
  StepPlans plans_;
  bool fail_next_ = false;
};

// What a finished choice produced, reassembled from the updates.
struct ChoiceResult {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string text;
  std::optional<FinishReason> finish;
  int32_t finish_updates = 0;
};

struct RequestResult {
  std::vector<ChoiceResult> choices;
  int32_t updates = 0;
  int32_t finished_updates = 0;
  RequestUpdate last;  // the last update (usage fields)

  void apply(RequestUpdate&& u) {
    ++updates;
    for (ChoiceUpdate& c : u.choices) {
      if (choices.size() <= size_t(c.index)) choices.resize(c.index + 1);
      ChoiceResult& r = choices[c.index];
      for (const GeneratedToken& t : c.tokens) {
        r.tokens.push_back(t.id);
        r.logprobs.push_back(t.logprob);
      }
      r.text += c.text;
      if (c.finish) {
        r.finish = c.finish;
        ++r.finish_updates;
      }
    }
    if (u.finished) ++finished_updates;
    last = std::move(u);
  }
};

// The naive reference: generates one choice by running the fake model on the whole context
// each step, with the scheduler's stop rules (end-of-generation / stop ids / max tokens /
// context; stop strings are applied to the text separately).
struct Reference {
  std::vector<int32_t> tokens;  // generated, including a final stop id
  FinishReason finish = FinishReason::Length;
};

inline Reference reference_generate(const GenerationParams& params, int32_t choice,
                                    int32_t max_context, const NextToken& next = hashed_letter,
                                    uint64_t fallback_seed = 0) {
  engine::SamplingParams sp = params.sampling;
  if (sp.seed) sp.seed = *sp.seed + choice;
  engine::Sampler sampler(sp, fallback_seed);
  FakeTokenizer tok;
  std::vector<int32_t> history = params.prompt;
  const int32_t room = max_context - static_cast<int32_t>(params.prompt.size());
  const int32_t max_new = params.max_tokens > 0 ? std::min(params.max_tokens, room) : room;
  Reference ref;
  std::vector<int32_t> banned = {FakeTokenizer::kEos, FakeTokenizer::kEot};
  banned.insert(banned.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  for (int32_t i = 0; i < max_new; ++i) {
    float logits[FakeTokenizer::kVocab];
    fake_logits(history, next, logits);
    const bool before_min = i < params.min_tokens;
    const engine::SampledToken t =
        sampler.sample(logits, FakeTokenizer::kVocab, history, params.prompt.size(),
                       before_min ? std::span<const int32_t>(banned) : std::span<const int32_t>());
    ref.tokens.push_back(t.token);
    history.push_back(t.token);
    const bool stop_id = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                   t.token) != params.stop_token_ids.end();
    if ((!params.ignore_eos && tok.is_end_of_generation(t.token)) || stop_id) {
      ref.finish = FinishReason::Stop;
      return ref;
    }
  }
  ref.finish = FinishReason::Length;
  return ref;
}

}  // namespace spillway::scheduler::testing
