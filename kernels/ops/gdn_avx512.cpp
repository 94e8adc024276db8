// AVX-512: the gated delta net recurrence (kernels::gated_delta_net), vectorised over the
// value columns of the state: each column evolves on its own, so a block of 16 * kCols
// columns runs the whole token loop while its [dk][16 * kCols] slice of the state stays in
// L1. The per-column arithmetic is the scalar reference's, FMA for FMA (same bits).
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

// A block of 16 * kCols columns over every token. The block's state slice lives in `work`
// ([dk][16 * kCols] floats, this thread's) between the tokens of a prefill, whose state_out
// rows, dv floats apart, would put the slice's rows in few L1 sets (~10% of the kernel,
// bench/README.md); state_out gets the last token's state. work null (one token, decode):
// state_out itself, whose first pass then fetches its lines beside state_in's (writing it only
// in the second pass, or with streaming stores, measured slower); in place (state_out ==
// state_in) the first pass stores nothing (kRecompute), its lines being already fetched.
// kRecompute (the prefill's): the first pass does not store the decayed state; the second
// recomputes it (the same product, so the same bits): one store per state value and token
// instead of two, the kernel's limit (1.17x; on AVX2 no gain measured, so not there).
template <int kCols, bool kRecompute>
static inline void gdn_columns(const GatedDeltaNetArgs& a, int c0, float* work) {
  const int dk = a.dk, dv = a.dv;
  float* dst = a.state_out + c0;
  const size_t work_stride = work ? size_t(16 * kCols) : size_t(dv);
  if (!work) work = dst;
  const float* src = a.state_in ? a.state_in + c0 : nullptr;
  size_t src_stride = size_t(dv);
  for (int t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.qk_stride;
    const float* k = a.k + t * a.qk_stride;
    const __m512 e = _mm512_set1_ps(__builtin_expf(a.g[t * a.gb_stride]));
    const __m512 beta = _mm512_set1_ps(a.beta[t * a.gb_stride]);
    __m512 sk[kCols];
    for (int j = 0; j < kCols; ++j) sk[j] = _mm512_setzero_ps();
    if (src) {
      for (int i = 0; i < dk; ++i) {
        const __m512 ki = _mm512_set1_ps(k[i]);
        for (int j = 0; j < kCols; ++j) {
          const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(src + size_t(i) * src_stride + 16 * j), e);
          if (!kRecompute) _mm512_storeu_ps(work + size_t(i) * work_stride + 16 * j, s);
          sk[j] = _mm512_fmadd_ps(s, ki, sk[j]);
        }
      }
    } else if (!kRecompute) {
      for (int i = 0; i < dk; ++i) {
        for (int j = 0; j < kCols; ++j) _mm512_storeu_ps(work + size_t(i) * work_stride + 16 * j, _mm512_setzero_ps());
      }
    }
    __m512 d[kCols], o[kCols];
    const float* v = a.v + t * a.v_stride + c0;
    for (int j = 0; j < kCols; ++j) {
      d[j] = _mm512_mul_ps(beta, _mm512_sub_ps(_mm512_loadu_ps(v + 16 * j), sk[j]));
      o[j] = _mm512_setzero_ps();
    }
    float* const to = t + 1 == a.n_tokens ? dst : work;  // the last token's state: state_out
    const size_t to_stride = t + 1 == a.n_tokens ? size_t(dv) : work_stride;
    for (int i = 0; i < dk; ++i) {
      const __m512 ki = _mm512_set1_ps(k[i]);
      const __m512 qi = _mm512_set1_ps(q[i]);
      for (int j = 0; j < kCols; ++j) {
        const __m512 decayed =
            !kRecompute ? _mm512_loadu_ps(work + size_t(i) * work_stride + 16 * j)
            : src       ? _mm512_mul_ps(_mm512_loadu_ps(src + size_t(i) * src_stride + 16 * j), e)
                        : _mm512_setzero_ps();
        const __m512 s = _mm512_fmadd_ps(ki, d[j], decayed);
        _mm512_storeu_ps(to + size_t(i) * to_stride + 16 * j, s);
        o[j] = _mm512_fmadd_ps(s, qi, o[j]);
      }
    }
    const __m512 scale = _mm512_set1_ps(a.scale);
    float* out = a.out + t * a.out_stride + c0;
    for (int j = 0; j < kCols; ++j) _mm512_storeu_ps(out + 16 * j, _mm512_mul_ps(o[j], scale));
    src = work;
    src_stride = work_stride;
  }
}

void gated_delta_net_avx512(const GatedDeltaNetArgs& a) {
  if (a.dv % 16 != 0 || a.n_tokens == 0) {
    scalar_kernel_table().gated_delta_net(a);
    return;
  }
  float* work = a.n_tokens > 1 ? gdn_thread_work(size_t(a.dk) * 64) : nullptr;  // kCols <= 4
  int c = 0;
  if (work) {
    for (; c + 64 <= a.dv; c += 64) gdn_columns<4, true>(a, c, work);
    for (; c < a.dv; c += 16) gdn_columns<1, true>(a, c, work);
  } else if (a.state_in == a.state_out) {
    // In place: the first pass's stores would only dirty the lines the second pass rewrites
    // (cold states, bench_kernels gdn_decode/avx512/0.8b/cold:in_place: ~5% faster without).
    for (; c + 64 <= a.dv; c += 64) gdn_columns<4, true>(a, c, work);
    for (; c < a.dv; c += 16) gdn_columns<1, true>(a, c, work);
  } else {
    for (; c + 64 <= a.dv; c += 64) gdn_columns<4, false>(a, c, work);
    for (; c < a.dv; c += 16) gdn_columns<1, false>(a, c, work);
  }
}

}  // namespace

void add_avx512_gdn_kernels(KernelTable& t) { t.gated_delta_net = gated_delta_net_avx512; }

}  // namespace spillway::kernels
