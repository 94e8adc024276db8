#include "engine/diffusion/vocab_top_k.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace spillway::engine::diffusion {

namespace {

// The plain path's order (row_sampler.cpp): larger logit first, ties to the lower id.
bool better(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// expf(x) is exactly +0.0f for x below this (the smallest denormal is ~exp(-103.3)).
constexpr float kExpZeroBelow = -110.0f;

}  // namespace

void VocabTopK::top_k(const float* logits, int32_t n, int32_t k, std::vector<std::pair<float, int32_t>>& out) {
  assert(n > 0);
  k = std::clamp(k, 1, n);
  const int32_t chunks = (n + kTopKChunk - 1) / kTopKChunk;
  chunk_max_.resize(chunks);
  for (int32_t c = 0; c < chunks; ++c) {
    const float* x = logits + size_t(c) * kTopKChunk;
    const int32_t len = std::min(kTopKChunk, n - c * kTopKChunk);
    float m = x[0];
    for (int32_t i = 1; i < len; ++i) m = x[i] > m ? x[i] : m;
    chunk_max_[c] = m;
  }
  // t = the k-th largest chunk maximum; with fewer chunks than k it bounds nothing (every
  // logit is a candidate).
  float t;
  if (k > chunks) {
    t = -std::numeric_limits<float>::infinity();
  } else if (k == chunks) {
    t = *std::min_element(chunk_max_.begin(), chunk_max_.end());
  } else {
    chunk_order_.resize(chunks);
    for (int32_t c = 0; c < chunks; ++c) chunk_order_[c] = c;
    std::nth_element(chunk_order_.begin(), chunk_order_.begin() + (k - 1), chunk_order_.end(),
                     [&](int32_t a, int32_t b) { return chunk_max_[a] > chunk_max_[b]; });
    t = chunk_max_[chunk_order_[k - 1]];
  }
  out.clear();
  chunks_scanned_ = 0;
  for (int32_t c = 0; c < chunks; ++c) {
    if (chunk_max_[c] < t) continue;
    ++chunks_scanned_;
    const int32_t begin = c * kTopKChunk, end = std::min(n, begin + kTopKChunk);
    for (int32_t i = begin; i < end; ++i) {
      if (logits[i] >= t) out.emplace_back(logits[i], i);
    }
  }
  assert(static_cast<int32_t>(out.size()) >= k);
  std::partial_sort(out.begin(), out.begin() + k, out.end(), better);
  out.resize(k);
}

double VocabTopK::softmax_sum(const float* logits, int32_t n, float max, int32_t first) const {
  const int32_t chunks = static_cast<int32_t>(chunk_max_.size());
  assert(chunks == (n + kTopKChunk - 1) / kTopKChunk);
  double sum = std::exp(logits[first] - max);
  for (int32_t c = 0; c < chunks; ++c) {
    if (chunk_max_[c] - max < kExpZeroBelow) continue;  // every term is +0.0f
    const int32_t begin = std::max(1, c * kTopKChunk), end = std::min(n, c * kTopKChunk + kTopKChunk);
    for (int32_t i = begin; i < end; ++i) {
      const float x = i == first ? logits[0] : logits[i];
      sum += std::exp(x - max);
    }
  }
  return sum;
}

}  // namespace spillway::engine::diffusion
