// AVX2 + FMA + F16C: row operations, RoPE rotation and paged attention.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline double hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// Adds the 8 floats of v to a 4-lane double accumulator.
inline __m256d add_widened(__m256d acc, __m256 v) {
  acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// e^x, about 1 ulp (Cephes polynomial); 0 below -87.34, +Inf above 88.72, NaN stays NaN.
inline __m256 exp_ps(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.336544f), _CMP_LT_OQ);
  const __m256 too_large = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283f), _CMP_GT_OQ);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.336544f)), _mm256_set1_ps(88.72283f));
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
  // 2^n as two factors so that n in [-126, 128] never leaves the exponent range.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
  result = _mm256_andnot_ps(too_small, result);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(INFINITY), too_large);
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(result, x, is_nan);
}

// ---- row operations -------------------------------------------------------------------

void rms_norm_avx2(const float* x, const float* weight, float* y, int64_t n, float eps) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = add_widened(acc0, _mm256_mul_ps(a, a));
    acc1 = add_widened(acc1, _mm256_mul_ps(b, b));
  }
  double sum = hsum_pd(_mm256_add_pd(acc0, acc1));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / __builtin_sqrtf(mean + eps);
  const __m256 s = _mm256_set1_ps(scale);
  i = 0;
  if (weight) {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), _mm256_loadu_ps(weight + i)));
    }
    for (; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), s));
    for (; i < n; ++i) y[i] = x[i] * scale;
  }
}

// Masked load of the n < 8 remaining floats (others = fill).
inline __m256 load_partial(const float* p, int64_t n, float fill) {
  alignas(32) float tmp[8];
  for (int j = 0; j < 8; ++j) tmp[j] = j < n ? p[j] : fill;
  return _mm256_load_ps(tmp);
}
inline void store_partial(float* p, __m256 v, int64_t n) {
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int j = 0; j < n; ++j) p[j] = tmp[j];
}

void softmax_avx2(float* x, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = hmax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 m = _mm256_set1_ps(max);
  __m256d acc = _mm256_setzero_pd();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    acc = add_widened(acc, e);
  }
  if (i < n) {
    const __m256 e = exp_ps(_mm256_sub_ps(load_partial(x + i, n - i, -INFINITY), m));
    store_partial(x + i, e, n - i);
    acc = add_widened(acc, e);  // padding lanes are exp(-inf) = 0
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / hsum_pd(acc)));
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= _mm256_cvtss_f32(inv);
}

inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void silu_mul_avx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) store_partial(out + i, silu_mul8(load_partial(gate + i, n - i, 0.0f), load_partial(up + i, n - i, 0.0f)), n - i);
}

void add_inplace_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

// ---- RoPE -----------------------------------------------------------------------------

void rope_avx2(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  const int half = rot_dim / 2;
  if (style == RopeStyle::Interleaved) {
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + int64_t(h) * head_dim;
      int d = 0;
      for (; d + 8 <= rot_dim; d += 8) {
        const __m256 v = _mm256_loadu_ps(xh + d);
        const __m256 t = _mm256_loadu_ps(cs + d);  // c0 s0 c1 s1 ...
        const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // x1 x0 x3 x2 ...
        // even lanes: x0 c - x1 s; odd lanes: x1 c + x0 s
        _mm256_storeu_ps(xh + d, _mm256_fmaddsub_ps(v, _mm256_moveldup_ps(t), _mm256_mul_ps(swapped, _mm256_movehdup_ps(t))));
      }
      for (; d < rot_dim; d += 2) {
        const float c = cs[d], s = cs[d + 1], x0 = xh[d], x1 = xh[d + 1];
        xh[d] = x0 * c - x1 * s;
        xh[d + 1] = x0 * s + x1 * c;
      }
    }
    return;
  }
  alignas(32) float cosv[kMaxRopeDim / 2], sinv[kMaxRopeDim / 2];
  for (int i = 0; i < half; ++i) {
    cosv[i] = cs[2 * i];
    sinv[i] = cs[2 * i + 1];
  }
  for (int h = 0; h < n_heads; ++h) {
    float* a = x + int64_t(h) * head_dim;
    float* b = a + half;
    int i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 c = _mm256_load_ps(cosv + i), s = _mm256_load_ps(sinv + i);
      const __m256 x0 = _mm256_loadu_ps(a + i), x1 = _mm256_loadu_ps(b + i);
      _mm256_storeu_ps(a + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(b + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
    for (; i < half; ++i) {
      const float x0 = a[i], x1 = b[i];
      a[i] = x0 * cosv[i] - x1 * sinv[i];
      b[i] = x0 * sinv[i] + x1 * cosv[i];
    }
  }
}

// ---- attention ----------------------------------------------------------------------------

struct KvF32 {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};
struct KvF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(const uint16_t* p) { return _cvtsh_ss(*p); }
};

