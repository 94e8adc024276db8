// Fixed-bucket histograms of the expert tier (issue #16, "Metrics"): the time one missed
// expert takes to arrive (pread + retile, seconds) and the distinct experts one MoE layer's
// tokens route to in one forward step. The expert cache keeps them cumulative, the server
// publishes them as Prometheus histograms (bucket deltas between publications), and
// `run/bench --json` reports their count, sum and buckets.
//
// Value type, no threads of its own: the owner serialises access.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace spillway::engine {

// Upper bounds (Prometheus `le`), ascending; a last bucket above them is +Inf.
inline constexpr std::array<double, 14> kExpertReadSecondsBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
inline constexpr std::array<double, 12> kExpertsPerLayerStepBounds = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256};

template <size_t N>
struct FixedHistogram {
  static constexpr size_t kBuckets = N + 1;
  std::array<uint64_t, N + 1> counts{};  // per bucket, not cumulative; [N]: above every bound
  uint64_t count = 0;
  double sum = 0;

  void observe(double value, const std::array<double, N>& bounds) {
    size_t b = 0;
    while (b < N && value > bounds[b]) ++b;
    ++counts[b];
    ++count;
    sum += value;
  }
  // What was observed after `before` (a snapshot of this histogram).
  FixedHistogram since(const FixedHistogram& before) const {
    FixedHistogram d;
    for (size_t b = 0; b <= N; ++b) d.counts[b] = counts[b] - before.counts[b];
    d.count = count - before.count;
    d.sum = sum - before.sum;
    return d;
  }
  void add(const FixedHistogram& other) {
    for (size_t b = 0; b <= N; ++b) counts[b] += other.counts[b];
    count += other.count;
    sum += other.sum;
  }
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
};

using ExpertReadSecondsHistogram = FixedHistogram<kExpertReadSecondsBounds.size()>;
using ExpertsPerLayerStepHistogram = FixedHistogram<kExpertsPerLayerStepBounds.size()>;

}  // namespace spillway::engine
