// Shape buckets (issue #17): an engine step's row count rounded up to the StepPlans ladder
// by appending padding rows, so that the forward only ever runs the ladder's shapes.
//
// Padding rows form one extra BatchSequence in AttentionMode::Padding: token 0, no K/V
// written, no keys attended (attention output 0), no logit rows. Every row of the forward is
// computed independently of the others (engine/forward/forward.h), so padding changes no live
// row's result bit for bit (tests/runtime/test_step_buckets.cpp). Models with recurrent
// mixers are never padded (a padding row has no state slot).
//
// Thread contract: engine thread only (the buffers are the runner's).
#pragma once

#include <cstdint>

#include "engine/forward/batch.h"

namespace spillway::runtime {

// out = in plus (rows - in.tokens.size()) padding rows when rows is larger; else a copy of
// in. out's vectors keep their capacity between calls (no allocation once warm).
void pad_forward_batch(const engine::ForwardBatch& in, int32_t rows, engine::ForwardBatch& out);

}  // namespace spillway::runtime
