// Quant block layouts (bit-compatible with ggml's block_* structs) and small helpers
// shared by the scalar and SIMD kernels. Internal to kernels/.
//
// Every helper here is `static inline` on purpose: this header is included by files
// compiled with AVX2 / AVX-512 flags, and a non-static inline function would be emitted
// once per translation unit with different instructions, letting the linker pick an
// AVX-512 copy for the baseline code.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace spillway::kernels {

// Weights: Q8_0, and the activation blocks dotted against Q8_0 / Q4_0 weights.
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];
};
// Weights: value = (q - 8) * d; low nibbles are elements 0-15, high nibbles 16-31.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
// Weights: 8 sub-blocks of 32, value = d * sc[j] * q - dmin * m[j]; sc/m are 6-bit,
// packed in scales[12] (see q4k_scale_min); qs[32*c + l] holds element l of sub-block 2c
// in the low nibble and of sub-block 2c+1 in the high nibble.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// Weights: 16 groups of 16, value = d * scales[g] * (q - 32), q 6-bit: low 4 bits in ql,
// high 2 bits in qh (layout in q6k_quant).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Activations dotted against Q4_K / Q6_K weights: value = d * qs; bsums[g] = sum of the
// 16 quants of group g.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Sub-block j (0..7) of a Q4_K block: 6-bit scale and min.
static inline void q4k_scale_min(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// All 8 scales (bytes 0-7 of *sc) and mins (bytes 0-7 of *m) of a Q4_K block at once.
static inline void q4k_scales_mins(const uint8_t* scales, uint8_t sc[8], uint8_t m[8]) {
  uint32_t a, b, c;
  __builtin_memcpy(&a, scales, 4);
  __builtin_memcpy(&b, scales + 4, 4);
  __builtin_memcpy(&c, scales + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | (((b >> 6) & 0x03030303u) << 4);
  __builtin_memcpy(sc, &sc_lo, 4);
  __builtin_memcpy(sc + 4, &sc_hi, 4);
  __builtin_memcpy(m, &m_lo, 4);
  __builtin_memcpy(m + 4, &m_hi, 4);
}

// Unsigned 6-bit quant (0..63) of element i (0..255) of a Q6_K block.
static inline int q6k_quant(const BlockQ6_K& b, int i) {
  const int half = i / 128, r = i % 128;  // 128-element halves use ql[64*half], qh[32*half]
  const int quarter = r / 32, l = r % 32;   // quarter 0..3 within the half
  const uint8_t* ql = b.ql + 64 * half;
  const uint8_t* qh = b.qh + 32 * half;
  const int low = (quarter & 1) ? ql[l + 32] : ql[l];
  const int low4 = (quarter < 2) ? (low & 0x0F) : (low >> 4);
  const int high2 = (qh[l] >> (2 * quarter)) & 3;
  return low4 | (high2 << 4);
}

}  // namespace spillway::kernels
