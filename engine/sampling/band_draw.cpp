// See band_draw.h.
#include "engine/sampling/band_draw.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
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
// band_draw's result when the fast path cannot decide.
constexpr int32_t kUndecided = -2;

thread_local int64_t g_fallbacks = 0;

// Lower bounds of kBands equal-width bands from `top` down to `bottom`; the last takes
// everything below (-FLT_MAX).
void band_bounds(float top, float bottom, float* lower) {
  const float width = top - bottom;
  for (int j = 0; j < kBands; ++j) lower[j] = top - width * static_cast<float>(j + 1) / kBands;
  lower[kBands - 1] = -FLT_MAX;
}

// The level-0 bands of a row, over the range W whose exps can be nonzero (exp underflows
// below -104): [max - W/16, max], [max - W/4, ...), [max - W/2, ...), the rest. Narrow at the
// top, where a model's row holds its mass in a few ids: the fast path packs band 0 during
// its one pass and needs no other pass over the row when the draw falls there.
void row_bands(const SamplingRow& row, float* lower) {
  const float mx = row.max_logit;
  const float w = std::min(mx - row.min_logit, 104.0f / row.inv_temperature);
  lower[0] = mx - w * 0.0625f;
  lower[1] = mx - w * 0.25f;
  lower[2] = mx - w * 0.5f;
  lower[kBands - 1] = -FLT_MAX;
  static_assert(kBands == 4);
}

// The first band whose cumulative mass reaches target with a nonzero mass of its own; kBands
// when none does. before: the cumulative mass of the bands above it. For target > 0 (above[]
// is nondecreasing) the first j with above[j] >= target: monotone in target.
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

// weighted_select over the packed set (fresh candidates: it rearranges them).
int32_t select_packed(SamplerScratch& s, int64_t c, double target) {
  if (s.candidates.size() < static_cast<size_t>(c)) s.candidates.resize(c);
  Candidate* cand = s.candidates.data();
  const float* px = s.packed_logits.data();
  const float* pp = s.packed_probs.data();
  const int32_t* pid = s.packed_ids.data();
  for (int64_t k = 0; k < c; ++k) cand[k] = {px[k], pid[k], pp[k]};
  return cand[weighted_select(cand, static_cast<size_t>(c), target) - 1].id;
}

// Steps 5 of band_draw.h from the packed crossing band (c entries in scratch->packed_*,
// logits in [bottom, top]) for every target in [t_lo, t_hi]: the token, or kUndecided when
// the two ends lead to different bands or tokens. Every step is monotone in the target, so
// equal answers at both ends are the answer for any target between them.
int32_t narrow_and_select(const SamplingRow& row, int64_t c, float top, float bottom, double t_lo, double t_hi) {
  SamplerScratch& s = *row.scratch;
  float* px = s.packed_logits.data();
  float* pp = s.packed_probs.data();
  int32_t* pid = s.packed_ids.data();
  float lower[kBands];
  double above[kBands];
  // Refine: the same bands over the packed set until it is small (masses of given
  // probabilities: inv_sum 1). Stops when a level makes no progress (ties).
  while (c > kDirectSelect && top > bottom) {
    band_bounds(top, bottom, lower);
    kernels::band_masses(px, pp, c, 1.0, lower, above, nullptr);
    double before = 0.0, before_hi = 0.0;
    const int b = crossing(above, t_lo, before);
    if (t_hi != t_lo && crossing(above, t_hi, before_hi) != b) return kUndecided;
    if (b == kBands) break;  // rounding: keep the whole set (weighted_select takes its worst)
    const float hi = b == 0 ? kInf : lower[b - 1];
    const int64_t m = kernels::band_pack(px, pp, pid, c, lower[b], hi, px, pp, pid);  // in place
    const bool progress = m < c;
    c = m;
    t_lo -= before;
    t_hi -= before;
    top = b == 0 ? top : lower[b - 1];
    bottom = std::max(lower[b], bottom);
    if (!progress) break;  // every id in one band (ties): no narrower bands will split them
  }
  if (c == 0) return worst_id(row);
  const int32_t token = select_packed(s, c, t_lo);
  if (t_hi != t_lo && select_packed(s, c, t_hi) != token) return kUndecided;
  return token;
}

void ensure_packed_room(SamplerScratch& s, int32_t n) {
  if (s.packed_ids.size() < static_cast<size_t>(n)) {
    s.packed_logits.resize(n);
    s.packed_probs.resize(n);
    s.packed_ids.resize(n);
  }
}

