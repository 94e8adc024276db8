// Sampler stages: see sampler_stages.h for the chain, the candidate set and why the draws
// match the old sort-based sampler. The softmax's exp is kernels::exp_scaled_sum's
// (exp_poly: a vectorized polynomial, the same bits on every ISA, within 2 ulp of std::exp,
// so the probabilities are the old std::exp ones to 1e-6 relative); the reference sampler
// of the tests (tests/engine/reference_sampler.h) computes with the same exp_poly.
#include "engine/sampling/sampler_stages.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/sampling/band_draw.h"
#include "kernels/exp_sum.h"
#include "kernels/ops/sample_scan.h"

namespace spillway::engine {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Below this many candidates weighted_select sorts and walks instead of partitioning.
constexpr size_t kSmallSelect = 48;
// Histogram buckets of top-k's count pass: about 32 ids per bucket, at most kMaxBuckets (a
// few dozen ids per bucket at 152k; the bucket where the count reaches k is usually far
// sparser, in the distribution's upper tail).
constexpr int kMaxBuckets = 4096;
int bucket_count(int32_t n_vocab) { return std::clamp(n_vocab / 32, 16, kMaxBuckets); }
}  // namespace

void SamplingRow::ensure_range() {
  if (have_range) return;
  have_range = true;
  const kernels::RowRange r = kernels::row_range(logits, n_vocab);
  max_logit = r.max;
  min_logit = r.min;
  n_finite = static_cast<int32_t>(r.n_finite);
  best_id = static_cast<int32_t>(r.argmax);  // the lowest id holding the maximum; 0 if none
}

void SamplingRow::ensure_candidate_probs() {
  if (have_probs) return;
  have_probs = true;
  if (n_cand == 0) return;
  // The candidates are in rank order: cand[0] holds the largest logit. Their logits are
  // gathered into a row for exp_scaled_sum (band_draw's exp and sum order), in
  // scratch->probs (band_draw's scratch, unused once there are candidates).
  std::vector<float>& e = scratch->probs;
  if (e.size() < n_cand) e.resize(n_cand);
  for (size_t i = 0; i < n_cand; ++i) e[i] = cand[i].logit;
  const double inv_sum =
      1.0 / kernels::exp_scaled_sum(e.data(), cand[0].logit, inv_temperature, e.data(), static_cast<int64_t>(n_cand));
  for (size_t i = 0; i < n_cand; ++i) cand[i].p = static_cast<float>(e[i] * inv_sum);
}

size_t weighted_select(Candidate* cand, size_t n, double target) {
  if (n == 0) return 0;
  size_t lo = 0, hi = n;
  double acc = 0.0;  // mass of cand[0, lo), the lo best; acc < target (or lo == 0)
  while (hi - lo > kSmallSelect) {
    // Median of three by rank as the pivot, moved to hi - 1.
    const size_t mid_i = lo + (hi - lo) / 2;
    Candidate* a = &cand[lo];
    Candidate* b = &cand[mid_i];
    Candidate* c = &cand[hi - 1];
    if (ranks_before(*b, *a)) std::swap(a, b);
    if (ranks_before(*c, *b)) {
      std::swap(b, c);
      if (ranks_before(*b, *a)) std::swap(a, b);
    }
    std::swap(*b, cand[hi - 1]);
    const Candidate pivot = cand[hi - 1];
    // [lo, mid) rank before the pivot, [mid, hi - 1) after it; the pivot goes to mid.
    size_t mid = lo;
    double mass = 0.0;
    for (size_t i = lo; i < hi - 1; ++i) {
      if (ranks_before(cand[i], pivot)) {
        mass += cand[i].p;
        std::swap(cand[i], cand[mid]);
        ++mid;
      }
    }
    std::swap(cand[mid], cand[hi - 1]);
    if (mid > lo && acc + mass >= target) {
      hi = mid;
      continue;
    }
    acc += mass;
    if (acc + pivot.p >= target) return mid + 1;
    acc += pivot.p;
    lo = mid + 1;
  }
  std::sort(cand + lo, cand + hi, ranks_before);
  for (size_t i = lo; i < hi; ++i) {
    acc += cand[i].p;
    if (acc >= target) return i + 1;
  }
  // Only rounding gets here when hi < n; when hi == n the whole mass is below target.
  return std::max<size_t>(hi, 1);
}

void AllowedSetConstraint::fill_allowed(std::span<uint64_t> allowed, int32_t n_vocab) {
  for (int32_t t : allowed_) {
    if (t >= 0 && t < n_vocab) allowed[t / 64] |= uint64_t{1} << (t % 64);
  }
}

void LogitBiasStage::apply(SamplingRow& row) {
  for (const auto& [id, bias] : bias_) {
    if (id >= 0 && id < row.n_vocab) row.logits[id] += bias;
  }
}

void PenaltyStage::count(const SamplingRow& row, size_t first) {
  if (counts_.size() < static_cast<size_t>(row.n_vocab)) counts_.resize(row.n_vocab, 0);
  for (int32_t t : touched_) counts_[t] = 0;
  touched_.clear();
  for (size_t i = first; i < row.history.size(); ++i) {
    const int32_t t = row.history[i];
    if (t < 0 || t >= row.n_vocab) continue;
    if (counts_[t]++ == 0) touched_.push_back(t);
  }
}

