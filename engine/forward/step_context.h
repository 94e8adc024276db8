// What every mixer and FFN kind reads during one layer of one forward step: the batch, each
// token's sequence, position and attention key count, the thread pool and the matmul
// scratch. Owned by the ForwardPass; valid for the duration of ForwardPass::execute.
//
// Contract for a kind's run(): read the residual stream x ([n_tokens, n_embd]), apply its
// RMSNorm as the row prologue of its first matmul, and write its output to out
// ([n_tokens, n_embd]); the orchestrator adds out to x. Every row is computed independently
// of the other rows of the batch. Every matmul over the layer's weights goes through
// StepContext::matmul_multi, which acquires exactly the matrices it reads (streaming).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward/batch.h"
#include "engine/forward/profile.h"
#include "engine/residency/layer_weight_source.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {

struct StepContext {
  const ForwardBatch& batch;
  int32_t n_tokens = 0;
  const int32_t* token_sequence = nullptr;  // [n_tokens] index into batch.sequences
  const int64_t* token_position = nullptr;  // [n_tokens] position in its sequence
  const int64_t* token_key_count = nullptr; // [n_tokens] keys an attention query of it sees
  kernels::ThreadPool& pool;
  void* matmul_scratch = nullptr;           // kernels::matmul_scratch_bytes of any matmul
  ForwardProfile* profile = nullptr;        // null: not profiling

  // The layer being run and where its weights come from (set per layer by the ForwardPass;
  // layer < 0 or no source: the matrices are always in memory).
  LayerWeightSource* weights = nullptr;
  int32_t layer = -1;

  void matmul(const kernels::WeightMatrix& w, const float* x, int64_t m, float* y) const {
    kernels::matmul(w, x, m, y, matmul_scratch, pool);
  }

  // kernels::matmul_multi of a layer's matrices: acquires exactly the matrices ws from the
  // layer's weight source first (a streamed layer: waits until their bytes are in staging;
  // that wait is profiled as Weights, the matmul as `part`) and releases them after. Every
  // kind's matmul over its layer's weights goes through here: a streamed layer's matrices
  // point nowhere until acquired. An Error when a streamed matrix could not be read (the
  // outputs are then not written).
  Status matmul_multi(ForwardProfile::Part part, std::span<const kernels::WeightMatrix* const> ws, const float* x,
                      int64_t m, std::span<float* const> ys, kernels::RowPrologue prologue = {}) const {
    const bool streamed = weights && layer >= 0;
    if (streamed) {
      for (const kernels::WeightMatrix* w : ws) {
        if (weights->row_pieces(layer, w) > 0) return matmul_in_row_pieces(part, ws, x, m, ys, prologue);
      }
    }
    if (streamed) {
      Status acquired;
      timed(profile, ForwardProfile::Weights, [&] { acquired = weights->acquire_matrices(layer, ws); });
      if (!acquired.ok()) {
        weights->release_matrices(layer, ws);
        return acquired;
      }
    }
    timed(profile, part, [&] { kernels::matmul_multi(ws, x, m, ys, matmul_scratch, pool, prologue); });
    if (streamed) weights->release_matrices(layer, ws);
    return {};
  }

  // matmul_multi of a layer whose matrices stream as row pieces (LayerWeightSource::
  // row_pieces): each matrix of ws in turn, each of its pieces in turn (stream order, one
  // held at a time), computed as the matmul of that row range (kernels give every output
  // the same bits whatever the rows around it); the prologue runs with the first matmul
  // only (it writes the rows of x the later ones read). Engine thread
  // (row_pieces_matmul.cpp).
  Status matmul_in_row_pieces(ForwardProfile::Part part, std::span<const kernels::WeightMatrix* const> ws,
                              const float* x, int64_t m, std::span<float* const> ys,
                              kernels::RowPrologue prologue) const;
};

// Row prologue: out row t = RMSNorm(x row t) * weight (kernels::matmul_multi's prologue).
struct NormRows {
  const float* x;
  const float* weight;
  float* out;
  int32_t d;
  float eps;

  static void apply(void* ctx, int64_t t) {
    const auto* n = static_cast<const NormRows*>(ctx);
    kernels::rms_norm(n->x + t * n->d, n->weight, n->out + t * n->d, n->d, n->eps);
  }
};

// Elementwise work below this many values runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kSerialElements = 32 * 1024;

// fn(begin, end) over [0, n) on the pool, or inline when n * elements_per_item is small.
template <class Fn>
void parallel_for(kernels::ThreadPool& pool, int64_t n, int64_t elements_per_item, Fn&& fn) {
  if (n * elements_per_item < kSerialElements) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, fn);
}

// A float buffer aligned to 64 bytes that only grows.
class AlignedBuffer {
 public:
  void resize(size_t floats);
  float* data = nullptr;

 private:
  std::vector<float> storage_;
};

}  // namespace spillway::engine
