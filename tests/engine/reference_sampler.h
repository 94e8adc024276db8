// The sampler that shipped before the stage chain (engine/sampling.cpp at the commit
// before "sampler as a chain of stages"), kept verbatim as the specification of what a
// seeded draw returns: it sorts the candidates, so it is slow, but obviously right. Only
// the names changed (ReferenceSampler, reference_logprobs, the namespace), and the softmax's
// std::exp became kernels::exp_poly, the exp the chain now computes (vectorized) with, and
// each probability c / sum became c * (1 / sum) as the chain computes it: the same math, so
// the same tokens for the same seed (test_sampling_exp.cpp checks the probabilities against
// the old std::exp and division separately). Used by test_sampling_chain.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling/sampling.h"
#include "kernels/exp_sum.h"

namespace spillway::engine::reference {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log(sum(exp(x - max))) + max over the raw logits.
inline double log_sum_exp(const float* logits, int32_t n) {
  float max_logit = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_logit = std::max(max_logit, logits[i]);
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(sum) + max_logit;
}

}  // namespace

// The old class declaration (engine/sampling.h), renamed.
class ReferenceSampler {
 public:
  ReferenceSampler(SamplingParams params, uint64_t fallback_seed);
  SampledToken sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                      size_t n_prompt, std::span<const int32_t> banned = {});

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<int32_t> counts_;
  std::vector<int32_t> touched_;
  std::vector<int32_t> ids_;
  std::vector<float> raw_logits_;
};

inline void reference_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
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

inline ReferenceSampler::ReferenceSampler(SamplingParams params, uint64_t fallback_seed)
    : params_(std::move(params)), rng_(params_.seed.value_or(fallback_seed)) {}

inline SampledToken ReferenceSampler::sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                             size_t n_prompt, std::span<const int32_t> banned) {
  const SamplingParams& p = params_;
  const bool want_logprobs = p.logprobs || p.top_logprobs > 0;
  if (want_logprobs) raw_logits_.assign(logits, logits + n_vocab);

  for (const auto& [id, bias] : p.logit_bias) {
    if (id >= 0 && id < n_vocab) logits[id] += bias;
  }

  // Penalties. repetition_penalty (HF / llama.cpp): over prompt and generated tokens.
  // presence / frequency (OpenAI): over generated tokens only.
  // Occurrences of each in-vocabulary id of history[first..], in counts_ / touched_.
  auto count = [&](size_t first) {
    if (counts_.size() < static_cast<size_t>(n_vocab)) counts_.resize(n_vocab, 0);
    for (int32_t t : touched_) counts_[t] = 0;
    touched_.clear();
    for (size_t i = first; i < history.size(); ++i) {
      const int32_t t = history[i];
      if (t < 0 || t >= n_vocab) continue;
      if (counts_[t]++ == 0) touched_.push_back(t);
    }
  };
  if (p.repetition_penalty != 1.0f) {
    count(0);
    for (int32_t t : touched_) {
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty
                                : logits[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    count(std::min(n_prompt, history.size()));
    for (int32_t t : touched_) {
      logits[t] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(counts_[t]);
    }
  }
  for (int32_t t : banned) {
    if (t >= 0 && t < n_vocab) logits[t] = kNegInf;
  }

  SampledToken out;
  auto finish = [&](int32_t token) {
    out.token = token;
    if (want_logprobs) reference_logprobs(raw_logits_.data(), n_vocab, token, p.top_logprobs, out, &ids_);
    return out;
  };

  if (p.temperature <= 0.0f || p.top_k == 1) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    return finish(best);
  }

  // Candidates sorted by logit, truncated by top-k.
  candidates_.clear();
  for (int32_t i = 0; i < n_vocab; ++i) {
    if (logits[i] != kNegInf) candidates_.emplace_back(logits[i], i);
  }
  if (candidates_.empty()) return finish(0);
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = candidates_.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) keep = p.top_k;
  std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  candidates_.resize(keep);

  // Softmax with temperature over the kept candidates (reuse .first as probability).
  const float inv_t = 1.0f / p.temperature;
  const float max_logit = candidates_[0].first;
  double sum = 0.0;
  for (auto& c : candidates_) {
    c.first = kernels::exp_poly((c.first - max_logit) * inv_t);
    sum += c.first;
  }
  const double inv_sum = 1.0 / sum;
  for (auto& c : candidates_) c.first = static_cast<float>(c.first * inv_sum);

  if (p.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cumulative += candidates_[n].first;
      ++n;
      if (cumulative >= p.top_p) break;
    }
    candidates_.resize(std::max<size_t>(n, 1));
  }
  if (p.min_p > 0.0f) {
    const float threshold = candidates_[0].first * p.min_p;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= threshold) ++n;
    candidates_.resize(n);
  }

  double total = 0.0;
  for (const auto& c : candidates_) total += c.first;
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r <= 0.0) return finish(c.second);
  }
  return finish(candidates_.back().second);
}

}  // namespace spillway::engine::reference
