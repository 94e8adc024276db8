// AVX-512: row operations, RoPE rotation and paged attention on 16-float vectors, with
// masked loads/stores for tails.
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_*().
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << remaining) - 1);
}

// Adds the 16 floats of v to an 8-lane double accumulator.
inline __m512d add_widened(__m512d acc, __m512 v) {
  acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

// e^x, about 1 ulp (Cephes polynomial, vscalefps for 2^n); 0 below -87.34, +Inf above
// 88.72, NaN stays NaN.
inline __m512 exp_ps(__m512 x) {
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.336544f), _CMP_LT_OQ);
  const __mmask16 too_large = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72283f), _CMP_GT_OQ);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.336544f)), _mm512_set1_ps(88.72283f));
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

// ---- row operations -------------------------------------------------------------------

void rms_norm_avx512(const float* x, const float* weight, float* y, int64_t n, float eps) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc0 = add_widened(acc0, _mm512_mul_ps(a, a));
    acc1 = add_widened(acc1, _mm512_mul_ps(b, b));
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    acc0 = add_widened(acc0, _mm512_mul_ps(a, a));
  }
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const __m512 s = _mm512_set1_ps(1.0f / __builtin_sqrtf(mean + eps));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    if (weight) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void softmax_avx512(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(_mm512_set1_ps(-__builtin_inff()), tail_mask(n - i), x + i));
  }
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512d acc = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m)));
    _mm512_mask_storeu_ps(x + i, k, e);
    acc = add_widened(acc, e);
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / _mm512_reduce_add_pd(acc)));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gate + i), u = _mm512_maskz_loadu_ps(k, up + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u));
  }
}

void add_inplace_avx512(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), _mm512_maskz_loadu_ps(k, x + i)));
  }
}

// ---- RoPE -----------------------------------------------------------------------------

void rope_avx512(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  const int half = rot_dim / 2;
  if (style == RopeStyle::Interleaved) {
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + int64_t(h) * head_dim;
      for (int d = 0; d < rot_dim; d += 16) {
        const __mmask16 k = tail_mask(rot_dim - d);
        const __m512 v = _mm512_maskz_loadu_ps(k, xh + d);
        const __m512 t = _mm512_maskz_loadu_ps(k, cs + d);  // c0 s0 c1 s1 ...
        const __m512 swapped = _mm512_permute_ps(v, 0xB1);
        _mm512_mask_storeu_ps(xh + d, k, _mm512_fmaddsub_ps(v, _mm512_moveldup_ps(t), _mm512_mul_ps(swapped, _mm512_movehdup_ps(t))));
      }
    }
    return;
  }
  alignas(64) float cosv[kMaxRopeDim / 2], sinv[kMaxRopeDim / 2];
  for (int i = 0; i < half; ++i) {
    cosv[i] = cs[2 * i];
    sinv[i] = cs[2 * i + 1];
  }
  for (int h = 0; h < n_heads; ++h) {
    float* a = x + int64_t(h) * head_dim;
    float* b = a + half;
    for (int i = 0; i < half; i += 16) {
      const __mmask16 k = tail_mask(half - i);
      const __m512 c = _mm512_maskz_loadu_ps(k, cosv + i), s = _mm512_maskz_loadu_ps(k, sinv + i);
      const __m512 x0 = _mm512_maskz_loadu_ps(k, a + i), x1 = _mm512_maskz_loadu_ps(k, b + i);
      _mm512_mask_storeu_ps(a + i, k, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)));
      _mm512_mask_storeu_ps(b + i, k, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)));
    }
  }
}

// ---- attention ----------------------------------------------------------------------------

struct KvF32 {
  using T = float;
  static __m512 load(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
};
struct KvF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 k) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p)); }
};

