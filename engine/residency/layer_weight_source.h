// Where the forward pass gets each layer's weights during a step.
//
// Residency units are a layer ({layer}) and, for MoE layers, a routed expert
// ({layer, expert}). The forward calls acquire_layer(l) before layer l and release_layer(l)
// after it, in layer order, every step; in between, every kernel call of the layer's kinds
// acquires the matrices it reads (acquire_matrices / release_matrices, through
// StepContext::matmul_multi), and a MoE FFN calls acquire_experts(l, ids) for the experts
// the step's tokens route to. A source whose units are all in
// memory returns them at once (no locks, no waiting); a streaming source
// (residency/weight_residency.h) may block until the unit's bytes are loaded.
//
// Thread contract: called only from the thread that runs the forward (the engine thread).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "common/result.h"
#include "engine/model/model.h"

namespace spillway::engine {

class LayerWeightSource {
 public:
  virtual ~LayerWeightSource() = default;
  // Valid until release_layer(layer). An Error when a streamed layer could not be read.
  virtual Result<const BlockWeights*> acquire_layer(int32_t layer) = 0;
  // The routed experts `experts` of MoE layer `layer` (acquired), one view per id in order,
  // valid until release_layer(layer). The default: the layer has no routed experts.
  virtual Result<std::vector<const ExpertWeights*>> acquire_experts(int32_t layer,
                                                                   std::span<const int32_t> experts) {
    return Error{fmt::format("layer {} has no routed experts ({} requested)", layer, experts.size())};
  }
  // acquire_experts without waiting for reads: the views at once, ready[i] = 1 for the
  // experts already in memory; wait_expert(layer, i) blocks until expert i of this request
  // is (an Error when its read failed). Every not-ready expert must be waited for before
  // the next request or release. The default: acquire_experts, all ready.
  virtual Result<std::vector<const ExpertWeights*>> begin_acquire_experts(int32_t layer,
                                                                         std::span<const int32_t> experts,
                                                                         std::vector<uint8_t>& ready) {
    auto views = acquire_experts(layer, experts);
    if (views) ready.assign(views->size(), 1);
    return views;
  }
  virtual Status wait_expert(int32_t layer, size_t index) { return {}; }
  // Unpins the experts acquired so far for `layer` (release_layer does too); a MoE FFN with
  // more distinct experts than max_experts_per_acquire() runs them in waves, releasing
  // between waves.
  virtual void release_experts(int32_t layer) {}
  virtual int32_t max_experts_per_acquire() const { return std::numeric_limits<int32_t>::max(); }
  // A hint between steps (nothing acquired): experts `experts` (distinct, at most
  // max_experts_per_acquire()) of MoE layer `layer` are likely acquired by the next step
  // (MoBiLE's fallback, from the discarded pass's router scores). A source with an expert
  // cache reads the missing ones now, in parallel; the others do nothing (the default). An
  // Error when a read failed (it names the file).
  virtual Status prefetch_experts(int32_t layer, std::span<const int32_t> experts) { return {}; }
  virtual void release_layer(int32_t layer) = 0;
  // The matrices `ms` of the acquired layer `layer` that the next kernel call reads, in the
  // order the forward consumes them: their `data` is valid until release_matrices(layer, ms)
  // or release_layer(layer). A streamed layer's matrices are its streaming units, so its
  // other matrices point nowhere meanwhile; matrices that are not the layer's (views a kind
  // makes itself) are left alone. Sources whose layers are in memory do nothing (the
  // default). A kind holds at most kMaxMatricesHeld of a layer's matrices at once (a MoE
  // layer's routed experts, acquired through acquire_experts, aside).
  static constexpr int32_t kMaxMatricesHeld = 4;
  virtual Status acquire_matrices(int32_t layer, std::span<const kernels::WeightMatrix* const> ms) { return {}; }
  virtual void release_matrices(int32_t layer, std::span<const kernels::WeightMatrix* const> ms) {}
  // Row pieces: a streamed layer whose matrices stream as row ranges (pieces of at most
  // WeightResidencyOptions::row_piece_bytes). row_pieces(layer, m): how many pieces matrix m
  // of layer `layer` streams in (>= 1), or 0 when it is acquired whole (acquire_matrices; a
  // layer in memory, a matrix that is not the layer's; the default). When it is > 0,
  // StepContext::matmul_multi runs the matmul piece by piece, in stream order: for each
  // matrix of the call in turn, acquire_row_piece(layer, m, j) for j = 0..n-1, one piece
  // held at a time. The view holds rows [*first_row, *first_row + view.rows) of m (its
  // `data` in staging, its layout m's) and is valid until release_row_piece(layer, m, j).
  // An Error names the file when a read failed (nothing is then held).
  virtual int32_t row_pieces(int32_t layer, const kernels::WeightMatrix* m) const { return 0; }
  virtual Result<kernels::WeightMatrix> acquire_row_piece(int32_t layer, const kernels::WeightMatrix* m, int32_t j,
                                                          int64_t* first_row) {
    return Error{fmt::format("layer {}: this weight source streams no row pieces", layer)};
  }
  virtual void release_row_piece(int32_t layer, const kernels::WeightMatrix* m, int32_t j) {}
  // The token embeddings' type and shape; `data` may be null when the table stays on disk
  // (read its rows through embedding_row).
  virtual const kernels::WeightMatrix& token_embedding() const = 0;
  virtual const kernels::WeightMatrix& output() const = 0;
  // Token `id`'s embedding row (row_bytes(type, cols) of token_embedding(), the file's
  // layout): a pointer into memory, or into `scratch` (that many bytes) after a read or a
  // copy out of a Tiled table. An Error names the file when the read fails. Engine thread.
  virtual Result<const uint8_t*> embedding_row(int32_t id, uint8_t* scratch) const {
    const kernels::WeightMatrix& m = token_embedding();
    if (m.layout == kernels::WeightLayout::Tiled) {  // a tied float output matrix, retiled
      kernels::read_tiled_row(m.type, m.data, m.rows, m.cols, id, scratch);
      return scratch;
    }
    return static_cast<const uint8_t*>(m.data) + int64_t{id} * kernels::row_bytes(m.type, m.cols);
  }
};

// The routed experts `experts` of `block` (layer `layer`), when the block holds all of them
// (the model's own bindings, or a whole-layer unit): one view per id, in order.
inline Result<std::vector<const ExpertWeights*>> experts_of_block(const BlockWeights& block, int32_t layer,
                                                                  std::span<const int32_t> experts) {
  const auto* moe = std::get_if<MoeFfnWeights>(&block.ffn);
  if (!moe) return Error{fmt::format("layer {} has no routed experts ({} requested)", layer, experts.size())};
  std::vector<const ExpertWeights*> out;
  out.reserve(experts.size());
  for (const int32_t e : experts) {
    if (e < 0 || e >= static_cast<int32_t>(moe->experts.size())) {
      return Error{fmt::format("layer {}: expert {} out of range ({} experts)", layer, e, moe->experts.size())};
    }
    out.push_back(&moe->experts[e]);
  }
  return out;
}

// The model's weights as mapped from its file: every layer always available.
class MappedWeights final : public LayerWeightSource {
 public:
  explicit MappedWeights(const Model& model) : model_(model) {}
  Result<const BlockWeights*> acquire_layer(int32_t layer) override {
    return &model_.layers()[layer];
  }
  Result<std::vector<const ExpertWeights*>> acquire_experts(int32_t layer,
                                                           std::span<const int32_t> experts) override {
    return experts_of_block(model_.layers()[layer], layer, experts);
  }
  void release_layer(int32_t) override {}
  const kernels::WeightMatrix& token_embedding() const override { return model_.token_embedding(); }
  const kernels::WeightMatrix& output() const override { return model_.output(); }

 private:
  const Model& model_;
};

}  // namespace spillway::engine