template <class L>
float dot_row(const float* q, const typename L::T* k, int head_dim) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 16 <= head_dim; d += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), L::load(k + d), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), L::load(k + d + 8), a1);
  }
  for (; d + 8 <= head_dim; d += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), L::load(k + d), a0);
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; d < head_dim; ++d) s += q[d] * L::one(k + d);
  return s;
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
    softmax_avx2(scores, n_ctx);
    // out = sum_t p_t V_t, 32 output dims at a time held in registers.
    int d0 = 0;
    for (; d0 + 8 <= head_dim; d0 += 32) {
      const int width = head_dim - d0 >= 32 ? 4 : (head_dim - d0) / 8;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t t0 = 0; t0 < n_ctx; t0 += v.block_size) {
        const T* base = vdata + int64_t(v.block_table[t0 / v.block_size]) * v.block_stride + int64_t(kv_head) * head_dim + d0;
        const int64_t count = n_ctx - t0 < v.block_size ? n_ctx - t0 : v.block_size;
        for (int64_t r = 0; r < count; ++r) {
          const __m256 p = _mm256_set1_ps(scores[t0 + r]);
          const T* vr = base + r * v.token_stride;
          if (width == 4) {
            acc[0] = _mm256_fmadd_ps(p, L::load(vr), acc[0]);
            acc[1] = _mm256_fmadd_ps(p, L::load(vr + 8), acc[1]);
            acc[2] = _mm256_fmadd_ps(p, L::load(vr + 16), acc[2]);
            acc[3] = _mm256_fmadd_ps(p, L::load(vr + 24), acc[3]);
          } else {
            for (int j = 0; j < width; ++j) acc[j] = _mm256_fmadd_ps(p, L::load(vr + 8 * j), acc[j]);
          }
        }
      }
      for (int j = 0; j < width; ++j) _mm256_storeu_ps(og + d0 + 8 * j, acc[j]);
      if (width < 4) {
        d0 += 8 * width;
        break;
      }
    }
    if (d0 < head_dim) {  // dims past the last multiple of 8
      for (int d = d0; d < head_dim; ++d) og[d] = 0.0f;
      for (int64_t t = 0; t < n_ctx; ++t) {
        const T* vr = vdata + int64_t(v.block_table[t / v.block_size]) * v.block_stride +
                      (t % v.block_size) * v.token_stride + int64_t(kv_head) * head_dim;
        for (int d = d0; d < head_dim; ++d) og[d] += scores[t] * L::one(vr + d);
      }
    }
  }
}

void attention_avx2(const float* q, int n_group, int head_dim, const KvView& k, const KvView& v, int kv_head,
               int64_t n_ctx, float scale, float* out, float* scratch) {
  if (k.type == DType::F16) {
    attention_typed<KvF16>(q, n_group, head_dim, k, v, kv_head, n_ctx, scale, out, scratch);
  } else {
    attention_typed<KvF32>(q, n_group, head_dim, k, v, kv_head, n_ctx, scale, out, scratch);
  }
}

}  // namespace

void add_avx2_row_kernels(KernelTable& t) {
  t.rms_norm = rms_norm_avx2;
  t.softmax = softmax_avx2;
  t.silu_mul = silu_mul_avx2;
  t.add_inplace = add_inplace_avx2;
  t.rope = rope_avx2;
  t.attention = attention_avx2;
}

}  // namespace spillway::kernels
