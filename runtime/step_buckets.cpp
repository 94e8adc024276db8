#include "runtime/step_buckets.h"

#include <cstddef>

namespace spillway::runtime {

void pad_forward_batch(const engine::ForwardBatch& in, int32_t rows, engine::ForwardBatch& out) {
  out.tokens.assign(in.tokens.begin(), in.tokens.end());
  out.logit_rows.assign(in.logit_rows.begin(), in.logit_rows.end());
  const std::size_t n_seq = in.sequences.size();
  out.sequences.resize(n_seq);
  for (std::size_t s = 0; s < n_seq; ++s) {
    const engine::BatchSequence& from = in.sequences[s];
    engine::BatchSequence& to = out.sequences[s];
    to.first_token = from.first_token;
    to.n_tokens = from.n_tokens;
    to.start_position = from.start_position;
    to.block_table.assign(from.block_table.begin(), from.block_table.end());
    to.mode = from.mode;
    to.canvas_begin = from.canvas_begin;
    to.canvas_end = from.canvas_end;
    to.state_slot = from.state_slot;
    to.positions.assign(from.positions.begin(), from.positions.end());
  }
  const auto live = static_cast<int32_t>(in.tokens.size());
  if (rows <= live) return;
  engine::BatchSequence pad;
  pad.first_token = live;
  pad.n_tokens = rows - live;
  pad.mode = engine::AttentionMode::Padding;
  out.tokens.resize(rows, 0);
  out.sequences.push_back(std::move(pad));
}

}  // namespace spillway::runtime
