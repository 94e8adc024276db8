// See band_draw.h.
#include "engine/sampling/band_draw.h"

#include <algorithm>
#include <cfloat>
#include <limits>
#include <random>

#include "kernels/exp_sum.h"
#include "kernels/sample_scan.h"

namespace spillway::engine {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// Bands with at most this many ids go straight to weighted_select.
constexpr int64_t kDirectSelect = 64;
constexpr int kMaxSubBuckets = 4096;

// The first index whose cumulative mass (acc, then acc + mass[i], in order) reaches target
// with a nonzero mass of its own; n when none does. acc returns the mass before it.
int crossing(const double* mass, int n, double target, double& acc) {
  acc = 0.0;
  for (int i = 0; i < n; ++i) {
    if (mass[i] > 0.0 && acc + mass[i] >= target) return i;
    acc += mass[i];
  }
  return n;
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
  float* e = s.probs.data();
  const float* x = row.logits;
  const float mx = row.max_logit;
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(x, mx, row.inv_temperature, e, n);

  // Band j covers logits in [lower[j], lower[j - 1]): equal widths over the range whose exps
  // can be nonzero (exp underflows below -104), the last band everything below.
  const float span = std::min(mx - row.min_logit, 104.0f / row.inv_temperature);
  float lower[kernels::kMassBands];
  for (int j = 0; j < kernels::kMassBands; ++j) {
    lower[j] = mx - span * static_cast<float>(j + 1) / static_cast<float>(kernels::kMassBands);
  }
  lower[kernels::kMassBands - 1] = -FLT_MAX;
  double band[kernels::kMassBands];
  // p overwrites the exps: scratch->probs holds the probabilities afterwards (as dense).
  const double total = kernels::band_masses(x, e, n, inv_sum, lower, band, e);
  const float* p = e;

  std::uniform_real_distribution<double> uniform(0.0, total);
  const double r = uniform(*row.rng);
  double acc = 0.0;
  const int b = crossing(band, kernels::kMassBands, r, acc);
  if (b == kernels::kMassBands) return worst_id(row);  // rounding left r past the last id

  // The band's ids, as candidates with their probabilities.
  if (s.band.size() < static_cast<size_t>(n)) s.band.resize(n);
  if (s.candidates.size() < static_cast<size_t>(n)) s.candidates.resize(n);
  const float hi = b == 0 ? kInf : lower[b - 1];
  const int64_t c = kernels::band_ids(x, n, lower[b], hi, s.band.data());
  Candidate* g = s.candidates.data();
  const int32_t* ids = s.band.data();
  for (int64_t k = 0; k < c; ++k) {
    const int32_t id = ids[k];
    g[k] = {x[id], id, p[id]};
  }
  const double target = r - acc;
  if (c <= kDirectSelect) return g[weighted_select(g, static_cast<size_t>(c), target) - 1].id;

  // A histogram of (top - logit) buckets over the band (monotone in the rank order), then only
  // the crossing bucket's candidates are ordered.
  const float top = b == 0 ? mx : lower[b - 1];
  const float bottom = std::max(lower[b], row.min_logit);
  const int nb = static_cast<int>(std::clamp<int64_t>(c / 4, 16, kMaxSubBuckets));
  const float width = top - bottom;
  const float scale = width > 0.0f ? static_cast<float>(nb - 1) / width : 0.0f;
  const float last = static_cast<float>(nb - 1);
  if (s.bucket.size() < static_cast<size_t>(c)) s.bucket.resize(c);
  uint16_t* bucket = s.bucket.data();
  s.mass.assign(nb, 0.0);
  double* mass = s.mass.data();
  for (int64_t k = 0; k < c; ++k) {
    const float d = (top - g[k].logit) * scale;
    bucket[k] = static_cast<uint16_t>(d < last ? d : last);
    mass[bucket[k]] += g[k].p;
  }
  double acc2 = 0.0;
  const int want = crossing(mass, nb, target, acc2);
  if (want == nb) return g[weighted_select(g, static_cast<size_t>(c), target) - 1].id;
  size_t m = 0;
  for (int64_t k = 0; k < c; ++k) {
    if (bucket[k] == want) g[m++] = g[k];
  }
  return g[weighted_select(g, m, target - acc2) - 1].id;
}

}  // namespace spillway::engine
