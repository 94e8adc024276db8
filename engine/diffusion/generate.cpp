#include "engine/diffusion/generate.h"

#include <cassert>

#include "engine/diffusion/active_set.h"

namespace spillway::engine::diffusion {

void add_canvas_step(const Canvas& canvas, std::span<const int32_t> rows, std::vector<int32_t> block_table,
                     ForwardBatch& batch) {
  BatchSequence seq;
  seq.block_table = std::move(block_table);
  fill_canvas_sequence(canvas, seq, batch.tokens);
  const int32_t first = seq.first_token;
  batch.sequences.push_back(std::move(seq));
  for (int32_t p : rows) batch.logit_rows.push_back(first + forwarded_index(canvas, canvas.logit_row(p)));
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
