// Sampler: see sampling.h for the order of operations, sampler_stages.h for the stages.
#include "engine/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/exp_sum.h"
#include "kernels/ops/sample_scan.h"

namespace spillway::engine {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// GCC vector extensions (plain SSE at the x86-64 baseline) for select_top.
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

// log(sum(exp(x - max))) + max over the raw logits: the exps in float by the kernels'
// exp_scaled_sum (vectorized), summed in double. Against the same formula all in double it
// is within about 1e-6 (tests/engine/test_sampling_exp.cpp).
double log_sum_exp(const float* logits, int32_t n) {
  // The max half of SamplingRow::ensure_range: the same vectorized kernel (NaNs ignored).
  const float max_logit = kernels::row_range(logits, n).max;
  if (max_logit == kNegInf) return kNegInf;
  const double sum = kernels::exp_scaled_sum(logits, max_logit, 1.0f, nullptr, n);
  return std::log(sum) + max_logit;
}

// The top_n (1..n) best ids in rank order (logit descending, then id ascending): what a
// partial sort of all ids would give, in one pass. best[0, top_n) is kept in rank order; an
// id scanned later ranks after every kept id with the same logit, so it enters only with a
// strictly larger logit than the last kept one. Blocks of 8 that hold no such logit are
// skipped by one vector compare.
void select_top(const float* logits, int32_t n, int32_t top_n, std::vector<int32_t>& best) {
  best.clear();
  auto insert = [&](int32_t id) {
    const float l = logits[id];
    size_t pos = best.size();
    while (pos > 0 && logits[best[pos - 1]] < l) --pos;
    if (best.size() < static_cast<size_t>(top_n)) {
      best.insert(best.begin() + static_cast<ptrdiff_t>(pos), id);
    } else if (pos < best.size()) {
      best.pop_back();
      best.insert(best.begin() + static_cast<ptrdiff_t>(pos), id);
    }
  };
  int32_t i = 0;
  for (; i < n && best.size() < static_cast<size_t>(top_n); ++i) insert(i);
  for (; i + 8 <= n; i += 8) {
    const float t = logits[best.back()];
    const v4f tv = {t, t, t, t};
    v4f a, b;
    std::memcpy(&a, logits + i, sizeof a);
    std::memcpy(&b, logits + i + 4, sizeof b);
    const v4i hit = (a > tv) | (b > tv);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) == 0) continue;
    for (int32_t j = i; j < i + 8; ++j) {
      if (logits[j] > logits[best.back()]) insert(j);
    }
  }
  for (; i < n; ++i) {
    if (logits[i] > logits[best.back()]) insert(i);
  }
}

}  // namespace

void compute_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                      SampledToken& out, std::vector<int32_t>* ids_scratch) {
  const double lse = log_sum_exp(logits, n_vocab);
  out.logprob = static_cast<float>(logits[token] - lse);
  out.top_logprobs.clear();
  if (top_n <= 0) return;
  top_n = std::min(top_n, n_vocab);
  // Selection over (logit, -id) so ties resolve to the lower id, deterministically.
  std::vector<int32_t> local;
  std::vector<int32_t>& ids = ids_scratch ? *ids_scratch : local;
  select_top(logits, n_vocab, top_n, ids);
  for (int32_t i = 0; i < top_n; ++i) {
    out.top_logprobs.push_back({ids[i], static_cast<float>(logits[ids[i]] - lse)});
  }
}

Sampler::Sampler(SamplingParams params, uint64_t fallback_seed)
    : params_(std::move(params)), rng_(params_.seed.value_or(fallback_seed)) {
  const SamplingParams& p = params_;
  if (!p.logit_bias.empty()) stages_.push_back(std::make_unique<LogitBiasStage>(p.logit_bias));
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    stages_.push_back(std::make_unique<PenaltyStage>(p.repetition_penalty, p.presence_penalty,
                                                     p.frequency_penalty));
  }
  stages_.push_back(std::make_unique<BannedTokensStage>());
  constraint_index_ = stages_.size();
  if (p.temperature <= 0.0f || p.top_k == 1) {
    greedy_ = true;
    stages_.push_back(std::make_unique<GreedyStage>());
    return;
  }
  stages_.push_back(std::make_unique<TemperatureStage>(p.temperature));
  if (p.top_k > 0) stages_.push_back(std::make_unique<TopKStage>(p.top_k));
  if (p.top_p < 1.0f) stages_.push_back(std::make_unique<TopPStage>(p.top_p));
  if (p.min_p > 0.0f) stages_.push_back(std::make_unique<MinPStage>(p.min_p));
  stages_.push_back(std::make_unique<DrawStage>());
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

