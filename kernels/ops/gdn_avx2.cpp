// AVX2 + FMA: the gated delta net recurrence (kernels::gated_delta_net), vectorised over the
// value columns of the state: each column evolves on its own, so a block of 8 * kCols
// columns runs the whole token loop while its [dk][8 * kCols] slice of the state stays in
// L1. The per-column arithmetic is the scalar reference's, FMA for FMA (same bits).
#include <immintrin.h>

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

template <int kCols>
static inline void gdn_columns(const GatedDeltaNetArgs& a, int c0) {
  const int dk = a.dk, dv = a.dv;
  const float* src = a.state_in;
  float* dst = a.state_out + c0;
  for (int t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.qk_stride;
    const float* k = a.k + t * a.qk_stride;
    const __m256 e = _mm256_set1_ps(__builtin_expf(a.g[t * a.gb_stride]));
    const __m256 beta = _mm256_set1_ps(a.beta[t * a.gb_stride]);
    __m256 sk[kCols];
    for (int j = 0; j < kCols; ++j) sk[j] = _mm256_setzero_ps();
    if (src) {
      const float* s_in = src + c0;
      for (int i = 0; i < dk; ++i) {
        const __m256 ki = _mm256_set1_ps(k[i]);
        for (int j = 0; j < kCols; ++j) {
          const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(s_in + size_t(i) * dv + 8 * j), e);
          _mm256_storeu_ps(dst + size_t(i) * dv + 8 * j, s);
          sk[j] = _mm256_fmadd_ps(s, ki, sk[j]);
        }
      }
    } else {
      for (int i = 0; i < dk; ++i) {
        for (int j = 0; j < kCols; ++j) _mm256_storeu_ps(dst + size_t(i) * dv + 8 * j, _mm256_setzero_ps());
      }
    }
    __m256 d[kCols], o[kCols];
    const float* v = a.v + t * a.v_stride + c0;
    for (int j = 0; j < kCols; ++j) {
      d[j] = _mm256_mul_ps(beta, _mm256_sub_ps(_mm256_loadu_ps(v + 8 * j), sk[j]));
      o[j] = _mm256_setzero_ps();
    }
    for (int i = 0; i < dk; ++i) {
      const __m256 ki = _mm256_set1_ps(k[i]);
      const __m256 qi = _mm256_set1_ps(q[i]);
      for (int j = 0; j < kCols; ++j) {
        float* p = dst + size_t(i) * dv + 8 * j;
        const __m256 s = _mm256_fmadd_ps(ki, d[j], _mm256_loadu_ps(p));
        _mm256_storeu_ps(p, s);
        o[j] = _mm256_fmadd_ps(s, qi, o[j]);
      }
    }
    const __m256 scale = _mm256_set1_ps(a.scale);
    float* out = a.out + t * a.out_stride + c0;
    for (int j = 0; j < kCols; ++j) _mm256_storeu_ps(out + 8 * j, _mm256_mul_ps(o[j], scale));
    src = a.state_out;
  }
}

void gated_delta_net_avx2(const GatedDeltaNetArgs& a) {
  if (a.dv % 8 != 0 || a.n_tokens == 0) {
    scalar_kernel_table().gated_delta_net(a);
    return;
  }
  int c = 0;
  for (; c + 32 <= a.dv; c += 32) gdn_columns<4>(a, c);
  for (; c < a.dv; c += 8) gdn_columns<1>(a, c);
}

}  // namespace

void add_avx2_gdn_kernels(KernelTable& t) { t.gated_delta_net = gated_delta_net_avx2; }

}  // namespace spillway::kernels
