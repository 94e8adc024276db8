// The draw of temperature sampling over the whole row (no top-k candidate set): the old
// sorting sampler's rank-ordered inverse CDF, found with a few vectorized passes over the
// row. With top_p < 1 / min_p > 0 recorded on the row, the exact procedure below first finds
// the top-p bound (the first rank whose cumulative mass reaches top_p) by the same crossing,
// zeroes the probabilities of the ids the cut-offs drop (ranked after the bound, or below
// p(best) * min_p and not the best), and draws over the rest with r = c * their total (a
// token outside them, only by rounding, becomes the worst-ranked kept id). No fast path
// there yet.
//
// The exact procedure (what the token is defined by; BandDrawPath::kExact runs it as written):
//   1. kernels::row_range: max, min, argmax, finite count (SamplingRow::ensure_range);
//   2. the probabilities p = float(e * (1/S)) of row_probabilities below (e the exps of
//      (logit - max) * 1/T, S their sum), their total and the cumulative masses of kMassBands
//      equal-width logit bands over [min, max] (kernels::band_masses: band j holds better
//      ranks than band j + 1);
//   3. one uniform number c in [0, 1) from the row's RNG (the old sampler's single call;
//      r = c * total, as uniform_real_distribution(0, total) computes it);
//   4. the first band whose cumulative mass reaches r; kernels::band_pack packs its logits,
//      probabilities and ids;
//   5. steps 2 and 4 again on the packed set (narrower bands) until at most 64 ids are left
//      (or the rest are tied), which weighted_select orders.
//
// The fast path (BandDrawPath::kAuto) gives the same token with two passes over the row
// and no stored probabilities: row_range, then kernels::exp_band_sums (the exps' sum S, bit
// for bit the exact procedure's, and the unnormalised band sums). The exact total and band
// masses are sums of float-rounded probabilities, so they are known only to within a
// proven bound (relative 2^-24 + summation error, see band_draw.cpp) of (1/S) * the
// unnormalised sums; r and the target inside the crossing band are carried as intervals
// that contain the exact procedure's values. Only the crossing band's ids are packed and
// their probabilities computed exactly (the same bits as step 2's). Every decision (the
// crossing band, each narrower level, weighted_select's token) is monotone in the target,
// so when both ends of the interval give the same answer it is the exact procedure's; when
// they do not (r within about 1e-7 of a boundary), the exact procedure runs with the same c.
// The masses are summed in double in a different order than the old sorted walk, so (as for
// the rest of the chain, sampler_stages.h) a token differs from the old sampler's only when
// r falls within a few ulps of a double of a cumulative boundary.
//
// Thread contract: as SamplingRow (one thread at a time per row and scratch).
#pragma once

#include <cstdint>

#include "engine/sampling/sampler_stages.h"

namespace spillway::engine {

enum class BandDrawPath {
  kAuto,   // the fast path, the exact procedure where the bound cannot decide
  kExact,  // the exact procedure only (tests: the fast path must agree with it)
};

// Draws the token of `row` at row.inv_temperature over every finite id kept by row.top_p and
// row.min_p (no candidate set). Consumes one uniform number from row.rng unless no id is finite (then
// returns 0 without drawing, as DrawStage always did). Uses the scratch's packed_* and
// candidates buffers (the exact procedure also probs; scratch->probs is not the row's
// probabilities afterwards).
int32_t band_draw(SamplingRow& row, BandDrawPath path = BandDrawPath::kAuto);

// How many band_draw calls in this thread took the exact procedure because the fast path's
// bound could not decide (kAuto only); for tests.
int64_t band_draw_fallbacks();

// The sampler's probabilities of a row at 1/T = inv_temperature over every id:
// out[i] = float(e[i] * (1 / S)), e[i] = kernels::exp_poly((logits[i] - max) * inv_temperature)
// (0 for -inf), S their sum in kernels::exp_scaled_sum's order. The numbers band_draw's draw
// is defined by (and the old sampler's, to exp_poly and summation order). out has room for
// n_vocab; all zero when no logit is finite. Any thread; no allocation.
void row_probabilities(const float* logits, int32_t n_vocab, float inv_temperature, float* out);

}  // namespace spillway::engine
