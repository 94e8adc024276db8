// One implementation of every dispatched kernel per instruction-set level.
//
// kernels_for(isa) returns the table; the public functions in kernels.h call the table of
// active_isa(). Tests compare each table against kernels_for(Isa::Scalar); benches time
// each one. Tables are immutable, built once, and valid for the whole process.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace spillway::kernels {

// Weight types matmul supports, as a dense index for the dot table.
enum class WeightSlot : int { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Count };
constexpr int kWeightSlots = static_cast<int>(WeightSlot::Count);
WeightSlot weight_slot(DType t);

// How matmul presents activations to the dot kernels of a weight type.
enum class ActivationFormat {
  F32,   // the caller's fp32 rows as they are
  Q8_0,  // rows of BlockQ8_0 (32 values, fp16 d = amax/127), for Q8_0 / Q4_0 weights
  Q8_K,  // rows of BlockQ8_K (256 values, float d, int16 bsums), for Q4_K / Q6_K weights
};
ActivationFormat activation_format(DType t);
// Bytes of one activation row of `cols` values in the format (0 for F32: no copy).
size_t activation_row_bytes(ActivationFormat f, int64_t cols);
// Row stride used in the scratch: activation_row_bytes rounded up to 64.
size_t activation_row_stride(ActivationFormat f, int64_t cols);

// Most activation rows one dot call handles; the weight row is decoded once for all.
constexpr int kMaxDotRows = 4;

// y[i * y_stride] = w_row · x_i for i < nx (1 <= nx <= kMaxDotRows), where x_i is the
// activation row at x + i * x_stride bytes, in activation_format(weight type); cols values.
using DotRowsFn = void (*)(const void* w_row, const void* x, size_t x_stride, int nx,
                           int64_t cols, float* y, size_t y_stride);
// n values -> activation blocks. Every ISA's quantizer gives bit-identical output.
using QuantizeActivationsFn = void (*)(const float* x, void* dst, int64_t n);

struct KernelTable {
  Isa isa = Isa::Scalar;
  QuantizeActivationsFn quantize_q8_0 = nullptr;  // n multiple of 32
  QuantizeActivationsFn quantize_q8_K = nullptr;  // n multiple of 256
  DotRowsFn dot[kWeightSlots] = {};

  void (*rms_norm)(const float* x, const float* weight, float* y, int64_t n, float eps) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  void (*add_inplace)(float* y, const float* x, int64_t n) = nullptr;
  // Rotates with a precomputed table: cos_sin[2i], cos_sin[2i+1] = cos, sin of theta_i
  // for i < rot_dim / 2 (rope_table below).
  void (*rope)(float* x, int n_heads, int head_dim, int rot_dim, const float* cos_sin,
               RopeStyle style) = nullptr;
  void (*attention)(const float* q, int n_group, int head_dim, const KvView& k, const KvView& v,
                    int kv_head, int64_t n_ctx, float scale, float* out, float* scratch) = nullptr;
};

// matmul() on a given table (the public matmul uses the active one).
void matmul(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
            void* scratch, ThreadPool& pool);

// Largest rot_dim rope() accepts (its angle table lives on the stack).
constexpr int kMaxRopeDim = 1024;
// cos_sin[2i], cos_sin[2i+1] for i < rot_dim / 2, computed as llama.cpp does: theta
// starts at pos and is multiplied by base^(-2/rot_dim) per pair, then divided by
// freq_factors[i] and multiplied by freq_scale.
void rope_table(int rot_dim, int64_t pos, float freq_base, float freq_scale,
                const float* freq_factors, float* cos_sin);

// Per-ISA tables, defined in kernels_scalar.cpp, kernels_avx2.cpp, kernels_avx512.cpp.
const KernelTable& scalar_kernel_table();
const KernelTable& avx2_kernel_table();
const KernelTable& avx512_kernel_table();

}  // namespace spillway::kernels
