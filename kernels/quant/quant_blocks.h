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
// Weights: value = q * d + m; low nibbles are elements 0-15, high nibbles 16-31.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
// Weights: value = (q - 16) * d, q 5-bit: low 4 bits as Q4_0's nibbles, bit 4 of element j
// is bit j of the little-endian word qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
// Weights: value = q * d + m, q as Q5_0's.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
// Weights: 16 groups of 16, value = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4), q 2-bit:
// element 128h + 32j + l (l < 32) is bits 2j..2j+1 of qs[32h + l]; g = e / 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// Weights: 16 groups of 16, value = d * (sc[g] - 32) * (q - 4), q 3-bit: low 2 bits as Q2_K's,
// bit 2 of element 128h + 32j + l is bit 4h + j of hmask[l]; sc 6-bit (q3k_scale).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
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
// Weights: as Q4_K with 5-bit q: bit 4 of element 32j + l is bit j of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
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
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
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

// Unsigned 5-bit quant (0..31) of element j (0..31) of a Q5_0 / Q5_1 block.
static inline int q5_quant(const uint8_t* qh, const uint8_t* qs, int j) {
  uint32_t h;
  __builtin_memcpy(&h, qh, 4);
  const int low = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return low | int((h >> j) & 1) << 4;
}

// Unsigned 2-bit quant (0..3) of element e (0..255) of a Q2_K / Q3_K block's qs.
static inline int q2k_low_bits(const uint8_t* qs, int e) {
  const int h = e / 128, j = (e % 128) / 32, l = e % 32;
  return (qs[32 * h + l] >> (2 * j)) & 3;
}

// Unsigned 3-bit code (0..7) of element e of a Q3_K block: the quant is code - 4.
static inline int q3k_code(const BlockQ3_K& b, int e) {
  const int h = e / 128, j = (e % 128) / 32, l = e % 32;
  return q2k_low_bits(b.qs, e) | (((b.hmask[l] >> (4 * h + j)) & 1) << 2);
}

// Scale s (0..15) of a Q3_K block, -32..31: low 4 bits in scales[0..7] (nibble s / 8 of byte
// s % 8), high 2 bits in scales[8..11] (bits 2 (s / 4) of byte 8 + s % 4).
static inline int q3k_scale(const uint8_t* scales, int s) {
  const int low = (scales[s % 8] >> (4 * (s / 8))) & 0x0F;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Unsigned 5-bit quant (0..31) of element e (0..255) of a Q5_K block.
static inline int q5k_quant(const BlockQ5_K& b, int e) {
  const int j = e / 32, l = e % 32;
  const int low = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
  return low | (((b.qh[l] >> j) & 1) << 4);
}

}  // namespace spillway::kernels
