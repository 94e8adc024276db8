// AVX2 + FMA + F16C: row operations, RoPE rotation and paged attention.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/kernel_registry.h"
#include "kernels/ops/exp_poly_avx2.h"
#include "kernels/ops/kv_prefetch.h"

namespace spillway::kernels {

namespace {

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

// e^x, about 1 ulp; 0 below -87.34 (the smallest normal result), +Inf above 88.72, NaN
// stays NaN.
struct RowExpClamp {
  static constexpr float kLo = -87.336544f;
};
inline __m256 exp_ps(__m256 x) { return exp8_clamped<RowExpClamp>(x); }

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

// The maximum of x[0..n), broadcast: two chains over alternate vectors (one is bound by the
// max's latency), the last n % 8 values scalar.
inline __m256 row_max(const float* x, int64_t n) {
  __m256 vmax0 = _mm256_set1_ps(-INFINITY), vmax1 = vmax0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vmax0 = _mm256_max_ps(vmax0, _mm256_loadu_ps(x + i));
    vmax1 = _mm256_max_ps(vmax1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) vmax0 = _mm256_max_ps(vmax0, _mm256_loadu_ps(x + i));
  float max = hmax(_mm256_max_ps(vmax0, vmax1));
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  return _mm256_set1_ps(max);
}

void softmax_avx2(float* x, int64_t n) {
  const __m256 m = row_max(x, n);
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
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

// e^x for x <= 0 or NaN (a score less its row's maximum): exp_ps's value for every such x.
inline __m256 exp_nonpositive(__m256 x) { return exp8_clamped<RowExpClamp, true>(x); }

// The attention's softmax without its normalisation: x[t] = e^(x[t] - max) in place, returns
// 1 / sum_t x[t] (the caller scales the row's p . V by it: one multiply per output instead of
// one per key). The sum: float partial sums over runs of 256 keys, added in double.
float exp_row_inverse_sum(float* x, int64_t n) {
  const __m256 m = row_max(x, n);
  __m256d total = _mm256_setzero_pd();
  int64_t i = 0;
  while (i + 16 <= n) {
    __m256 sum0 = _mm256_setzero_ps(), sum1 = _mm256_setzero_ps();
    const int64_t run_end = n - i >= 256 ? i + 256 : i + (n - i) / 16 * 16;
    for (; i < run_end; i += 16) {
      const __m256 e0 = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
      const __m256 e1 = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
      _mm256_storeu_ps(x + i, e0);
      _mm256_storeu_ps(x + i + 8, e1);
      sum0 = _mm256_add_ps(sum0, e0);
      sum1 = _mm256_add_ps(sum1, e1);
    }
    total = add_widened(total, _mm256_add_ps(sum0, sum1));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    total = add_widened(total, e);
  }
  if (i < n) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(load_partial(x + i, n - i, -INFINITY), m));
    store_partial(x + i, e, n - i);
    total = add_widened(total, e);  // padding lanes are exp(-inf) = 0
  }
  return static_cast<float>(1.0 / hsum_pd(total));
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

void conv_silu_avx2(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1,
                    float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t ch = c0; ch < c1; ch += 8) {
    const int64_t left = c1 - ch;
    __m256 acc = _mm256_setzero_ps();
    for (int32_t k = 0; k < K; ++k) {
      const float* w = taps + int64_t{k} * C + ch;
      const __m256 p = left >= 8 ? _mm256_mul_ps(_mm256_loadu_ps(w), _mm256_loadu_ps(rows[k] + ch))
                                 : _mm256_mul_ps(load_partial(w, left, 0.0f), load_partial(rows[k] + ch, left, 0.0f));
      acc = _mm256_add_ps(acc, p);
    }
    if (left >= 8) {
      _mm256_storeu_ps(out + ch, silu_mul8(acc, one));
    } else {
      store_partial(out + ch, silu_mul8(acc, one), left);
    }
  }
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

// Scores with lanes over keys (16 keys transposed into kt, two vectors per dim), p . V with
// lanes over dims accumulated in the output rows; the fma order of the contract in kernels.h.
constexpr int kMaxSimdHeadDim = 256;

template <class L>
void load_keys_transposed(const KvView& k, int h, int head_dim, int64_t t0, int cnt, float* kt) {
  using T = typename L::T;
  const T* data = static_cast<const T*>(k.data);
  const int64_t bs = k.block_size;
  if (k.token_stride == 1 && bs % 16 == 0 && cnt == 16) {  // t0 % 16 == 0: 16 consecutive keys of one block
    const T* base = data + int64_t(k.block_table[t0 / bs]) * k.block_stride + t0 % bs + int64_t(h) * k.head_stride;
    for (int d = 0; d < head_dim; ++d) {
      _mm256_store_ps(kt + d * 16, L::load(base + d * k.dim_stride));
      _mm256_store_ps(kt + d * 16 + 8, L::load(base + d * k.dim_stride + 8));
    }
    return;
  }
  for (int i = 0; i < 16; ++i) {
    if (i >= cnt) {
      for (int d = 0; d < head_dim; ++d) kt[d * 16 + i] = 0.0f;
      continue;
    }
    const int64_t t = t0 + i;
    const T* row = data + int64_t(k.block_table[t / bs]) * k.block_stride + (t % bs) * k.token_stride +
                   int64_t(h) * k.head_stride;
    for (int d = 0; d < head_dim; ++d) kt[d * 16 + i] = L::one(row + d * k.dim_stride);
  }
}

template <int NR>
void score_rows(const float* const* q, const float* kt, int head_dim, float scale, float* const* scores, int64_t t0) {
  __m256 lo[NR], hi[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; ++d) {
    const __m256 k0 = _mm256_load_ps(kt + d * 16), k1 = _mm256_load_ps(kt + d * 16 + 8);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m256 qd = _mm256_set1_ps(q[r][d]);
      lo[r] = _mm256_fmadd_ps(qd, k0, lo[r]);
      hi[r] = _mm256_fmadd_ps(qd, k1, hi[r]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    _mm256_storeu_ps(scores[r] + t0, _mm256_mul_ps(lo[r], s));
    _mm256_storeu_ps(scores[r] + t0 + 8, _mm256_mul_ps(hi[r], s));
  }
}

// One block of keys [t0, t0 + count) (rows at `rows`, token_stride apart) added into
// out_r[d0, d0 + 8 * NV) for NR rows: out_r += p_r[t] * V[t] in increasing t, each element one
// fma chain continued from the value in out_r (the chain starts from the zeroed rows, so the
// block split does not change a bit). Keys at or past n_ctx[r] are skipped for row r.
template <class L, int NV, int NR, bool kContiguous>
void weighted_values_block(const KvView& v, const typename L::T* rows, int64_t t0, int64_t count, int d0,
                           const float* const* p, const int64_t* n_ctx, int64_t min_ctx, float* const* out) {
  using T = typename L::T;
  __m256 acc[NR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_loadu_ps(out[r] + d0 + 8 * c);
  }
  auto load_row = [&](int64_t i, __m256* vv) {
    const T* row = rows + i * v.token_stride + d0 * v.dim_stride;
    if constexpr (kContiguous) {
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) vv[c] = L::load(row + 8 * c);
    } else {
      alignas(32) float gathered[8 * NV];
      for (int d = 0; d < 8 * NV; ++d) gathered[d] = L::one(row + d * v.dim_stride);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) vv[c] = _mm256_load_ps(gathered + 8 * c);
    }
  };
  const float* pr[NR];
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) pr[r] = p[r] + t0;
  // Keys every row attends to, without per-row checks; then the rest, checked per row.
  const int64_t common = min_ctx - t0 < count ? (min_ctx - t0 > 0 ? min_ctx - t0 : 0) : count;
  int64_t i = 0;
  for (; i < common; ++i) {
    __m256 vv[NV];
    load_row(i, vv);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m256 pi = _mm256_set1_ps(pr[r][i]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_fmadd_ps(pi, vv[c], acc[r][c]);
    }
  }
  for (; i < count; ++i) {
    __m256 vv[NV];
    load_row(i, vv);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      if (t0 + i >= n_ctx[r]) continue;
      const __m256 pi = _mm256_set1_ps(pr[r][i]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_fmadd_ps(pi, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) _mm256_storeu_ps(out[r] + d0 + 8 * c, acc[r][c]);
  }
}

// Every row's dims [d0, d0 + 16) (or [d0, d0 + 8) when !two) over one block: 4 rows at a time.
template <class L, bool kContiguous>
void weighted_values_pass(const KvView& v, const typename L::T* rows, int64_t t0, int64_t count, int d0, bool two,
                          int n_rows, const float* const* p, const int64_t* n_ctx, int64_t min_ctx, float* const* out) {
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    if (two) {
      weighted_values_block<L, 2, 4, kContiguous>(v, rows, t0, count, d0, p + r, n_ctx + r, min_ctx, out + r);
    } else {
      weighted_values_block<L, 1, 4, kContiguous>(v, rows, t0, count, d0, p + r, n_ctx + r, min_ctx, out + r);
    }
  }
  for (; r < n_rows; ++r) {
    if (two) {
      weighted_values_block<L, 2, 1, kContiguous>(v, rows, t0, count, d0, p + r, n_ctx + r, min_ctx, out + r);
    } else {
      weighted_values_block<L, 1, 1, kContiguous>(v, rows, t0, count, d0, p + r, n_ctx + r, min_ctx, out + r);
    }
  }
}