void Sampler::set_constraint(TokenConstraint* constraint) {
  if (has_constraint_) stages_.erase(stages_.begin() + static_cast<ptrdiff_t>(constraint_index_));
  has_constraint_ = constraint != nullptr;
  constraint_ = constraint;
  if (has_constraint_) {
    stages_.insert(stages_.begin() + static_cast<ptrdiff_t>(constraint_index_),
                   std::make_unique<ConstraintMaskStage>(constraint));
  }
}

SampledToken Sampler::sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                             size_t n_prompt, std::span<const int32_t> banned) {
  if (!own_scratch_) own_scratch_ = std::make_unique<SamplerScratch>();
  SampledToken out;
  run_chain(logits, n_vocab, history, n_prompt, banned, *own_scratch_, out);
  return out;
}

void Sampler::sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
                     size_t n_prompt, std::span<const int32_t> banned, SamplerScratch& scratch,
                     SampledToken& out) {
  if (!writes_logits(banned)) {
    // No stage writes the row (the candidate stages only read it): no copy.
    run_chain(const_cast<float*>(logits), n_vocab, history, n_prompt, banned, scratch, out);
    return;
  }
  scratch.logits.assign(logits, logits + n_vocab);
  run_chain(scratch.logits.data(), n_vocab, history, n_prompt, banned, scratch, out);
}

bool Sampler::writes_logits(std::span<const int32_t> banned) const {
  const SamplingParams& p = params_;
  return !p.logit_bias.empty() || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f || !banned.empty() || constraint_ != nullptr;
}

void Sampler::run_chain(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                        size_t n_prompt, std::span<const int32_t> banned,
                        SamplerScratch& scratch, SampledToken& out) {
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  if (constraint_ && forced_shortcut_) {
    const int32_t forced = constraint_->forced_token();
    if (forced >= 0 && forced < n_vocab && std::isfinite(logits[forced]) &&
        std::find(banned.begin(), banned.end(), forced) == banned.end()) {
      // The chain would keep `forced` as its only finite candidate: greedy picks it, and
      // DrawStage draws one uniform number from the RNG (whatever its bounds) and picks it.
      if (!greedy_) {
        std::uniform_real_distribution<double> draw(0.0, 1.0);
        (void)draw(rng_);
      }
      ++forced_appends_;
      out.token = forced;
      for (auto& stage : stages_) stage->accept(forced);
      out.logprob = 0.0f;
      out.top_logprobs.clear();
      if (want_logprobs) compute_logprobs(logits, n_vocab, forced, params_.top_logprobs, out, &scratch.ids);
      return;
    }
  }
  ++chain_runs_;
  // Logprobs come from the raw row: a copy only when a stage will write it.
  const float* raw = logits;
  if (want_logprobs && writes_logits(banned)) {
    scratch.raw_logits.assign(logits, logits + n_vocab);
    raw = scratch.raw_logits.data();
  }
  SamplingRow row;
  row.logits = logits;
  row.n_vocab = n_vocab;
  row.history = history;
  row.n_prompt = n_prompt;
  row.banned = banned;
  row.rng = &rng_;
  row.scratch = &scratch;
  for (auto& stage : stages_) {
    stage->apply(row);
    if (row.token >= 0) break;  // greedy / draw chose
  }
  out.token = row.token >= 0 ? row.token : 0;
  for (auto& stage : stages_) stage->accept(out.token);
  out.logprob = 0.0f;
  out.top_logprobs.clear();
  if (want_logprobs) {
    compute_logprobs(raw, n_vocab, out.token, params_.top_logprobs, out,
                     &scratch.ids);
  }
}

}  // namespace spillway::engine
