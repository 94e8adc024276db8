// AVX-512: exp_scaled_sum (exp_sum.h), 16 floats per exp, the sum in 16 double lanes (two
// 8-lane accumulators). Every operation of exp16 is the one exp_poly (kernels_scalar.cpp)
// performs per element, so the outputs and the sum are bit-identical to the scalar reference.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"
#include "kernels/ops/exp_poly_avx512.h"

namespace spillway::kernels {

namespace {

// exp_poly on 16 lanes (its clamp: 0 below -104; 2^n not by vscalefps: the operations of
// the scalar and AVX2 code).
struct ExpPolyClamp {
  static constexpr float kLo = -104.0f;
};
inline __m512 exp16(__m512 x) { return exp16_clamped<ExpPolyClamp, false>(x); }

template <bool kStore>
double exp_scaled_sum_avx512_impl(const float* x, float shift, float scale, float* out, int64_t n) {
  const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
  // lo: lanes 0-7 of the contract's 16, hi: lanes 8-15.
  __m512d lo = _mm512_setzero_pd(), hi = lo;
  auto add = [&](__m512 e) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  };
  // Plain loads and stores for full vectors (masked ones were 2x slower on rows read from
  // memory), a masked tail.
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs), vk));
    if constexpr (kStore) _mm512_storeu_ps(out + i, e);
    add(e);
  }
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    // Lanes past n: -inf, exp 0, add +0.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), k, x + i);
    const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(v, vs), vk));
    if constexpr (kStore) _mm512_mask_storeu_ps(out + i, k, e);
    add(e);
  }
  // s8 = lanes l and l + 8; s4 = s8[l] + s8[l + 4]; s2 = s4[l] + s4[l + 2]; s2[0] + s2[1].
  const __m512d s8 = _mm512_add_pd(lo, hi);
  const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), _mm512_extractf64x4_pd(s8, 1));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

double exp_scaled_sum_avx512(const float* x, float shift, float scale, float* out, int64_t n) {
  return out ? exp_scaled_sum_avx512_impl<true>(x, shift, scale, out, n)
             : exp_scaled_sum_avx512_impl<false>(x, shift, scale, out, n);
}

}  // namespace

void add_avx512_exp_kernels(KernelTable& t) { t.exp_scaled_sum = exp_scaled_sum_avx512; }

}  // namespace spillway::kernels
