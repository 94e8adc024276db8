// The kernel API the engine calls: pure functions on pointers and shapes.
//
// Contracts for every function here:
// - no allocation, no logging, no exceptions; callers pass scratch memory;
// - row-major float32 activations unless stated otherwise;
// - each call dispatches to the best implementation for this CPU (Isa), chosen once
//   at first use; kernels_for(isa) exposes every implementation for tests/benches;
// - the scalar implementation is the reference every SIMD variant is tested against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu_features.h"
#include "kernels/dtype.h"

namespace spillway::kernels {

class ThreadPool;

// ---- conversions ------------------------------------------------------------------
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);   // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);   // round to nearest even

// dst[0..n) = row of n elements of type t starting at src (n multiple of block_elems).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Reference quantizer (as ggml's *_ref): src[0..n) -> row of type t. Used to write models.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// ---- matrix multiply ----------------------------------------------------------------
// How a weight matrix's bytes are arranged.
enum class WeightLayout : uint8_t {
  Rows,     // as stored in a model file: row r at data + r * row_bytes(type, cols)
  Tiles16,  // Q8_0 / Q4_0 only: row-interleaved tiles of 16 rows, the remaining rows
            // row-major after them; the same number of bytes (kernels/kernel_table.h)
};

// A weight matrix: `rows` rows of `cols` elements each. cols is a multiple of
// block_elems(type). Both layouts give bit-identical matmul results.
struct WeightMatrix {
  DType type = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;  // output features (n)
  int64_t cols = 0;  // input features (k)
  WeightLayout layout = WeightLayout::Rows;
};

// True for the types with a Tiles16 layout (Q8_0, Q4_0): the ones matmul runs fastest on
// once retiled (prefill, batched decode and decode all read the tiles directly).
bool has_tiled_layout(DType t);
// Scratch bytes retile_in_place needs for rows of `cols` elements of type t.
size_t retile_scratch_bytes(DType t, int64_t cols);
// Rewrites `rows` row-major rows of type t at data into the Tiles16 layout in place (the byte
// count is unchanged). t must have a tiled layout. scratch: retile_scratch_bytes(t, cols).
// Single-threaded, no allocation.
void retile_in_place(DType t, void* data, int64_t rows, int64_t cols, void* scratch);

// Bytes of scratch matmul() needs for m activation rows against a weight of this shape
// (e.g. activations quantized to int8 blocks for quantized weights).
size_t matmul_scratch_bytes(const WeightMatrix& w, int64_t m);

// y[i, j] = sum_k x[i, k] * W[j, k] for i < m, j < w.rows.
// x: [m, w.cols] contiguous; y: [m, w.rows] contiguous. Splits work over the pool's
// threads; the calling thread takes part. scratch: matmul_scratch_bytes(w, m) bytes,
// 64-byte aligned.
void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, void* scratch,
            ThreadPool& pool);

// ---- row operations (one row, single thread) ---------------------------------------
// y = x / sqrt(mean(x^2) + eps) * weight     (weight may be nullptr: no scale). y may alias x.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);
// x = softmax(x) in place, numerically stable (max subtracted).
void softmax(float* x, int64_t n);
// out = silu(gate) * up, elementwise. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// y += x
void add_inplace(float* y, const float* x, int64_t n);

// ---- rotary position embedding ------------------------------------------------------
enum class RopeStyle {
  Interleaved,  // GGUF "NORM" (llama): rotate pairs (2i, 2i+1)
  HalfSplit,    // "NEOX" (qwen2/3, HF llama): rotate pairs (i, i + rot_dim/2)
};
// Rotates the first rot_dim dims of each of n_heads heads of x ([n_heads, head_dim])
// for token position pos: theta_i = pos * freq_scale * base^(-2i/rot_dim) / freq_factors[i]
// (freq_factors: rot_dim/2 values or nullptr = all 1; llama3 rope scaling provides them).
void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, float freq_base,
          float freq_scale, const float* freq_factors, RopeStyle style);

// ---- attention over a paged KV cache ------------------------------------------------
// One layer's K (or V) cache: blocks of block_size tokens; token t of a sequence lives in
// block block_table[t / block_size] at row t % block_size. Element (token row, kv head h,
// dim d) is at data[block * block_stride + row * token_stride + h * head_dim + d].
// type is F32 or F16.
struct KvView {
  DType type = DType::F16;
  const void* data = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int64_t block_stride = 0;  // elements
  int64_t token_stride = 0;  // elements
};

// For the n_group query heads that share kv head kv_head (GQA), attend over context
// positions [0, n_ctx): out[g, :] = softmax(scale * q[g]·K[t]) · V[t].
// q, out: [n_group, head_dim]; scratch: n_ctx floats.
void attention(const float* q, int n_group, int head_dim, const KvView& k, const KvView& v,
               int kv_head, int64_t n_ctx, float scale, float* out, float* scratch);

// ---- per-ISA tables (tests and benches) ---------------------------------------------
struct KernelTable;  // defined in kernels/kernel_table.h
const KernelTable& kernels_for(Isa isa);  // isa must be in supported_isas()

}  // namespace spillway::kernels
