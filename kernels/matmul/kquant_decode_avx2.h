// Decoding the K-quant tiles' packed fields on AVX2, shared by the tile kernels (dot_avx2.cpp)
// and the unpacking of kquant_unpacked_avx2.cpp. Only for *_avx2.cpp files; static inline, so
// no baseline code can link to it (README.md, "Rules for SIMD files"). Tile layouts:
// kernel_table.h ("K-quant tiles"); hb = 0 for rows 0-7, 32 for rows 8-15.
#pragma once

#if !defined(__AVX2__)
#error "kernels/matmul/kquant_decode_avx2.h: only for *_avx2.cpp files (compiled with -mavx2)"
#endif

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace spillway::kernels {

// Q6_K: codes (q + 32, 0..63) from 32 bytes each of ql (two) and qh, bytes at the same
// positions: code[k] = bits of ql0 (k = 0, 2: low, high nibble) or ql1 (k = 1, 3) with bits
// 2k, 2k + 1 of qh. In a tile, ql0 / ql1 are the ql units 8 (2 h) + l4 and 8 (2 h + 1) + l4 and
// qh the unit 8 h + l4, so code[k] holds values 128 h + 32 k + 4 l4 .. + 3 of each row (group
// 8 h + 2 k + l4 / 4); in ggml's row-major block, ql + 64 h, ql + 64 h + 32 and qh + 32 h give
// values 128 h + 32 k + 0..31.
static inline void q6k_decode_codes(__m256i ql0, __m256i ql1, __m256i qh, __m256i code[4]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30);
  code[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h));
  code[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h));
  code[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2h));
  code[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h));
}

// Q4_K / Q5_K: the 6-bit scales and mins of 8 rows, one byte per sub-block j in each row's
// lane: sc_lo / m_lo bytes j = 0..3, sc_hi / m_hi bytes j = 4..7.
struct Q45kScales {
  __m256i sc_lo, sc_hi, m_lo, m_hi;
};
static inline Q45kScales q45k_decode_scales(const uint8_t* block, size_t hb) {
  const __m256i m6 = _mm256_set1_epi32(0x3F3F3F3F), m4 = _mm256_set1_epi32(0x0F0F0F0F);
  const __m256i m2 = _mm256_set1_epi32(0x03030303);
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 + hb));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 128 + hb));
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 192 + hb));
  return {_mm256_and_si256(a, m6),
          _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a, 6), m2), 4)),
          _mm256_and_si256(b, m6),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), m4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(b, 6), m2), 4))};
}

// Byte j (0-3) of each 32-bit lane of v as an int16 row pair (v_j, v_j), for vpmaddwd (e.g. a
// sub-block's scale of 8 rows from Q45kScales::sc_lo / sc_hi).
static inline __m256i byte_row_pair(__m256i v, int j) {
  const char a = char(j), z = char(0x80);
  const __m128i pick = _mm_setr_epi8(a, z, a, z, char(a + 4), z, char(a + 4), z, char(a + 8), z, char(a + 8), z,
                                     char(a + 12), z, char(a + 12), z);
  return _mm256_shuffle_epi8(v, _mm256_set_m128i(pick, pick));
}

// The mins as int16 row pairs (m_0, m_2), (m_1, m_3), (m_4, m_6), (m_5, m_7): vpmaddwd against
// the activation's 32-value sums paired the same way gives sum_j m_j bsum_j.
static inline void q45k_min_pairs(const Q45kScales& s, __m256i mins[4]) {
  const __m256i w16 = _mm256_set1_epi32(0x00FF00FF);
  mins[0] = _mm256_and_si256(s.m_lo, w16);
  mins[1] = _mm256_and_si256(_mm256_srli_epi32(s.m_lo, 8), w16);
  mins[2] = _mm256_and_si256(s.m_hi, w16);
  mins[3] = _mm256_and_si256(_mm256_srli_epi32(s.m_hi, 8), w16);
}

// sum_j m_j bsum_j per row lane from the mins' row pairs (q45k_min_pairs, or the unpacked
// copy of them), bsum_j the activation's 32-value sums: its 16 16-value sums added in pairs
// (no overflow: |bsum_j| <= 32 x 127) and ordered as the mins' pairs (0,2) (1,3) (4,6) (5,7).
static inline __m256i q45k_sum_mins(const __m256i mins[4], const int16_t bsums16[16]) {
  const __m128i pair_order = _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  const __m128i sums = _mm_shuffle_epi8(_mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums16)),
                                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums16 + 8))),
                                        pair_order);
  const __m256i all = _mm256_broadcastsi128_si256(sums);
  return _mm256_add_epi32(
      _mm256_add_epi32(_mm256_madd_epi16(mins[0], _mm256_shuffle_epi32(all, 0x00)), _mm256_madd_epi16(mins[1], _mm256_shuffle_epi32(all, 0x55))),
      _mm256_add_epi32(_mm256_madd_epi16(mins[2], _mm256_shuffle_epi32(all, 0xAA)), _mm256_madd_epi16(mins[3], _mm256_shuffle_epi32(all, 0xFF))));
}

// Q4_K / Q5_K: the codes of sub-blocks 2 c (lo) and 2 c + 1 (hi) from a qs unit v (and for
// Q5_K the qh unit h of the same quad).
template <bool kQ5>
static inline void q45k_decode_codes(__m256i v, __m256i h, int c, __m256i& lo, __m256i& hi) {
  const __m256i low = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  lo = _mm256_and_si256(v, low);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
  if constexpr (kQ5) {
    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4));
    hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4));
  }
}

}  // namespace spillway::kernels
