// The vector exp of the AVX2 kernel files (ops_avx2.cpp: softmax, SiLU; exp_sum_avx2.cpp:
// exp_scaled_sum), one polynomial with the low clamp as a parameter. Only for *_avx2.cpp
// files (AVX2 + FMA flags); static inline, so no baseline code can link to it (README.md,
// "Rules for SIMD files").
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "kernels/ops/exp_poly_avx2.h: only for *_avx2.cpp files (compiled with -mavx2 -mfma)"
#endif

#include <immintrin.h>

#include <cmath>

namespace spillway::kernels {

// e^x on 8 lanes: x clamped to [kLo, 88.72283] (kLo = Clamp::kLo, a static constexpr float in
// [-104, 0]), n = round-half-even(x log2 e), r = x - n ln2 (ln2 in two parts, Cody-Waite),
// Cephes' polynomial p(r), then p * 2^n as two exact power-of-two factors
// 2^(n >> 1) * 2^(n - (n >> 1)) (one rounding, subnormals included); 0 where x < kLo (and for
// -inf), +inf where x > 88.72283, NaN kept. With kLo = -104 each lane equals the scalar
// exp_poly (exp_sum.h) bit for bit; -87.336544 (the smallest normal result) is the row
// operations' clamp. kLo is a constant of a type (exp_poly_avx512.h says why).
// kNonPositive: the caller guarantees x <= 0 or NaN (a score less its row's maximum); the
// same value for every such x without the upper clamp and the NaN blend (vmaxps(lo, x)
// returns x where x is NaN, and NaN stays NaN through the polynomial). Pure: no state, any
// thread.
template <class Clamp, bool kNonPositive = false>
static inline __m256 exp8_clamped(__m256 x) {
  const __m256 vlo = _mm256_set1_ps(Clamp::kLo), vhi = _mm256_set1_ps(88.72283f);
  const __m256 too_small = _mm256_cmp_ps(x, vlo, _CMP_LT_OQ);
  const __m256 xc = kNonPositive ? _mm256_max_ps(vlo, x) : _mm256_min_ps(_mm256_max_ps(x, vlo), vhi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  result = _mm256_andnot_ps(too_small, result);
  if constexpr (kNonPositive) return result;
  const __m256 too_large = _mm256_cmp_ps(x, vhi, _CMP_GT_OQ);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), too_large);
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(result, x, is_nan);
}

}  // namespace spillway::kernels
