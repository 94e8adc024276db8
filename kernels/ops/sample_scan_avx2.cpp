// AVX2: the sampler's row scans (sample_scan.h), 8 floats per step. Results are
// order-independent (row_range, band_pack) or follow the contract's 16-lane double order
// (band_masses), so they are bit-identical to the scalar reference in sample_scan.cpp.
#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The n < 8 remaining floats, the other lanes `fill`.
inline __m256 load_tail(const float* p, int64_t n, float fill) {
  alignas(32) float tmp[8];
  for (int j = 0; j < 8; ++j) tmp[j] = j < n ? p[j] : fill;
  return _mm256_load_ps(tmp);
}

RowRange row_range_avx2(const float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-kInf);
  __m256 mx = neg_inf, mn = _mm256_set1_ps(kInf);
  __m256i arg = _mm256_setzero_si256();
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  int64_t finite = 0;
  auto scan = [&](__m256 v) {
    const __m256 gt = _mm256_cmp_ps(v, mx, _CMP_GT_OQ);  // strict: first index kept
    mx = _mm256_blendv_ps(mx, v, gt);
    arg = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(arg), _mm256_castsi256_ps(idx), gt));
    const __m256 not_ninf = _mm256_cmp_ps(v, neg_inf, _CMP_NEQ_UQ);  // NaN counts
    finite += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(not_ninf)));
    const __m256 lt = _mm256_and_ps(_mm256_cmp_ps(v, mn, _CMP_LT_OQ), not_ninf);
    mn = _mm256_blendv_ps(mn, v, lt);
    idx = _mm256_add_epi32(idx, step);
  };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) scan(_mm256_loadu_ps(x + i));
  if (i < n) scan(load_tail(x + i, n - i, -kInf));  // -inf lanes: not counted, never max
  alignas(32) float m[8], lo[8];
  alignas(32) int32_t a[8];
  _mm256_store_ps(m, mx);
  _mm256_store_ps(lo, mn);
  _mm256_store_si256(reinterpret_cast<__m256i*>(a), arg);
  RowRange r{-kInf, kInf, 0, finite};
  for (int l = 0; l < 8; ++l) {
    if (m[l] > r.max || (m[l] == r.max && m[l] != -kInf && a[l] < r.argmax)) {
      r.max = m[l];
      r.argmax = a[l];
    }
    if (lo[l] < r.min) r.min = lo[l];
  }
  return r;
}

double band_masses_avx2(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                        double* above, float* p_out) {
  // 16 double lanes as four 4-lane quarters (lanes 0-3, 4-7, 8-11, 12-15), per cumulative
  // band (kept in memory: more than the 16 ymm registers) and for the total.
  alignas(32) double acc[kMassBands][16] = {};
  __m256d total[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  const __m256d vinv = _mm256_set1_pd(inv_sum);
  const __m256 pos_inf = _mm256_set1_ps(kInf);
  // 8 elements into quarters q0, q0 + 1; returns their probabilities (float).
  auto step = [&](__m256 v, __m256 ev, int q0) {
    const __m128 f0 = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(ev)), vinv));
    const __m128 f1 = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(ev, 1)), vinv));
    const __m256d p0 = _mm256_cvtps_pd(f0);
    const __m256d p1 = _mm256_cvtps_pd(f1);
    total[q0] = _mm256_add_pd(total[q0], p0);
    total[q0 + 1] = _mm256_add_pd(total[q0 + 1], p1);
    const __m256 finite = _mm256_cmp_ps(v, pos_inf, _CMP_LT_OQ);
    for (int j = 0; j < kMassBands; ++j) {
      const __m256 in = _mm256_and_ps(_mm256_cmp_ps(v, _mm256_set1_ps(lower[j]), _CMP_GE_OQ), finite);
      // Widen the 8 float masks to two 4 x 64-bit masks; outside the range add +0.
      const __m256i in_i = _mm256_castps_si256(in);
      const __m256d m0 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(in_i)));
      const __m256d m1 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(in_i, 1)));
      double* a = acc[j] + 4 * q0;
      _mm256_store_pd(a, _mm256_add_pd(_mm256_load_pd(a), _mm256_and_pd(m0, p0)));
      _mm256_store_pd(a + 4, _mm256_add_pd(_mm256_load_pd(a + 4), _mm256_and_pd(m1, p1)));
    }
    return _mm256_insertf128_ps(_mm256_castps128_ps256(f0), f1, 1);
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 pa = step(_mm256_loadu_ps(x + i), _mm256_loadu_ps(e + i), 0);
    const __m256 pb = step(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(e + i + 8), 2);
    if (p_out) {
      _mm256_storeu_ps(p_out + i, pa);
      _mm256_storeu_ps(p_out + i + 8, pb);
    }
  }
  // Lanes past n: x = -inf (no band), e = 0 (adds +0).
  for (int q0 = 0; i < n; i += 8, q0 += 2) {
    const int64_t left = n - i < 8 ? n - i : 8;
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, step(load_tail(x + i, left, -kInf), load_tail(e + i, left, 0.0f), q0));
    if (p_out) {
      for (int64_t j = 0; j < left; ++j) p_out[i + j] = tmp[j];
    }
  }
  auto tree = [](const double* a) {
    double s8[8], s4[4], s2[2];
    for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
    for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
    return s2[0] + s2[1];
  };
  for (int j = 0; j < kMassBands; ++j) above[j] = tree(acc[j]);
  alignas(32) double t[16];
  for (int q = 0; q < 4; ++q) _mm256_store_pd(t + 4 * q, total[q]);
  return tree(t);
}

int64_t band_pack_avx2(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                       float* out_x, float* out_p, int32_t* out_ids) {
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t c = 0;
  int64_t i = 0;
  auto take = [&](int64_t at) {
    const float v = x[at];
    const int32_t id = ids ? ids[at] : static_cast<int32_t>(at);
    if (p) {
      const float pv = p[at];
      out_p[c] = pv;
    }
    out_x[c] = v;
    out_ids[c] = id;
    ++c;
  };
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    unsigned k = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(v, vlo, _CMP_GE_OQ), _mm256_cmp_ps(v, vhi, _CMP_LT_OQ))));
    while (k) {
      take(i + __builtin_ctz(k));
      k &= k - 1;
    }
  }
  for (; i < n; ++i) {
    if (x[i] >= lo && x[i] < hi) take(i);
  }
  return c;
}

}  // namespace

void add_avx2_sample_scan_kernels(KernelTable& t) {
  t.row_range = row_range_avx2;
  t.band_masses = band_masses_avx2;
  t.band_pack = band_pack_avx2;
}

}  // namespace spillway::kernels
