// See band_draw.h.
#include "engine/sampling/band_draw.h"

#include <algorithm>
#include <cfloat>
#include <limits>
#include <random>

#include "kernels/exp_sum.h"
#include "kernels/ops/sample_scan.h"

namespace spillway::engine {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kBands = kernels::kMassBands;
// At most this many ids go straight to weighted_select.
constexpr int64_t kDirectSelect = 64;

// Lower bounds of kBands equal-width bands from `top` down to `bottom`; the last takes
// everything below (-FLT_MAX).
void band_bounds(float top, float bottom, float* lower) {
  const float width = top - bottom;
  for (int j = 0; j < kBands; ++j) lower[j] = top - width * static_cast<float>(j + 1) / kBands;
  lower[kBands - 1] = -FLT_MAX;
}

// The first band whose cumulative mass reaches target with a nonzero mass of its own; kBands
// when none does. before: the cumulative mass of the bands above it.
int crossing(const double* above, double target, double& before) {
  before = 0.0;
  for (int j = 0; j < kBands; ++j) {
    if (above[j] > before && above[j] >= target) return j;
    before = above[j];
  }
  return kBands;
}

// The worst-ranked finite id: the lowest logit, the highest id among its ties.
int32_t worst_id(const SamplingRow& row) {
  for (int32_t i = row.n_vocab - 1; i >= 0; --i) {
    if (row.logits[i] == row.min_logit) return i;
  }
  return 0;
}

}  // namespace

int32_t band_draw(SamplingRow& row) {
  row.ensure_range();
  if (row.n_finite == 0) return 0;
  SamplerScratch& s = *row.scratch;
  const int32_t n = row.n_vocab;
  if (s.probs.size() < static_cast<size_t>(n)) s.probs.resize(n);
  float* p = s.probs.data();
  const float* x = row.logits;
  const float mx = row.max_logit;
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(x, mx, row.inv_temperature, p, n);

  // Level 0, the whole row: bands over the range whose exps can be nonzero (exp underflows
  // below -104), the last band everything below; p overwrites the exps in scratch->probs.
  float lower[kBands];
  band_bounds(mx, mx - std::min(mx - row.min_logit, 104.0f / row.inv_temperature), lower);
  double above[kBands];
  const double total = kernels::band_masses(x, p, n, inv_sum, lower, above, p);

  std::uniform_real_distribution<double> uniform(0.0, total);
  const double r = uniform(*row.rng);
  double before = 0.0;
  int b = crossing(above, r, before);
  if (b == kBands) return worst_id(row);  // rounding left r past the last id
  double target = r - before;

  // The crossing band's logits / probabilities / ids, packed.
  if (s.packed_ids.size() < static_cast<size_t>(n)) {
    s.packed_logits.resize(n);
    s.packed_probs.resize(n);
    s.packed_ids.resize(n);
  }
  float* px = s.packed_logits.data();
  float* pp = s.packed_probs.data();
  int32_t* pid = s.packed_ids.data();
  float hi = b == 0 ? kInf : lower[b - 1];
  int64_t c = kernels::band_pack(x, p, nullptr, n, lower[b], hi, px, pp, pid);
  float top = b == 0 ? mx : lower[b - 1];
  float bottom = std::max(lower[b], row.min_logit);
  // Refine: the same bands over the packed set until it is small (masses of given
  // probabilities: inv_sum 1). Stops when a level makes no progress (ties).
  while (c > kDirectSelect && top > bottom) {
    band_bounds(top, bottom, lower);
    kernels::band_masses(px, pp, c, 1.0, lower, above, nullptr);
    b = crossing(above, target, before);
    if (b == kBands) break;  // rounding: keep the whole set (weighted_select takes its worst)
    hi = b == 0 ? kInf : lower[b - 1];
    const int64_t m = kernels::band_pack(px, pp, pid, c, lower[b], hi, px, pp, pid);  // in place
    const bool progress = m < c;
    c = m;
    target -= before;
    top = b == 0 ? top : lower[b - 1];
    bottom = std::max(lower[b], bottom);
    if (!progress) break;  // every id in one band (ties): no narrower bands will split them
  }
  if (c == 0) return worst_id(row);
  if (s.candidates.size() < static_cast<size_t>(c)) s.candidates.resize(c);
  Candidate* cand = s.candidates.data();
  for (int64_t k = 0; k < c; ++k) cand[k] = {px[k], pid[k], pp[k]};
  return cand[weighted_select(cand, static_cast<size_t>(c), target) - 1].id;
}

}  // namespace spillway::engine
