#include "engine/diffusion/row_sampler.h"

#include <algorithm>
#include <cmath>

namespace spillway::engine::diffusion {

float uniform_float(std::mt19937& rng) {
  const float r = static_cast<float>(rng()) / 4294967296.0f;
  return r >= 1.0f ? std::nextafter(1.0f, 0.0f) : r;
}

bool RowSampler::build_hierarchical(const float* logits, int32_t n_vocab) {
  have_sum_ = false;
  if (params_.top_k > 1) {
    // The plain path's partial sort of the top_k, found without sorting the vocabulary; the
    // rest (top_p, softmax over the kept candidates) runs on cand_ as in the plain path.
    top_k_.top_k(logits, n_vocab, params_.top_k, cand_);
    return true;
  }
  if (params_.top_k != 0 || params_.top_p < 1.0f || params_.temperature > 0.0f ||
      params_.algorithm == Algorithm::Entropy) {
    return false;  // top_k 1 has its own fast path; the others need every probability
  }
  // Greedy over the whole vocabulary: the best (and second best for margin) with their
  // full-vocabulary softmax probabilities.
  top_k_.top_k(logits, n_vocab, params_.algorithm == Algorithm::Margin ? 2 : 1, cand_);
  max_ = cand_[0].first;
  sum_ = top_k_.softmax_sum(logits, n_vocab, max_, cand_[0].second);
  have_sum_ = true;
  for (auto& c : cand_) c.first = static_cast<float>(double(std::exp(c.first - max_)) / sum_);
  return true;
}

float RowSampler::full_softmax_p(const float* logits, int32_t n_vocab, int32_t token) {
  if (params_.exact_top_k) {
    // The normalizer of the float softmax (the plain path's confidence); within float
    // rounding of the double computation below.
    if (!have_sum_) {
      std::vector<std::pair<float, int32_t>> best;
      top_k_.top_k(logits, n_vocab, 1, best);
      max_ = best[0].first;
      sum_ = top_k_.softmax_sum(logits, n_vocab, max_, best[0].second);
      have_sum_ = true;
    }
    return static_cast<float>(double(std::exp(logits[token] - max_)) / sum_);
  }
  float max_l = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) max_l = std::max(max_l, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - max_l);
  return static_cast<float>(std::exp(double(logits[token]) - max_l) / sum);
}

void RowSampler::build_distribution(const float* logits, int32_t n_vocab) {
  cand_.clear();
  have_sum_ = false;
  // Greedy fast path: one candidate, p = 1 (what top_k = 1 gives).
  const bool greedy_only = params_.top_k == 1;
  if (greedy_only) {
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    cand_.emplace_back(1.0f, best);
    return;
  }
  const bool hierarchical = params_.exact_top_k && build_hierarchical(logits, n_vocab);
  if (hierarchical && have_sum_) return;  // greedy: cand_ holds the final probabilities
  if (!hierarchical) {
    cand_.reserve(n_vocab);
    for (int32_t i = 0; i < n_vocab; ++i) cand_.emplace_back(logits[i], i);
  }
  auto better = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  size_t keep = cand_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) keep = params_.top_k;
  const bool need_sorted = params_.top_k > 0 || params_.top_p < 1.0f || params_.algorithm == Algorithm::Margin;
  if (hierarchical) {
    // cand_ already holds the top_k, sorted.
  } else if (need_sorted) {
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), better);
    cand_.resize(keep);
  } else {
    // Only the best must come first (the greedy token and p(token)).
    auto best = std::min_element(cand_.begin(), cand_.end(), better);
    std::iter_swap(cand_.begin(), best);
  }
  auto softmax = [&](float inv_temp) {
    float max_l = cand_[0].first;
    for (const auto& c : cand_) max_l = std::max(max_l, c.first);
    double sum = 0;
    for (auto& c : cand_) {
      c.first = std::exp((c.first - max_l) * inv_temp);
      sum += c.first;
    }
    for (auto& c : cand_) c.first = static_cast<float>(c.first / sum);
  };
  if (params_.top_p < 1.0f) {
    // Mass of the (sorted) candidates at temperature 1; keep the shortest prefix reaching top_p.
    std::vector<float> raw(cand_.size());
    for (size_t i = 0; i < cand_.size(); ++i) raw[i] = cand_[i].first;
    softmax(1.0f);
    double cum = 0;
    size_t n = cand_.size();
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += cand_[i].first;
      if (cum >= params_.top_p) { n = i + 1; break; }
    }
    for (size_t i = 0; i < n; ++i) cand_[i].first = raw[i];
    cand_.resize(n);
  }
  softmax(params_.temperature > 0.0f ? 1.0f / params_.temperature : 1.0f);
}

int32_t RowSampler::pick(std::mt19937& rng) const {
  if (params_.temperature <= 0.0f || cand_.size() == 1) return 0;
  const float u = uniform_float(rng);
  float cum = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    cum += cand_[i].first;
    if (u < cum) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(cand_.size()) - 1;
}

int32_t RowSampler::sample_token(const float* logits, int32_t n_vocab, std::mt19937& rng) {
  build_distribution(logits, n_vocab);
  return cand_[pick(rng)].second;
}

RowChoice RowSampler::choose(const float* logits, int32_t n_vocab, std::mt19937& rng) {
  build_distribution(logits, n_vocab);
  const int32_t selected = pick(rng);
  RowChoice out{cand_[selected].second, 0.0f};
  if (params_.turbo()) out.p_token = full_softmax_p(logits, n_vocab, out.token);
  switch (params_.algorithm) {
    case Algorithm::Confidence:
    case Algorithm::Origin:
      out.confidence = cand_[selected].first;
      break;
    case Algorithm::Margin:
      out.confidence = cand_.size() > 1 ? cand_[0].first - cand_[1].first : cand_[0].first;
      break;
    case Algorithm::Entropy: {
      float entropy = 0.0f;
      for (const auto& c : cand_) entropy += c.first * std::log(c.first + 1e-10f);
      out.confidence = -entropy;
      break;
    }
    case Algorithm::Random:
      out.confidence = uniform_float(rng);
      break;
  }
  return out;
}

}  // namespace spillway::engine::diffusion
