// Step plans (DESIGN.md "Step plans"): batch token counts are rounded up to a small fixed
// set of buckets so that the set of shapes a runner prepares for stays bounded.
//
// The buckets for a token budget B are ceil(B / 2^k) for k = 9 .. 0, deduplicated: at most
// 10 sizes, the largest B (B = 512 gives 1, 2, 4, ..., 512). live() counts the buckets
// steps have used so far; it is exported as spillway's live step plans.
// Thread contract: one owner (the engine thread).
#pragma once

#include <algorithm>
#include <bitset>
#include <cassert>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway::scheduler {

class StepPlans {
 public:
  static constexpr int kMaxPlans = 10;

  explicit StepPlans(int32_t max_tokens) {
    assert(max_tokens >= 1);
    for (int k = kMaxPlans - 1; k >= 0; --k) {
      const int64_t div = int64_t{1} << k;
      const auto size = static_cast<int32_t>((max_tokens + div - 1) / div);
      if (sizes_.empty() || sizes_.back() != size) sizes_.push_back(size);
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

  // Notes that a step of n_tokens ran; returns its bucket.
  int record(int32_t n_tokens) {
    const int b = bucket_for(std::min(n_tokens, max_tokens()));
    used_.set(b);
    return b;
  }
  int32_t live() const { return static_cast<int32_t>(used_.count()); }

 private:
  std::vector<int32_t> sizes_;
  std::bitset<kMaxPlans> used_;
};

}  // namespace spillway::scheduler
