// AVX-512: the sampler's row scans (sample_scan.h), 16 floats per step. Results are
// order-independent (row_range, band_pack) or follow the contract's 16-lane double order
// (band_masses), so they are bit-identical to the scalar reference in sample_scan.cpp.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>
#include <limits>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Four independent (max, argmax, min) chains of 16 lanes (a compare-and-blend chain per
// step is latency bound), merged at the end; the order of a tie is settled by the index.
RowRange row_range_avx512(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-kInf);
  __m512 mx[4], mn[4];
  __m512i arg[4];
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int c = 0; c < 4; ++c) {
    mx[c] = neg_inf;
    mn[c] = _mm512_set1_ps(kInf);
    arg[c] = _mm512_setzero_si512();
  }
  int64_t finite = 0;
  // Index lanes are int32: rows up to 2^31 floats (a vocabulary).
  auto scan = [&](int c, __m512 v, __mmask16 k, int64_t i) {
    const __mmask16 gt = _mm512_mask_cmp_ps_mask(k, v, mx[c], _CMP_GT_OQ);  // strict: first index kept
    mx[c] = _mm512_mask_mov_ps(mx[c], gt, v);
    arg[c] = _mm512_mask_mov_epi32(arg[c], gt, _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(i))));
    const __mmask16 not_ninf = _mm512_mask_cmp_ps_mask(k, v, neg_inf, _CMP_NEQ_UQ);  // NaN counts
    finite += __builtin_popcount(not_ninf);
    const __mmask16 lt = _mm512_mask_cmp_ps_mask(not_ninf, v, mn[c], _CMP_LT_OQ);  // -inf, NaN never enter
    mn[c] = _mm512_mask_mov_ps(mn[c], lt, v);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int c = 0; c < 4; ++c) scan(c, _mm512_loadu_ps(x + i + 16 * c), __mmask16(0xffff), i + 16 * c);
  }
  for (; i + 16 <= n; i += 16) scan(0, _mm512_loadu_ps(x + i), __mmask16(0xffff), i);
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    scan(1, _mm512_mask_loadu_ps(neg_inf, k, x + i), k, i);
  }
  RowRange r{-kInf, kInf, 0, finite};
  for (int c = 0; c < 4; ++c) {
    alignas(64) float m[16], lo[16];
    alignas(64) int32_t a[16];
    _mm512_store_ps(m, mx[c]);
    _mm512_store_ps(lo, mn[c]);
    _mm512_store_si512(a, arg[c]);
    for (int l = 0; l < 16; ++l) {
      if (m[l] > r.max || (m[l] == r.max && m[l] != -kInf && a[l] < r.argmax)) {
        r.max = m[l];
        r.argmax = a[l];
      }
      if (lo[l] < r.min) r.min = lo[l];
    }
  }
  return r;
}

// The contract's tree over 16 double lanes (lo: lanes 0-7, hi: 8-15).
inline double tree16(__m512d lo, __m512d hi) {
  const __m512d s8 = _mm512_add_pd(lo, hi);
  const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), _mm512_extractf64x4_pd(s8, 1));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