// The rank-ordered crossing of target over the probabilities p (per id, over the row; the
// level-0 bands' cumulative masses in above): the id, or -1 when no band reaches target
// (rounding past the last id). Packs into scratch->packed_*.
int32_t crossing_id(const SamplingRow& row, const float* p, const float* lower, const double* above, double target) {
  SamplerScratch& s = *row.scratch;
  double before = 0.0;
  const int b = crossing(above, target, before);
  if (b == kBands) return -1;
  ensure_packed_room(s, row.n_vocab);
  const float hi = b == 0 ? kInf : lower[b - 1];
  const int64_t m = kernels::band_pack(row.logits, p, nullptr, row.n_vocab, lower[b], hi, s.packed_logits.data(),
                                       s.packed_probs.data(), s.packed_ids.data());
  const float top = b == 0 ? row.max_logit : lower[b - 1];
  const float bottom = std::max(lower[b], row.min_logit);
  const double t = target - before;
  return narrow_and_select(row, m, top, bottom, t, t);
}

// The exact procedure of band_draw.h with the row's uniform number c already drawn.
int32_t exact_draw(SamplingRow& row, double c) {
  SamplerScratch& s = *row.scratch;
  const int32_t n = row.n_vocab;
  if (s.probs.size() < static_cast<size_t>(n)) s.probs.resize(n);
  float* p = s.probs.data();
  const float* x = row.logits;
  const float mx = row.max_logit;
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(x, mx, row.inv_temperature, p, n);
  float lower[kBands];
  row_bands(row, lower);
  double above[kBands];
  const double total = kernels::band_masses(x, p, n, inv_sum, lower, above, p);  // p over the exps

  const double r = (c * (total - 0.0)) + 0.0;  // uniform_real_distribution(0, total) with c
  const int32_t token = crossing_id(row, p, lower, above, r);
  return token < 0 ? worst_id(row) : token;  // rounding left r past the last id
}

// top_p < 1 and / or min_p > 0 (no top-k): the old sampler's cut-offs: an id is kept iff it ranks at or before the top-p bound
// (the first rank whose cumulative mass reaches top_p; none when rounding leaves every rank
// short) and (p >= p(best) * min_p or it is the best). The kept ids' probabilities (the
// others zeroed) then go through the same banded draw with r = c * their total; a token
// outside them (only rounding gets there) becomes the worst-ranked kept id, as the old
// sampler's walk ended on its last candidate.
int32_t cut_draw(SamplingRow& row, double c, float top_p, float min_p) {
  SamplerScratch& s = *row.scratch;
  const int32_t n = row.n_vocab;
  if (s.probs.size() < static_cast<size_t>(n)) s.probs.resize(n);
  float* p = s.probs.data();
  const float* x = row.logits;
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(x, row.max_logit, row.inv_temperature, p, n);
  float lower[kBands];
  row_bands(row, lower);
  double above[kBands];
  kernels::band_masses(x, p, n, inv_sum, lower, above, p);  // p over the exps
  bool has_bound = false;
  Candidate bound{};
  if (top_p < 1.0f) {
    const int32_t id = crossing_id(row, p, lower, above, top_p);
    if (id >= 0) {
      has_bound = true;
      bound = {x[id], id, 0.0f};
    }
  }
  const float floor = min_p > 0.0f ? p[row.best_id] * min_p : 0.0f;
  const int32_t best = row.best_id;
  // The kept ids' probabilities; -inf ids have p = 0 already (and rank after every bound).
  // Branch-free (vectorized): kept iff the bound does not rank before it (ranks_before
  // written out) and p >= floor or it is the best; with no bound, (-inf, n): no id after it.
  const float xb = has_bound ? bound.logit : -kInf;
  const int32_t idb = has_bound ? bound.id : n;
  for (int32_t i = 0; i < n; ++i) {
    const bool after_bound = xb > x[i] || (xb == x[i] && idb < i);
    const bool below_floor = p[i] < floor && i != best;  // floor 0: never (p >= 0)
    p[i] = (after_bound || below_floor) ? 0.0f : p[i];
  }
  const double total = kernels::band_masses(x, p, n, 1.0, lower, above, nullptr);
  const double r = (c * (total - 0.0)) + 0.0;  // uniform_real_distribution(0, total) with c
  const int32_t token = crossing_id(row, p, lower, above, r);
  if (token >= 0 && p[token] > 0.0f) return token;
  // The worst-ranked kept id (p > 0, or the best, which is always kept).
  int32_t worst = best;
  for (int32_t i = 0; i < n; ++i) {
    if (p[i] > 0.0f && ranks_before(Candidate{x[worst], worst, 0.0f}, Candidate{x[i], i, 0.0f})) worst = i;
  }
  return worst;
}