template <class L>
float dot_row(const float* q, const typename L::T* k, int head_dim) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int d = 0;
  for (; d + 32 <= head_dim; d += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), L::load(k + d, 0xFFFF), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d + 16), L::load(k + d + 16, 0xFFFF), a1);
  }
  for (; d < head_dim; d += 16) {
    const __mmask16 m = tail_mask(head_dim - d);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), L::load(k + d, m), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <class L>
void attention_typed(const float* q, int n_group, int head_dim, const KvView& k, const KvView& v, int kv_head,
                     int64_t n_ctx, float scale, float* out, float* scores) {
  using T = typename L::T;
  const auto* kdata = static_cast<const T*>(k.data);
  const auto* vdata = static_cast<const T*>(v.data);
  for (int g = 0; g < n_group; ++g) {
    const float* qg = q + int64_t(g) * head_dim;
    float* og = out + int64_t(g) * head_dim;
    for (int64_t t0 = 0; t0 < n_ctx; t0 += k.block_size) {
      const T* base = kdata + int64_t(k.block_table[t0 / k.block_size]) * k.block_stride + int64_t(kv_head) * head_dim;
      const int64_t count = n_ctx - t0 < k.block_size ? n_ctx - t0 : k.block_size;
      for (int64_t r = 0; r < count; ++r) scores[t0 + r] = dot_row<L>(qg, base + r * k.token_stride, head_dim) * scale;
    }
    softmax_avx512(scores, n_ctx);
    // out = sum_t p_t V_t, up to 64 output dims at a time held in registers.
    for (int d0 = 0; d0 < head_dim; d0 += 64) {
      const int width = head_dim - d0 >= 64 ? 4 : (head_dim - d0 + 15) / 16;
      __mmask16 masks[4];
      for (int j = 0; j < 4; ++j) masks[j] = j < width ? tail_mask(head_dim - d0 - 16 * j) : __mmask16(0);
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int64_t t0 = 0; t0 < n_ctx; t0 += v.block_size) {
        const T* base = vdata + int64_t(v.block_table[t0 / v.block_size]) * v.block_stride + int64_t(kv_head) * head_dim + d0;
        const int64_t count = n_ctx - t0 < v.block_size ? n_ctx - t0 : v.block_size;
        for (int64_t r = 0; r < count; ++r) {
          const __m512 p = _mm512_set1_ps(scores[t0 + r]);
          const T* vr = base + r * v.token_stride;
          if (width == 4) {
            acc[0] = _mm512_fmadd_ps(p, L::load(vr, masks[0]), acc[0]);
            acc[1] = _mm512_fmadd_ps(p, L::load(vr + 16, masks[1]), acc[1]);
            acc[2] = _mm512_fmadd_ps(p, L::load(vr + 32, masks[2]), acc[2]);
            acc[3] = _mm512_fmadd_ps(p, L::load(vr + 48, masks[3]), acc[3]);
          } else {
            for (int j = 0; j < width; ++j) acc[j] = _mm512_fmadd_ps(p, L::load(vr + 16 * j, masks[j]), acc[j]);
          }
        }
      }
      for (int j = 0; j < width; ++j) _mm512_mask_storeu_ps(og + d0 + 16 * j, masks[j], acc[j]);
    }
  }
}

void attention_avx512(const float* q, int n_group, int head_dim, const KvView& k, const KvView& v, int kv_head,
                      int64_t n_ctx, float scale, float* out, float* scratch) {
  if (k.type == DType::F16) {
    attention_typed<KvF16>(q, n_group, head_dim, k, v, kv_head, n_ctx, scale, out, scratch);
  } else {
    attention_typed<KvF32>(q, n_group, head_dim, k, v, kv_head, n_ctx, scale, out, scratch);
  }
}

}  // namespace

void add_avx512_row_kernels(KernelTable& t) {
  t.rms_norm = rms_norm_avx512;
  t.softmax = softmax_avx512;
  t.silu_mul = silu_mul_avx512;
  t.add_inplace = add_inplace_avx512;
  t.rope = rope_avx512;
  t.attention = attention_avx512;
}

}  // namespace spillway::kernels
