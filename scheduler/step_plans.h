// Step plans (DESIGN.md "Step plans"; issue #17 "shape buckets"): batch token counts are
// rounded up to a small fixed ladder of buckets so that the set of shapes a runner prepares
// for stays bounded.
//
// The ladder for a token budget B: the powers-of-two ladder ceil(B / 2^k) for k = 9 .. 0
// (deduplicated, at most 10 sizes, the largest B), refined from the top down with the
// midpoint ceil((a + b) / 2) of each pair of neighbours (a, b) until it holds kMaxPlans sizes
// (or no pair has room for a midpoint). B = 256 gives 1, 2, 4, 8, 16, 32, 48, 64, 96, 128,
// 192, 256; B = 512 gives 1, 2, 4, ..., 128, 192, 256, 384, 512. The midpoints sit at the top
// because there a step padded to the next power of two wastes the most rows, and the GEMM's
// cost per row is flat there (bench/README.md "Rows-vs-time sweep").
//
// record(n) notes a step of n tokens: its bucket, the padding rows it adds (bucket - n) and
// whether it is the bucket's first step (a plan build: the runner prepares the bucket's plan
// then). live() counts the buckets used so far (spillway_step_plans).
// Thread contract: one owner (the engine thread).
#pragma once

#include <algorithm>
#include <array>
#include <bitset>
#include <cassert>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway::scheduler {

class StepPlans {
 public:
  static constexpr int kMaxPlans = 12;

  explicit StepPlans(int32_t max_tokens) {
    assert(max_tokens >= 1);
    for (int k = 9; k >= 0; --k) {
      const int64_t div = int64_t{1} << k;
      const auto size = static_cast<int32_t>((max_tokens + div - 1) / div);
      if (sizes_.empty() || sizes_.back() != size) sizes_.push_back(size);
    }
    for (size_t i = sizes_.size() - 1; i > 0 && static_cast<int>(sizes_.size()) < kMaxPlans; --i) {
      const int32_t a = sizes_[i - 1], b = sizes_[i];
      if (b - a >= 2) sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(i), (a + b + 1) / 2);
    }
  }

  std::span<const int32_t> sizes() const { return sizes_; }
  int32_t max_tokens() const { return sizes_.back(); }

  // Index of the smallest bucket holding n_tokens (n_tokens <= max_tokens()).
  int bucket_for(int32_t n_tokens) const {
    assert(n_tokens >= 1 && n_tokens <= max_tokens());
    return static_cast<int>(std::lower_bound(sizes_.begin(), sizes_.end(), n_tokens) - sizes_.begin());
  }
  int32_t padded(int32_t n_tokens) const { return sizes_[bucket_for(n_tokens)]; }

  // Notes that a step of n_tokens ran; returns its bucket. n_tokens above max_tokens() count
  // in the largest bucket without padding.
  // padding: whether the step runs padded to its bucket (its padding rows are counted).
  int record(int32_t n_tokens, bool padding = true) {
    const int b = bucket_for(std::min(n_tokens, max_tokens()));
    if (!used_.test(b)) ++builds_;
    used_.set(b);
    ++steps_[b];
    if (padding) padded_rows_[b] += std::max(0, sizes_[b] - n_tokens);
    return b;
  }
  int32_t live() const { return static_cast<int32_t>(used_.count()); }
  // Plans built so far (first step of each bucket); equals live() for one StepPlans.
  int64_t builds() const { return builds_; }
  // Per bucket (index of sizes()): steps recorded, and padding rows they added.
  int64_t steps(int bucket) const { return steps_[bucket]; }
  int64_t padded_rows(int bucket) const { return padded_rows_[bucket]; }

 private:
  std::vector<int32_t> sizes_;
  std::bitset<kMaxPlans> used_;
  int64_t builds_ = 0;
  std::array<int64_t, kMaxPlans> steps_{};
  std::array<int64_t, kMaxPlans> padded_rows_{};
};

}  // namespace spillway::scheduler
