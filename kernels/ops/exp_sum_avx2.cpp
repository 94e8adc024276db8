// AVX2 + FMA: exp_scaled_sum (exp_sum.h), 8 floats per exp, the sum in 16 double lanes.
// Every operation of exp8 is the one exp_poly (kernels_scalar.cpp) performs per element, so
// the outputs and the sum are bit-identical to the scalar reference.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

// exp_poly on 8 lanes: clamp to [-104, 88.72283], reduce, polynomial, 2^n as two exact
// power-of-two factors; then 0 below -104 (and for -inf), +inf above, NaN kept.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-104.0f), hi = _mm256_set1_ps(88.72283f);
  const __m256 too_small = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  const __m256 too_large = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
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
  // Lanes with n < -125 may round to a subnormal (a microcode assist on some cores): there
  // the second factor is 1 and the result is the round-half-even integer of the exact
  // p * 2^(n + 149), which is the bit pattern of the correctly rounded p * 2^n (as in
  // exp_sum_avx512.cpp): the bits of the scalar (p * f1) * f2.
  const __m256 sub = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(-125), ni));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, f1), _mm256_blendv_ps(f2, _mm256_set1_ps(1.0f), sub));
  if (_mm256_movemask_ps(sub)) {
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(149 + 127)), 23));
    const __m256i k = _mm256_cvtps_epi32(_mm256_mul_ps(p, scale));  // MXCSR: round half even
    result = _mm256_blendv_ps(result, _mm256_castsi256_ps(k), sub);
  }
  result = _mm256_andnot_ps(too_small, result);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), too_large);
  return _mm256_blendv_ps(result, x, is_nan);
}

// The n < 8 remaining floats, the other lanes -inf (their exp is 0: they add +0).
inline __m256 load_tail(const float* p, int64_t n) {
  alignas(32) float tmp[8];
  for (int j = 0; j < 8; ++j) tmp[j] = j < n ? p[j] : -INFINITY;
  return _mm256_load_ps(tmp);
}

template <bool kStore>
double exp_scaled_sum_avx2_impl(const float* x, float shift, float scale, float* out, int64_t n) {
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  // acc0..acc3 are lanes 0-3, 4-7, 8-11, 12-15 of the contract's 16 lanes.
  __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vk));
    const __m256 e1 = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vs), vk));
    if constexpr (kStore) {
      _mm256_storeu_ps(out + i, e0);
      _mm256_storeu_ps(out + i + 8, e1);
    }
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
    acc2 = _mm256_add_pd(acc2, _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
    acc3 = _mm256_add_pd(acc3, _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
  }
  if (i < n) {
    const int64_t left = n - i;
    const __m256 e0 = exp8(_mm256_mul_ps(_mm256_sub_ps(load_tail(x + i, left), vs), vk));
    const __m256 e1 = left > 8 ? exp8(_mm256_mul_ps(_mm256_sub_ps(load_tail(x + i + 8, left - 8), vs), vk))
                               : _mm256_setzero_ps();
    if constexpr (kStore) {
      alignas(32) float tmp[16];
      _mm256_store_ps(tmp, e0);
      _mm256_store_ps(tmp + 8, e1);
      for (int64_t j = 0; j < left; ++j) out[i + j] = tmp[j];
    }
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e0)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e0, 1)));
    acc2 = _mm256_add_pd(acc2, _mm256_cvtps_pd(_mm256_castps256_ps128(e1)));
    acc3 = _mm256_add_pd(acc3, _mm256_cvtps_pd(_mm256_extractf128_ps(e1, 1)));
  }
  // s8 = lanes l and l + 8; s4 = s8[l] + s8[l + 4]; s2 = s4[l] + s4[l + 2]; s2[0] + s2[1].
  const __m256d s4 = _mm256_add_pd(_mm256_add_pd(acc0, acc2), _mm256_add_pd(acc1, acc3));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

double exp_scaled_sum_avx2(const float* x, float shift, float scale, float* out, int64_t n) {
  return out ? exp_scaled_sum_avx2_impl<true>(x, shift, scale, out, n)
             : exp_scaled_sum_avx2_impl<false>(x, shift, scale, out, n);
}

// exp_band_sums (sample_scan.h): exp_scaled_sum's loop without the store, plus each lane's
// exp added into every cumulative band it belongs to (+0 outside: a lane's sum of
// nonnegative terms does not change, the contract's "adds nothing"). The total's lanes are
// exp_scaled_sum's, so its bits too.
double exp_band_sums_avx2(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                          float* top_x, int32_t* top_ids, int64_t* n_top) {
  constexpr int kBands = 3;  // kMassBands - 1 (sample_scan.h): the last band is the total
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  const __m256 pos_inf = _mm256_set1_ps(INFINITY);
  // The 16 lanes as quarters (lanes 0-3, 4-7, 8-11, 12-15): the total in registers, the
  // bands in memory (more than the 16 ymm registers).
  __m256d total[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  alignas(32) double acc[kBands][16] = {};
  int64_t c = 0;  // band 0's entries so far
  // 8 elements (from x[i]) into quarters q0, q0 + 1.
  auto step = [&](__m256 v, int q0, int64_t i) {
    const __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(v, vs), vk));
    const __m256d e0 = _mm256_cvtps_pd(_mm256_castps256_ps128(e));
    const __m256d e1 = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
    total[q0] = _mm256_add_pd(total[q0], e0);
    total[q0 + 1] = _mm256_add_pd(total[q0 + 1], e1);
    const __m256 finite = _mm256_cmp_ps(v, pos_inf, _CMP_LT_OQ);
    for (int j = 0; j < kBands; ++j) {
      const __m256 in = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(lower[j]), _CMP_GE_OQ), finite);
      const __m256i in_i = _mm256_castps_si256(in);
      const __m256d m0 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(in_i)));
      const __m256d m1 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(in_i, 1)));
      double* a = acc[j] + 4 * q0;
      _mm256_store_pd(a, _mm256_add_pd(_mm256_load_pd(a), _mm256_and_pd(m0, e0)));
      _mm256_store_pd(a + 4, _mm256_add_pd(_mm256_load_pd(a + 4), _mm256_and_pd(m1, e1)));
      if (j == 0 && top_x) {
        for (unsigned bits = static_cast<unsigned>(_mm256_movemask_ps(in)); bits; bits &= bits - 1) {
          const int64_t at = i + __builtin_ctz(bits);
          top_x[c] = x[at];
          top_ids[c] = static_cast<int32_t>(at);
          ++c;
        }
      }
    }
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    step(_mm256_loadu_ps(x + i), 0, i);
    step(_mm256_loadu_ps(x + i + 8), 2, i + 8);
  }
  // Lanes past n: -inf (exp 0, no band).
  for (int q0 = 0; i < n; i += 8, q0 += 2) step(load_tail(x + i, n - i < 8 ? n - i : 8), q0, i);
  if (top_x) *n_top = c;
  auto tree = [](const double* a) {
    double s8[8], s4[4], s2[2];
    for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
    for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
    return s2[0] + s2[1];
  };
  for (int j = 0; j < kBands; ++j) above[j] = tree(acc[j]);
  alignas(32) double t[16];
  for (int q = 0; q < 4; ++q) _mm256_store_pd(t + 4 * q, total[q]);
  above[kBands] = tree(t);
  return above[kBands];
}

}  // namespace

void add_avx2_exp_kernels(KernelTable& t) {
  t.exp_scaled_sum = exp_scaled_sum_avx2;
  t.exp_band_sums = exp_band_sums_avx2;
}

}  // namespace spillway::kernels