// The fast path of band_draw.h; kUndecided where the bound cannot decide.
int32_t fast_draw(SamplingRow& row, double c) {
  SamplerScratch& s = *row.scratch;
  const int32_t n = row.n_vocab;
  const float* x = row.logits;
  const float mx = row.max_logit;
  const float inv_t = row.inv_temperature;
  if (!std::isfinite(mx)) return kUndecided;
  float lower[kBands];
  row_bands(row, lower);
  double e_above[kBands];
  ensure_packed_room(s, n);
  float* px = s.packed_logits.data();
  float* pp = s.packed_probs.data();
  int64_t n_top = 0;  // band 0's entries, packed by the same pass
  const double sum = kernels::exp_band_sums(x, mx, inv_t, n, lower, e_above, px, s.packed_ids.data(), &n_top);
  if (!std::isfinite(sum) || !(sum > 0.0)) return kUndecided;  // NaN logits, ...
  const double inv_sum = 1.0 / sum;  // the exact procedure's (the same sum, bit for bit)

  // Bounds on the exact procedure's masses. For a set of ids with exps e_i (real sum R) the
  // exact procedure sums p_i = float(double(e_i) * inv_sum) in double:
  //   |p_i - e_i inv_sum| <= (2^-24 + 2^-52) e_i inv_sum + 2^-150 (subnormal floats);
  //   each double sum (exp_band_sums' and band_masses', at most n/16 + 4 additions per lane
  //   chain of nonnegative terms) is within gamma = (n/16 + 6) 2^-53 (relative) of its real sum.
  // So mass in [inv_sum E (1 - rho) - n 2^-149, inv_sum E (1 + rho) + n 2^-149], E our computed
  // sum, rho = 2^-24 + 2^-52 + 4 gamma + 2^-45 (the last absorbs second-order terms and the
  // roundings of these few products, all of positive numbers).
  const double gamma = (static_cast<double>(n) / 16.0 + 6.0) * 0x1p-53;
  const double rho = 0x1p-24 + 0x1p-52 + 4.0 * gamma + 0x1p-45;
  const double slack = static_cast<double>(n) * 0x1p-149;
  auto mass_lo = [&](double e) { return std::max(0.0, inv_sum * e * (1.0 - rho) - slack); };
  auto mass_hi = [&](double e) { return inv_sum * e * (1.0 + rho) + slack; };
  // r = fl(c * total) is monotone in total.
  const double r_lo = c * mass_lo(sum), r_hi = c * mass_hi(sum);
  if (!(r_lo > 0.0)) return kUndecided;
  // Level 0: the first band whose mass reaches r (r > 0), certain when every band above it
  // stays below r_lo and it reaches r_hi.
  int b = 0;
  for (; b < kBands; ++b) {
    if (mass_hi(e_above[b]) < r_lo) continue;
    if (mass_lo(e_above[b]) >= r_hi) break;
    return kUndecided;
  }
  if (b == kBands) return worst_id(row);  // the exact procedure's rounding case, certainly
  const double before_lo = b == 0 ? 0.0 : mass_lo(e_above[b - 1]);
  const double before_hi = b == 0 ? 0.0 : mass_hi(e_above[b - 1]);
  const double t_lo = r_lo - before_hi, t_hi = r_hi - before_lo;  // r - before, monotone

  // The crossing band's ids and their exact probabilities (exp_poly is per element: the
  // packed exps are the whole row's bits).
  const int64_t m = b == 0 ? n_top
                           : kernels::band_pack(x, nullptr, nullptr, n, lower[b], lower[b - 1], px, nullptr,
                                                s.packed_ids.data());
  kernels::exp_scaled_sum(px, mx, inv_t, pp, m);
  for (int64_t k = 0; k < m; ++k) pp[k] = static_cast<float>(static_cast<double>(pp[k]) * inv_sum);
  const float top = b == 0 ? mx : lower[b - 1];
  const float bottom = std::max(lower[b], row.min_logit);
  return narrow_and_select(row, m, top, bottom, t_lo, t_hi);
}

}  // namespace

int64_t band_draw_fallbacks() { return g_fallbacks; }

void row_probabilities(const float* logits, int32_t n_vocab, float inv_temperature, float* out) {
  const kernels::RowRange range = kernels::row_range(logits, n_vocab);
  if (range.n_finite == 0 || range.max == -kInf) {
    std::fill(out, out + n_vocab, 0.0f);
    return;
  }
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(logits, range.max, inv_temperature, out, n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) out[i] = static_cast<float>(static_cast<double>(out[i]) * inv_sum);
}

int32_t band_draw(SamplingRow& row, BandDrawPath path) {
  row.ensure_range();
  if (row.n_finite == 0) return 0;
  // The old sampler's single call: uniform_real_distribution(0, total) is c * total + 0.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double c = unit(*row.rng);
  if (row.top_p < 1.0f || row.min_p > 0.0f) return cut_draw(row, c, row.top_p, row.min_p);
  if (path == BandDrawPath::kAuto) {
    const int32_t token = fast_draw(row, c);
    if (token != kUndecided) return token;
    ++g_fallbacks;
  }
  return exact_draw(row, c);
}

}  // namespace spillway::engine
