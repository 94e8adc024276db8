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
// y[i] = fp32_to_fp16(x[i]) for i < n (dispatched; bit-identical on every ISA).
void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n);

// dst[0..n) = row of n elements of type t starting at src (n multiple of block_elems).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Reference quantizer (as ggml's *_ref): src[0..n) -> row of type t. Used to write models.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// ---- matrix multiply ----------------------------------------------------------------
// How a weight matrix's bytes are arranged.
enum class WeightLayout : uint8_t {
  Rows,   // as stored in a model file: row r at data + r * row_bytes(type, cols)
  Tiled,  // the type's row-interleaved tiles (kernels/kernel_table.h): Q8_0 / Q4_0 / Q4_K /
          // Q5_K / Q6_K tiles of 16 rows, F32 / F16 / BF16 groups of 4 rows interleaved every 16 values; the rows
          // after the last full tile stay row-major after the tiles. Same number of bytes.
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

// True when a matrix of type t and width cols has a Tiled layout (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; F32, F16,
// BF16 when cols is a multiple of 16). matmul streams tiles as one sequential run of memory
// (decode) and reads them with fewer cache misses (prefill, batched decode).
bool has_tiled_layout(DType t, int64_t cols);
// Scratch bytes retile_in_place needs for rows of `cols` elements of type t.
size_t retile_scratch_bytes(DType t, int64_t cols);
// Rewrites `rows` row-major rows of type t at data into the Tiled layout in place (the byte
// count is unchanged). has_tiled_layout(t, cols) must hold. scratch: retile_scratch_bytes.
// Single-threaded, no allocation.
void retile_in_place(DType t, void* data, int64_t rows, int64_t cols, void* scratch);
// True for the weight types whose Tiled rows read_tiled_row can copy out (F32, F16, BF16).
bool tiled_rows_readable(DType t);
// Row r of a Tiled matrix of `rows` x `cols` values of type t (tiled_rows_readable(t)) at
// data, in the row-major layout: row_bytes(t, cols) bytes to out. For a tied output matrix,
// which the embedding lookup reads by row.
void read_tiled_row(DType t, const void* data, int64_t rows, int64_t cols, int64_t r, void* out);

// Bytes of scratch matmul() needs for m activation rows against a weight of this shape
// (e.g. activations quantized to int8 blocks for quantized weights).
size_t matmul_scratch_bytes(const WeightMatrix& w, int64_t m);

// y[i, j] = sum_k x[i, k] * W[j, k] for i < m, j < w.rows.
// x: [m, w.cols] contiguous; y: [m, w.rows] contiguous. Splits work over the pool's
// threads; the calling thread takes part. scratch: matmul_scratch_bytes(w, m) bytes,
// 64-byte aligned.
void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, void* scratch,
            ThreadPool& pool);

// Writes activation row `row` of a matmul's input before matmul reads it (e.g. the RMSNorm
// or SwiGLU producing it), fused into the pass that quantizes the rows for quantized weights
// so each row is still in L1 when it is quantized. Called once per row, on any pool thread.
struct RowPrologue {
  void (*fn)(void* ctx, int64_t row) = nullptr;
  void* ctx = nullptr;
};

// matmul of several weight matrices that share the input x (e.g. Q, K and V): ys[j] =
// x W_j^T, with the activations quantized once and the work of all of them spread over the
// pool in one pass. Types whose dots read the same activation bytes share that pass (Q4_K
// with Q6_K, any float type beside quantized ones at m = 1); otherwise (Q8_0 with Q4_0,
// different widths) the matrices run one after the other.
// scratch: the largest matmul_scratch_bytes of them. Each ys[j] is what matmul would give.
// prologue (optional) produces the rows of x first.
void matmul_multi(std::span<const WeightMatrix* const> ws, const float* x, int64_t m,
                  std::span<float* const> ys, void* scratch, ThreadPool& pool,
                  RowPrologue prologue = {});