// out_r[0, full) = sum over t < n_ctx[r] of p_r[t] * V[t][0, full) for n_rows rows (full a
// multiple of 8, at most head_dim): one fma chain over t in increasing order per element,
// from 0. V is walked a block of keys at a time; every (16 dims, 4 rows) pass over a block
// reads its rows from L1, so each V row comes from memory once, and this head's rows a few
// blocks on (kv_prefetch::blocks_ahead) are prefetched while this one is summed.
template <class L>
void weighted_values(const KvView& v, int h, int head_dim, int full, int n_rows, const float* const* p,
                     const int64_t* n_ctx, float* const* out) {
  using T = typename L::T;
  const T* data = static_cast<const T*>(v.data);
  const int64_t bs = v.block_size;
  int64_t min_ctx = INT64_MAX, max_ctx = 0;
  for (int r = 0; r < n_rows; ++r) {
    min_ctx = n_ctx[r] < min_ctx ? n_ctx[r] : min_ctx;
    max_ctx = n_ctx[r] > max_ctx ? n_ctx[r] : max_ctx;
    for (int d = 0; d < full; ++d) out[r][d] = 0.0f;
  }
  const int64_t ahead = kv_prefetch::blocks_ahead<T>(v, head_dim);
  for (int64_t b = 0; b < ahead; ++b) kv_prefetch::head_block<T>(v, h, b, max_ctx, 0, head_dim);
  for (int64_t t0 = 0; t0 < max_ctx; t0 += bs) {
    const T* rows = data + int64_t(v.block_table[t0 / bs]) * v.block_stride + int64_t(h) * v.head_stride;
    const int64_t count = max_ctx - t0 < bs ? max_ctx - t0 : bs;
    kv_prefetch::head_block<T>(v, h, t0 / bs + ahead, max_ctx, 0, head_dim);
    for (int d0 = 0; d0 < full; d0 += 16) {
      if (v.dim_stride == 1) {
        weighted_values_pass<L, true>(v, rows, t0, count, d0, d0 + 16 <= full, n_rows, p, n_ctx, min_ctx, out);
      } else {
        weighted_values_pass<L, false>(v, rows, t0, count, d0, d0 + 16 <= full, n_rows, p, n_ctx, min_ctx, out);
      }
    }
  }
}

