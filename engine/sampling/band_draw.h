// The draw of plain temperature sampling (no top-k / top-p / min-p cut-off): the old sorting
// sampler's rank-ordered inverse CDF, found with a few vectorized passes over the row.
//
//   1. kernels::row_range: max, min, argmax, finite count (SamplingRow::ensure_range);
//   2. kernels::exp_scaled_sum: the exps of (logit - max) * 1/T into scratch->probs, their sum S;
//   3. kernels::band_masses: p = float(e * (1/S)) (the old sampler's probabilities, over the
//      exps in place), their total, and the cumulative masses of kMassBands equal-width logit
//      bands over [min, max] (band j holds better ranks than band j + 1);
//   4. one uniform number r in [0, total) from the row's RNG (the old sampler's single call);
//   5. the first band whose cumulative mass reaches r; kernels::band_pack packs its logits,
//      probabilities and ids;
//   6. steps 3 and 5 again on the packed set (narrower bands) until at most 64 ids are left
//      (or the rest are tied), which weighted_select orders.
// The masses are summed in double in a different order than the old sorted walk, so (as for
// the rest of the chain, sampler_stages.h) a token differs only when r falls within a few
// ulps of a double of a cumulative boundary.
//
// Thread contract: as SamplingRow (one thread at a time per row and scratch).
#pragma once

#include <cstdint>

#include "engine/sampling/sampler_stages.h"

namespace spillway::engine {

// Draws the token of `row` at row.inv_temperature over every finite id (no cut-offs, no
// candidate set). Consumes one uniform number from row.rng unless no id is finite (then
// returns 0 without drawing, as DrawStage always did). Leaves the probabilities in
// scratch->probs (as ensure_dense would), but no buckets: have_dense stays false.
int32_t band_draw(SamplingRow& row);

}  // namespace spillway::engine