// ---- row operations (one row, single thread) ---------------------------------------
// y = x / sqrt(mean(x^2) + eps) * weight     (weight may be nullptr: no scale). y may alias x.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);
// x = softmax(x) in place, numerically stable (max subtracted).
void softmax(float* x, int64_t n);
// out = silu(gate) * up, elementwise. out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// y += x
void add_inplace(float* y, const float* x, int64_t n);
// A causal depthwise convolution and SiLU for one token, channels [c0, c1) of C:
//   out[ch] = silu(((0 + taps[ch] * rows[0][ch]) + taps[C + ch] * rows[1][ch]) + ... K terms)
// taps: [K][C]; rows: the token's K window rows, oldest first. Each product is rounded and
// added in tap order (no fused multiply-add); silu as silu_mul's with up = 1. out (indexed by
// ch, like the rows) must not alias a window row.
void conv_silu(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1, float* out);

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
// block block_table[t / block_size] at row t % block_size. Element (row r, kv head h, dim d)
// is at data[block * block_stride + r * token_stride + h * head_stride + d * dim_stride].
// type is F32 or F16. The engine keeps V row-major (dim_stride 1) and K transposed inside
// each block and head (token_stride 1, dim_stride block_size), so that attention reads one
// dim of consecutive keys as a vector; any strides work.
struct KvView {
  DType type = DType::F16;
  const void* data = nullptr;
  const int32_t* block_table = nullptr;
  int32_t block_size = 0;
  int64_t block_stride = 0;  // elements
  int64_t token_stride = 0;  // elements
  int64_t head_stride = 0;   // elements
  int64_t dim_stride = 1;    // elements
};

// Attention of n_tokens (1..kAttentionMaxTokens) query tokens of one sequence with the
// n_group query heads that share kv head kv_head (GQA: K and V are read once for all of
// them). Query j attends the key range [0, key_counts[j]) (key_counts[j] >= 1):
// out[j][g] = softmax(scale * q[j][g] . K[t]) . V over that range. Causal attention is
// key_counts[j] = position of token j + 1; a diffusion canvas gives every row of the canvas
// the canvas end.
// q: token j's heads [n_group, head_dim] at q + j * q_stride floats; out likewise with
// out_stride. scratch: attention_scratch_floats(n_tokens, n_group, max_j key_counts[j]).
// The arithmetic of one (token, head) does not depend on n_tokens or n_group:
// score_t = (fma over d in increasing order of q[d] * k_t[d], from 0) * scale; then the
// scalar reference takes p_t = softmax(score)_t and out = fma over t in increasing order of
// p_t * v_t, from 0; the SIMD kernels take e_t = exp(score_t - max) and out = (fma over t in
// increasing order of e_t * v_t, from 0) * (1 / sum_t e_t), one multiply per output instead
// of one per key (within rounding of the reference). So a token's output is the same
// whichever tokens are computed with it (batched or alone, prefill chunked or not).
constexpr int kAttentionMaxTokens = 8;
size_t attention_scratch_floats(int n_tokens, int n_group, int64_t n_ctx);
void attention(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim,
               const KvView& k, const KvView& v, int kv_head, const int64_t* key_counts, float scale,
               float* out, size_t out_stride, float* scratch);

// ---- gated delta net (linear-attention recurrence of hybrid models) ----------------------
// One value head of one sequence over n_tokens consecutive tokens. The state S is [dk][dv]
// (row i = key index, column c = value index), f32. Per token t, with e = expf(g_t):
//   S = e * S;  d = beta_t * (v_t - S^T k_t);  S = S + k_t d^T;  out_t = (S^T q_t) * scale.
// q_t, k_t (dk values, already L2-normalised) at q / k + t * qk_stride; v_t (dv) at
// v + t * v_stride; g_t, beta_t at g / beta + t * gb_stride; out_t (dv) at out + t * out_stride.
// state_in: the state before the first token (nullptr: zero); state_out: the state after the
// last one (may equal state_in; must not overlap it otherwise).
// Every implementation computes each column c in this order, so all ISAs give the same bits
// and a token's result does not depend on how the tokens were split into calls:
//   pass 1, i = 0..dk-1 increasing: S[i][c] = S[i][c] * e; sk = fma(S[i][c], k[i], sk) from 0;
//   d = beta * (v[c] - sk);
//   pass 2, i increasing: S[i][c] = fma(k[i], d, S[i][c]); o = fma(S[i][c], q[i], o) from 0;
//   out[c] = o * scale.
struct GatedDeltaNetArgs {
  const float* state_in = nullptr;
  float* state_out = nullptr;
  int dk = 0, dv = 0;
  int n_tokens = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  size_t qk_stride = 0;  // floats
  const float* v = nullptr;
  size_t v_stride = 0;
  const float* g = nullptr;     // log-decay (<= 0)
  const float* beta = nullptr;  // write strength in (0, 1)
  size_t gb_stride = 0;
  float scale = 1.0f;
  float* out = nullptr;
  size_t out_stride = 0;
};
void gated_delta_net(const GatedDeltaNetArgs& args);

// ---- per-ISA tables (tests and benches) ---------------------------------------------
struct KernelTable;  // defined in kernels/kernel_table.h
const KernelTable& kernels_for(Isa isa);  // isa must be in supported_isas()

}  // namespace spillway::kernels
