// StepContext::matmul_in_row_pieces: a kind's matmul over a layer whose matrices stream as
// row ranges (LayerWeightSource::row_pieces; residency/weight_residency.h,
// WeightResidencyOptions::row_piece_bytes).
//
// Outputs: every output value is the dot product of one weight row with one activation row,
// computed in the order the dot family fixes whatever the matrix's other rows, the tiling or
// m (kernels/README.md, "Numerics"), so the matmul of rows [r0, r1) gives exactly the bits of
// those columns of the whole matmul. Only the activation quantization is repeated per
// piece (the same bits each time).
#include <cstring>
#include <vector>

#include "engine/forward/step_context.h"

namespace spillway::engine {

Status StepContext::matmul_in_row_pieces(ForwardProfile::Part part, std::span<const kernels::WeightMatrix* const> ws,
                                         const float* x, int64_t m, std::span<float* const> ys,
                                         kernels::RowPrologue prologue) const {
  // [m, rows of the largest piece] floats when m > 1 (a piece's outputs, then copied into
  // their columns of y). Engine thread only.
  thread_local std::vector<float> piece_out;
  bool prologue_pending = prologue.fn != nullptr;
  auto run = [&](const kernels::WeightMatrix& w, float* y) {
    const kernels::WeightMatrix* one[] = {&w};
    float* out[] = {y};
    const kernels::RowPrologue p = prologue_pending ? prologue : kernels::RowPrologue{};
    timed(profile, part, [&] { kernels::matmul_multi(one, x, m, out, matmul_scratch, pool, p); });
    prologue_pending = false;
  };
  for (size_t i = 0; i < ws.size(); ++i) {
    const kernels::WeightMatrix& w = *ws[i];
    const int32_t n = weights->row_pieces(layer, &w);
    if (n == 0) {  // not a row piece: a whole streamed piece, or in memory (a view the kind made)
      const kernels::WeightMatrix* one[] = {&w};
      Status acquired;
      timed(profile, ForwardProfile::Weights, [&] { acquired = weights->acquire_matrices(layer, one); });
      if (!acquired.ok()) {
        weights->release_matrices(layer, one);
        return acquired;
      }
      run(w, ys[i]);
      weights->release_matrices(layer, one);
      continue;
    }
    for (int32_t j = 0; j < n; ++j) {
      int64_t first_row = 0;
      Result<kernels::WeightMatrix> piece = Error{""};
      timed(profile, ForwardProfile::Weights, [&] { piece = weights->acquire_row_piece(layer, &w, j, &first_row); });
      if (!piece) return piece.error();
      if (m == 1) {
        run(*piece, ys[i] + first_row);
      } else {
        piece_out.resize(static_cast<size_t>(m * piece->rows));
        run(*piece, piece_out.data());
        for (int64_t t = 0; t < m; ++t) {
          std::memcpy(ys[i] + t * w.rows + first_row, piece_out.data() + t * piece->rows,
                      static_cast<size_t>(piece->rows) * sizeof(float));
        }
      }
      weights->release_row_piece(layer, &w, j);
    }
  }
  return {};
}

}  // namespace spillway::engine
