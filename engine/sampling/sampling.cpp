// Sampler: see sampling.h for the order of operations, sampler_stages.h for the stages.
#include "engine/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spillway::engine {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log(sum(exp(x - max))) + max over the raw logits.
double log_sum_exp(const float* logits, int32_t n) {
  float max_logit = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(sum) + max_logit;
}

}  // namespace

void compute_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                      SampledToken& out, std::vector<int32_t>* ids_scratch) {
  const double lse = log_sum_exp(logits, n_vocab);
  out.logprob = static_cast<float>(logits[token] - lse);
  out.top_logprobs.clear();
  if (top_n <= 0) return;
  top_n = std::min(top_n, n_vocab);
  // Partial selection over (logit, -id) so ties resolve to the lower id, deterministically.
  std::vector<int32_t> local;
  std::vector<int32_t>& ids = ids_scratch ? *ids_scratch : local;
  ids.resize(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) ids[i] = i;
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + top_n, ids.end(), better);
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
  scratch.logits.assign(logits, logits + n_vocab);
  run_chain(scratch.logits.data(), n_vocab, history, n_prompt, banned, scratch, out);
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
  if (want_logprobs) scratch.raw_logits.assign(logits, logits + n_vocab);
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
    compute_logprobs(scratch.raw_logits.data(), n_vocab, out.token, params_.top_logprobs, out,
                     &scratch.ids);
  }
}

}  // namespace spillway::engine
