// AVX-512: exp_scaled_sum (exp_sum.h), 16 floats per exp, the sum in 16 double lanes (two
// 8-lane accumulators). exp16 rounds each element as exp_poly (kernels_scalar.cpp) does, so
// the outputs and the sum are bit-identical to the scalar reference.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

// exp_poly on 16 lanes: clamp to [-104, 88.72283], reduce, the polynomial p, then p * 2^n by
// vscalefps; 0 below -104 (and for -inf), +inf above, NaN kept. vscalefps rounds the exact
// p * 2^n once, to nearest even, subnormal results included (no microcode assist on this
// path), and so does exp_poly's (p * 2^n1) * 2^n2 (the first product is exact): the same
// bits (tests/kernels: every ISA against exp_poly over the whole subnormal range). It
// replaced the two power-of-two factors with an integer path for subnormal results, whose
// branch mispredicted on a model's rows (many vectors hold a tiny exp at temperature 1).
inline __m512 exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(88.72283f);
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  const __mmask16 too_large = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
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
  __m512 result = _mm512_scalef_ps(p, n);
  result = _mm512_mask_mov_ps(result, too_small, _mm512_setzero_ps());
  result = _mm512_mask_mov_ps(result, too_large, _mm512_set1_ps(__builtin_inff()));
  return _mm512_mask_mov_ps(result, is_nan, x);
}

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

// exp_band_sums (sample_scan.h): exp_scaled_sum's loop without the store, plus a masked add
// of each lane's exp into every cumulative band it belongs to (lanes outside keep their sum:
// the contract's "adds nothing"), and band 0's entries compressed into top_x / top_ids. The
// total's lanes are exp_scaled_sum's, so its bits too.
template <bool kTop>
double exp_band_sums_avx512_impl(const float* x, float shift, float scale, int64_t n, const float* lower,
                                 double* above, float* top_x, int32_t* top_ids, int64_t* n_top) {
  constexpr int kBands = 3;  // kMassBands - 1 (sample_scan.h): the last band is the total
  const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
  const __m512 pos_inf = _mm512_set1_ps(__builtin_inff());
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 low[kBands];
  for (int j = 0; j < kBands; ++j) low[j] = _mm512_set1_ps(lower[j]);
  __m512d lo = _mm512_setzero_pd(), hi = lo;  // the total: lanes 0-7, 8-15
  __m512d band_lo[kBands], band_hi[kBands];
  for (int j = 0; j < kBands; ++j) band_lo[j] = band_hi[j] = _mm512_setzero_pd();
  int64_t c = 0;  // band 0's entries so far
  auto step = [&](__m512 v, __mmask16 k, int64_t i) {
    const __m512 e = exp16(_mm512_mul_ps(_mm512_sub_ps(v, vs), vk));
    const __m512d e0 = _mm512_cvtps_pd(_mm512_castps512_ps256(e));
    const __m512d e1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    lo = _mm512_add_pd(lo, e0);
    hi = _mm512_add_pd(hi, e1);
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(k, v, pos_inf, _CMP_LT_OQ);
    for (int j = 0; j < kBands; ++j) {
      const __mmask16 in = _mm512_mask_cmp_ps_mask(finite, v, low[j], _CMP_GE_OQ);
      band_lo[j] = _mm512_mask_add_pd(band_lo[j], __mmask8(in), band_lo[j], e0);
      band_hi[j] = _mm512_mask_add_pd(band_hi[j], __mmask8(in >> 8), band_hi[j], e1);
      if constexpr (kTop) {
        if (j == 0 && in) {  // band 0 is the rare top of the row: a branch, mostly not taken
          const __m512 cx = _mm512_maskz_compress_ps(in, v);
          const __m512i ci = _mm512_maskz_compress_epi32(in, _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(i))));
          const int m = __builtin_popcount(in);
          if (c + 16 <= n) {  // room n: lanes past the count are overwritten later
            _mm512_storeu_ps(top_x + c, cx);
            _mm512_storeu_si512(top_ids + c, ci);
          } else {
            const __mmask16 w = __mmask16((1u << m) - 1);
            _mm512_mask_storeu_ps(top_x + c, w, cx);
            _mm512_mask_storeu_epi32(top_ids + c, w, ci);
          }
          c += m;
        }
      }
    }
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(_mm512_loadu_ps(x + i), __mmask16(0xffff), i);
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    // Lanes past n: -inf, exp 0, add +0 to the total, in no band.
    step(_mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), k, x + i), k, i);
  }
  auto tree = [](__m512d a, __m512d b) {
    const __m512d s8 = _mm512_add_pd(a, b);
    const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), _mm512_extractf64x4_pd(s8, 1));
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  };
  for (int j = 0; j < kBands; ++j) above[j] = tree(band_lo[j], band_hi[j]);
  if constexpr (kTop) *n_top = c;
  above[kBands] = tree(lo, hi);
  return above[kBands];
}

double exp_band_sums_avx512(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                            float* top_x, int32_t* top_ids, int64_t* n_top) {
  return top_x ? exp_band_sums_avx512_impl<true>(x, shift, scale, n, lower, above, top_x, top_ids, n_top)
               : exp_band_sums_avx512_impl<false>(x, shift, scale, n, lower, above, top_x, top_ids, n_top);
}

}  // namespace

void add_avx512_exp_kernels(KernelTable& t) {
  t.exp_scaled_sum = exp_scaled_sum_avx512;
  t.exp_band_sums = exp_band_sums_avx512;
}

}  // namespace spillway::kernels
