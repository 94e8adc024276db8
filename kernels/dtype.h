// Tensor element types, numbered as GGUF's ggml_type so a GGUF tensor info maps 1:1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spillway::kernels {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

// Quant block geometry (see ggml-common.h for the layouts):
//   Q8_0: 32 elems, {f16 d; int8 qs[32]}                                   = 34 bytes
//   Q4_0: 32 elems, {f16 d; uint8 qs[16]} (low nibbles elems 0-15, high 16-31, value = (q-8)*d) = 18 bytes
//   Q4_1: 32 elems, {f16 d, m; uint8 qs[16]} (value = q*d + m)             = 20 bytes
//   Q5_0: 32 elems, {f16 d; uint8 qh[4]; uint8 qs[16]} (value = (q-16)*d)   = 22 bytes
//   Q5_1: 32 elems, {f16 d, m; uint8 qh[4]; uint8 qs[16]} (value = q*d + m) = 24 bytes
//   Q2_K: 256 elems, {uint8 scales[16]; uint8 qs[64]; f16 d, dmin}          = 84 bytes
//   Q3_K: 256 elems, {uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; f16 d} = 110 bytes
//   Q4_K: 256 elems, {f16 d, dmin; uint8 scales[12]; uint8 qs[128]}         = 144 bytes
//   Q5_K: 256 elems, {f16 d, dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]} = 176 bytes
//   Q6_K: 256 elems, {uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d} = 210 bytes
constexpr int64_t kQK8_0 = 32, kQK4_0 = 32, kQK4_1 = 32, kQK5_0 = 32, kQK5_1 = 32, kQK_K = 256;

// True for the types the kernels implement; a GGUF with any other type is rejected at load.
bool is_supported(uint32_t ggml_type);
std::string_view dtype_name(DType t);
int64_t block_elems(DType t);   // elements per block (1 for F32/F16/BF16)
int64_t block_bytes(DType t);   // bytes per block
// Bytes of a row of n elements; n must be a multiple of block_elems(t).
inline int64_t row_bytes(DType t, int64_t n) { return n / block_elems(t) * block_bytes(t); }

}  // namespace spillway::kernels