template <bool kStore>
double band_masses_avx512_impl(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                               double* above, float* p_out) {
  __m512 low[kMassBands];
  for (int j = 0; j < kMassBands; ++j) low[j] = _mm512_set1_ps(lower[j]);
  const __m512 pos_inf = _mm512_set1_ps(kInf);
  const __m512d vinv = _mm512_set1_pd(inv_sum), one = _mm512_set1_pd(1.0);
  // Lanes 0-7 and 8-15 of the contract's 16, per cumulative band and for the total.
  __m512d acc_lo[kMassBands], acc_hi[kMassBands];
  __m512d total_lo = _mm512_setzero_pd(), total_hi = total_lo;
  for (int j = 0; j < kMassBands; ++j) acc_lo[j] = acc_hi[j] = _mm512_setzero_pd();
  auto step = [&](__m512 v, __m512 ev, __mmask16 k, int64_t i) {
    const __m512d e0 = _mm512_cvtps_pd(_mm512_castps512_ps256(ev));
    const __m512d e1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ev), 1)));
    const __m256 f0 = _mm512_cvtpd_ps(_mm512_mul_pd(e0, vinv));
    const __m256 f1 = _mm512_cvtpd_ps(_mm512_mul_pd(e1, vinv));
    if constexpr (kStore) {
      const __m512 pf = _mm512_insertf32x8(_mm512_castps256_ps512(f0), f1, 1);
      _mm512_mask_storeu_ps(p_out + i, k, pf);
    }
    const __m512d p0 = _mm512_cvtps_pd(f0);
    const __m512d p1 = _mm512_cvtps_pd(f1);
    total_lo = _mm512_add_pd(total_lo, p0);
    total_hi = _mm512_add_pd(total_hi, p1);
    const __mmask16 finite = _mm512_mask_cmp_ps_mask(k, v, pos_inf, _CMP_LT_OQ);
    for (int j = 0; j < kMassBands; ++j) {
      const __mmask16 in = _mm512_mask_cmp_ps_mask(finite, v, low[j], _CMP_GE_OQ);
      // acc + p: an add, or fma(p, 1, acc) (the same single rounding) on the FMA ports.
      acc_lo[j] = _mm512_mask_add_pd(acc_lo[j], __mmask8(in), acc_lo[j], p0);
      acc_hi[j] = _mm512_mask3_fmadd_pd(p1, one, acc_hi[j], __mmask8(in >> 8));
    }
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) step(_mm512_loadu_ps(x + i), _mm512_loadu_ps(e + i), __mmask16(0xffff), i);
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1);
    // Lanes past n: e = 0 adds +0 to the total, and they are in no band.
    step(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, e + i), k, i);
  }
  for (int j = 0; j < kMassBands; ++j) above[j] = tree16(acc_lo[j], acc_hi[j]);
  return tree16(total_lo, total_hi);
}

double band_masses_avx512(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                          double* above, float* p_out) {
  return p_out ? band_masses_avx512_impl<true>(x, e, n, inv_sum, lower, above, p_out)
               : band_masses_avx512_impl<false>(x, e, n, inv_sum, lower, above, p_out);
}

template <bool kP>
int64_t band_pack_avx512_impl(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                         float* out_x, float* out_p, int32_t* out_ids) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t c = 0;
  int64_t i = 0;
  // Compress in registers, then plain 16-lane stores, branch-free (compress-to-memory is slow
  // on some cores): lanes past the count are overwritten by the next step. The stores start at
  // c <= i, so in place they never reach an input not yet loaded; they stay inside the room n
  // while c + 16 <= n (then masked stores).
  auto pack = [&](__mmask16 k, __m512 v, __m512 pv, __m512i id) {
    const __m512 cx = _mm512_maskz_compress_ps(k, v);
    const __m512 cp = kP ? _mm512_maskz_compress_ps(k, pv) : pv;
    const __m512i ci = _mm512_maskz_compress_epi32(k, id);
    const int m = __builtin_popcount(k);
    if (c + 16 <= n) {
      _mm512_storeu_ps(out_x + c, cx);
      if constexpr (kP) _mm512_storeu_ps(out_p + c, cp);
      _mm512_storeu_si512(out_ids + c, ci);
    } else {
      const __mmask16 w = __mmask16((1u << m) - 1);
      _mm512_mask_storeu_ps(out_x + c, w, cx);
      if constexpr (kP) _mm512_mask_storeu_ps(out_p + c, w, cp);
      _mm512_mask_storeu_epi32(out_ids + c, w, ci);
    }
    c += m;
  };
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 k = _mm512_cmp_ps_mask(v, vlo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(v, vhi, _CMP_LT_OQ);
    const __m512i id = ids ? _mm512_loadu_si512(ids + i) : _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(i)));
    pack(k, v, kP ? _mm512_loadu_ps(p + i) : v, id);
  }
  if (i < n) {
    const __mmask16 t = __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(t, x + i);
    const __mmask16 k = t & _mm512_cmp_ps_mask(v, vlo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(v, vhi, _CMP_LT_OQ);
    const __m512i id = ids ? _mm512_maskz_loadu_epi32(t, ids + i) : _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(i)));
    pack(k, v, kP ? _mm512_maskz_loadu_ps(t, p + i) : v, id);
  }
  return c;
}

int64_t band_pack_avx512(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                         float* out_x, float* out_p, int32_t* out_ids) {
  return p ? band_pack_avx512_impl<true>(x, p, ids, n, lo, hi, out_x, out_p, out_ids)
           : band_pack_avx512_impl<false>(x, p, ids, n, lo, hi, out_x, out_p, out_ids);
}

}  // namespace

void add_avx512_sample_scan_kernels(KernelTable& t) {
  t.row_range = row_range_avx512;
  t.band_masses = band_masses_avx512;
  t.band_pack = band_pack_avx512;
}

}  // namespace spillway::kernels