template <class L>
void attention_typed(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim, const KvView& k,
                     const KvView& v, int kv_head, const int64_t* key_counts, float scale, float* out, size_t out_stride,
                     float* scratch) {
  using T = typename L::T;
  constexpr int kMaxRows = kAttentionMaxTokens * 64;
  const int n_rows = n_tokens * n_group;
  int64_t max_ctx = 0;
  for (int j = 0; j < n_tokens; ++j) max_ctx = key_counts[j] > max_ctx ? key_counts[j] : max_ctx;
  const int64_t ctx_stride = (max_ctx + 15) / 16 * 16;
  const float* qr[kMaxRows];
  float* sr[kMaxRows];
  float* outr[kMaxRows];
  for (int r = 0; r < n_rows; ++r) {
    const int j = r / n_group, g = r % n_group;
    qr[r] = q + j * q_stride + int64_t(g) * head_dim;
    outr[r] = out + j * out_stride + int64_t(g) * head_dim;
    sr[r] = scratch + r * ctx_stride;
  }
  alignas(32) float kt[kMaxSimdHeadDim * 16];
  const bool keys_in_place = k.token_stride == 1 && k.block_size % 16 == 0;
  // This head's keys `ahead` blocks on, the first ones before the sweep.
  const int64_t ahead = kv_prefetch::blocks_ahead<T>(k, head_dim);
  if (keys_in_place) {
    for (int64_t b = 0; b < ahead; ++b) kv_prefetch::head_block<T>(k, kv_head, b, max_ctx, 0, head_dim);
  }
  for (int64_t t0 = 0; t0 < max_ctx; t0 += 16) {
    const int cnt = static_cast<int>(max_ctx - t0 < 16 ? max_ctx - t0 : 16);
    if (keys_in_place && t0 % k.block_size == 0) {
      kv_prefetch::head_block<T>(k, kv_head, t0 / k.block_size + ahead, max_ctx, 0, head_dim);
    }
    load_keys_transposed<L>(k, kv_head, head_dim, t0, cnt, kt);
    int r = 0;
    for (; r + 4 <= n_rows; r += 4) score_rows<4>(qr + r, kt, head_dim, scale, sr + r, t0);
    for (; r < n_rows; ++r) score_rows<1>(qr + r, kt, head_dim, scale, sr + r, t0);
  }
  int64_t n_ctx[kMaxRows];
  float inverse_sum[kMaxRows];
  for (int r = 0; r < n_rows; ++r) {
    n_ctx[r] = key_counts[r / n_group];
    inverse_sum[r] = exp_row_inverse_sum(sr[r], n_ctx[r]);
  }
  const int full = head_dim / 8 * 8;
  weighted_values<L>(v, kv_head, head_dim, full, n_rows, sr, n_ctx, outr);
  // The dims past the last multiple of 8, one at a time.
  if (full < head_dim) {
    const T* vdata = static_cast<const T*>(v.data);
    for (int r = 0; r < n_rows; ++r) {
      for (int d = full; d < head_dim; ++d) outr[r][d] = 0.0f;
    }
    for (int64_t t = 0; t < max_ctx; ++t) {
      const T* row = vdata + int64_t(v.block_table[t / v.block_size]) * v.block_stride +
                     (t % v.block_size) * v.token_stride + int64_t(kv_head) * v.head_stride;
      for (int r = 0; r < n_rows; ++r) {
        if (t >= n_ctx[r]) continue;
        for (int d = full; d < head_dim; ++d) outr[r][d] = std::fma(sr[r][t], L::one(row + d * v.dim_stride), outr[r][d]);
      }
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    const __m256 inv = _mm256_set1_ps(inverse_sum[r]);
    int d = 0;
    for (; d + 8 <= head_dim; d += 8) _mm256_storeu_ps(outr[r] + d, _mm256_mul_ps(_mm256_loadu_ps(outr[r] + d), inv));
    for (; d < head_dim; ++d) outr[r][d] *= inverse_sum[r];
  }
}

void attention_avx2(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim, const KvView& k,
                    const KvView& v, int kv_head, const int64_t* key_counts, float scale, float* out, size_t out_stride,
                    float* scratch) {
  if (head_dim > kMaxSimdHeadDim || n_group > 64) {
    return scalar_kernel_table().attention(q, q_stride, n_tokens, n_group, head_dim, k, v, kv_head, key_counts, scale,
                                           out, out_stride, scratch);
  }
  if (k.type == DType::F16) {
    attention_typed<KvF16>(q, q_stride, n_tokens, n_group, head_dim, k, v, kv_head, key_counts, scale, out, out_stride,
                           scratch);
  } else {
    attention_typed<KvF32>(q, q_stride, n_tokens, n_group, head_dim, k, v, kv_head, key_counts, scale, out, out_stride,
                           scratch);
  }
}

void to_fp16_avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace

void add_avx2_row_kernels(KernelTable& t) {
  t.to_fp16 = to_fp16_avx2;
  t.rms_norm = rms_norm_avx2;
  t.softmax = softmax_avx2;
  t.silu_mul = silu_mul_avx2;
  t.add_inplace = add_inplace_avx2;
  t.conv_silu = conv_silu_avx2;
  t.rope = rope_avx2;
  t.attention = attention_avx2;
}

}  // namespace spillway::kernels
