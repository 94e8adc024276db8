#include "engine/diffusion/generate.h"

#include <cassert>

namespace spillway::engine::diffusion {

void add_canvas_step(const Canvas& canvas, std::span<const int32_t> rows, std::vector<int32_t> block_table,
                     ForwardBatch& batch) {
  const Canvas::Range range = canvas.forward_range();
  const int32_t first = static_cast<int32_t>(batch.tokens.size());
  const int s = batch.add_sequence(canvas.tokens().data() + range.begin, range.end - range.begin, range.begin,
                                   std::move(block_table));
  BatchSequence& seq = batch.sequences[s];
  seq.mode = AttentionMode::Canvas;
  seq.canvas_begin = range.begin;
  seq.canvas_end = canvas.length();
  for (int32_t p : rows) {
    assert(canvas.logit_row(p) >= range.begin && canvas.logit_row(p) < range.end);
    batch.logit_rows.push_back(first + canvas.logit_row(p) - range.begin);
  }
}

Status run_canvas(ForwardPass& forward, Canvas& canvas, const std::vector<int32_t>& block_table,
                  const StepObserver& observer) {
  const int32_t n_vocab = forward.model().config().n_vocab;
  ForwardBatch batch;
  for (;;) {
    const std::span<const int32_t> rows = canvas.begin_step();
    if (canvas.done()) return {};
    batch.clear();
    add_canvas_step(canvas, rows, block_table, batch);
    auto logits = forward.execute(batch);
    if (!logits) return logits.error();
    assert(logits->size() == rows.size() * size_t(n_vocab));
    canvas.commit(logits->data(), n_vocab);
    if (observer) observer(canvas);
    if (canvas.repeat_stop() >= 0) return {};  // the repeat guard ended the output
  }
}

}  // namespace spillway::engine::diffusion