void PenaltyStage::apply(SamplingRow& row) {
  float* logits = row.logits;
  if (repetition_ != 1.0f) {
    count(row, 0);
    for (int32_t t : touched_) {
      logits[t] = logits[t] > 0 ? logits[t] / repetition_ : logits[t] * repetition_;
    }
  }
  if (presence_ != 0.0f || frequency_ != 0.0f) {
    count(row, std::min(row.n_prompt, row.history.size()));
    for (int32_t t : touched_) {
      logits[t] -= presence_ + frequency_ * static_cast<float>(counts_[t]);
    }
  }
}

void BannedTokensStage::apply(SamplingRow& row) {
  for (int32_t t : row.banned) {
    if (t >= 0 && t < row.n_vocab) row.logits[t] = kNegInf;
  }
}

void ConstraintMaskStage::apply(SamplingRow& row) {
  std::vector<uint64_t>& allowed = row.scratch->allowed;
  const size_t words = (static_cast<size_t>(row.n_vocab) + 63) / 64;
  allowed.assign(words, 0);
  constraint_->fill_allowed(std::span<uint64_t>(allowed.data(), words), row.n_vocab);
  for (size_t w = 0; w < words; ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t base = w * 64;
    const size_t end = std::min<size_t>(base + 64, row.n_vocab);
    for (size_t t = base; t < end; ++t) {
      if (!((bits >> (t - base)) & 1)) row.logits[t] = kNegInf;
    }
  }
}

void GreedyStage::apply(SamplingRow& row) {
  // The lowest id holding the largest logit (kernels::row_range, vectorized); NaN logits are
  // never chosen; a row of -inf gives 0.
  row.ensure_range();
  row.token = row.best_id;
}

void TemperatureStage::apply(SamplingRow& row) { row.inv_temperature = inv_t_; }

void TopKStage::apply(SamplingRow& row) {
  row.ensure_range();
  const size_t k = static_cast<size_t>(k_);
  if (k >= static_cast<size_t>(row.n_finite)) return;  // keeps every finite id: the whole row
  // Count ids per bucket of (max - logit) over the finite range; the k best lie in the
  // buckets up to the one where the count reaches k. Gather those, select, sort the k.
  SamplerScratch& s = *row.scratch;
  const int nb = bucket_count(row.n_vocab);
  s.count.assign(nb, 0);
  const float span = row.max_logit - row.min_logit;
  const float scale = span > 0.0f ? static_cast<float>(nb - 1) / span : 0.0f;
  const float mx = row.max_logit;
  for (int32_t i = 0; i < row.n_vocab; ++i) {
    const float d = (mx - row.logits[i]) * scale;
    if (d < static_cast<float>(nb)) ++s.count[static_cast<size_t>(d)];  // -inf: skipped
  }
  size_t cumulative = 0;
  int last = 0;
  for (; last < nb; ++last) {
    cumulative += static_cast<size_t>(s.count[last]);
    if (cumulative >= k) break;
  }
  if (s.candidates.size() < static_cast<size_t>(row.n_vocab)) s.candidates.resize(row.n_vocab);
  Candidate* cand = s.candidates.data();
  size_t n = 0;
  for (int32_t i = 0; i < row.n_vocab; ++i) {
    const float d = (mx - row.logits[i]) * scale;
    if (d < static_cast<float>(last + 1)) cand[n++] = {row.logits[i], i, 0.0f};
  }
  std::nth_element(cand, cand + k, cand + n, ranks_before);
  std::sort(cand, cand + k, ranks_before);
  row.cand = cand;
  row.n_cand = k;
  row.have_candidates = true;
  row.have_probs = false;  // the softmax runs over the k kept (as the old sampler did)
}

void TopPStage::apply(SamplingRow& row) {
  if (row.have_candidates) {  // in rank order (after top-k): the old walk
    row.ensure_candidate_probs();
    double cumulative = 0.0;
    size_t n = 0;
    while (n < row.n_cand) {
      cumulative += row.cand[n].p;
      ++n;
      if (cumulative >= top_p_) break;
    }
    row.n_cand = std::max<size_t>(n, 1);
    return;
  }
  // The whole row: the draw applies the cut (band_draw.h).
  row.top_p = top_p_;
}

void MinPStage::apply(SamplingRow& row) {
  if (row.have_candidates) {
    row.ensure_candidate_probs();
    if (row.n_cand == 0) return;
    const float threshold = row.cand[0].p * min_p_;
    size_t n = 1;
    while (n < row.n_cand && row.cand[n].p >= threshold) ++n;
    row.n_cand = n;
    return;
  }
  // The whole row: the draw applies the cut (band_draw.h; the best id always survives top-p,
  // so its probability is the old sampler's cand[0]).
  row.min_p = min_p_;
}

void DrawStage::apply(SamplingRow& row) {
  if (row.have_candidates) {  // the old draw, exactly
    row.ensure_candidate_probs();
    if (row.n_cand == 0) {
      row.token = 0;
      return;
    }
    double total = 0.0;
    for (size_t i = 0; i < row.n_cand; ++i) total += row.cand[i].p;
    std::uniform_real_distribution<double> uniform(0.0, total);
    double r = uniform(*row.rng);
    for (size_t i = 0; i < row.n_cand; ++i) {
      r -= row.cand[i].p;
      if (r <= 0.0) {
        row.token = row.cand[i].id;
        return;
      }
    }
    row.token = row.cand[row.n_cand - 1].id;
    return;
  }
  // No candidate set: a few vectorized passes (band_draw.h); the top-p / min-p cut-offs
  // recorded on the row are applied there.
  row.token = band_draw(row);
}

}  // namespace spillway::engine
