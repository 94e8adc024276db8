// The vector exp of the AVX-512 kernel files (ops_avx512.cpp: softmax, SiLU;
// exp_sum_avx512.cpp: exp_scaled_sum), one polynomial with the low clamp and the 2^n step as
// parameters. Only for *_avx512.cpp files, after kernels/avx512_target.h; static inline, so
// no baseline code can link to it (README.md, "Rules for SIMD files").
#pragma once

#include "kernels/avx512_target.h"

namespace spillway::kernels {

// e^x on 16 lanes: x clamped to [kLo, 88.72283] (kLo = Clamp::kLo, a static constexpr float in
// [-104, 0]), n = round-half-even(x log2 e), r = x - n ln2 (ln2 in two parts, Cody-Waite),
// Cephes' polynomial p(r), then p * 2^n; 0 where x < kLo (and for -inf), +inf where
// x > 88.72283, NaN kept. The 2^n step:
// - kScalef: vscalefps, one instruction (the row operations, kLo = -87.336544, the smallest
//   normal result);
// - otherwise two exact power-of-two factors 2^(n >> 1) * 2^(n - (n >> 1)), the operations of
//   the scalar exp_poly (exp_sum.h) and of exp8_clamped (exp_poly_avx2.h): with kLo = -104
//   each lane equals exp_poly bit for bit.
// kLo is a constant of a type, not a function argument: the vector constants then fold before
// GCC decides what to inline (as a function argument, ops_avx512.cpp's attention inlined
// other helpers than with the polynomial written in place); not a float template argument:
// clang 14 (the fuzz build) has none.
// kNonPositive: the caller guarantees x <= 0 or NaN (a score less its row's maximum); the
// same value for every such x without the upper clamp and the NaN handling (vmaxps(lo, x)
// returns x where x is NaN, and NaN stays NaN through the polynomial). Pure: no state, any
// thread.
template <class Clamp, bool kScalef, bool kNonPositive = false>
static inline __m512 exp16_clamped(__m512 x) {
  const __m512 vlo = _mm512_set1_ps(Clamp::kLo), vhi = _mm512_set1_ps(88.72283f);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, vlo, _CMP_LT_OQ);
  const __m512 xc = kNonPositive ? _mm512_max_ps(vlo, x) : _mm512_min_ps(_mm512_max_ps(x, vlo), vhi);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  __m512 result;
  if constexpr (kScalef) {
    result = _mm512_scalef_ps(p, n);
  } else {
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const __m512 f2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    result = _mm512_mul_ps(_mm512_mul_ps(p, f1), f2);
  }
  result = _mm512_mask_mov_ps(result, too_small, _mm512_setzero_ps());
  if constexpr (kNonPositive) return result;
  const __mmask16 too_large = _mm512_cmp_ps_mask(x, vhi, _CMP_GT_OQ);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  result = _mm512_mask_mov_ps(result, too_large, _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_mov_ps(result, is_nan, x);
}

}  // namespace spillway::kernels
