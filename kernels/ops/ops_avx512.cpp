// AVX-512: row operations, RoPE rotation and paged attention on 16-float vectors, with
// masked loads/stores for tails.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"
#include "kernels/ops/exp_poly_avx512.h"
#include "kernels/ops/kv_prefetch.h"

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

// e^x, about 1 ulp (vscalefps for 2^n); 0 below -87.34 (the smallest normal result), +Inf
// above 88.72, NaN stays NaN.
struct RowExpClamp {
  static constexpr float kLo = -87.336544f;
};
inline __m512 exp_ps(__m512 x) { return exp16_clamped<RowExpClamp, true>(x); }

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

// The maximum of x[0, n) in every lane, two independent chains over alternate vectors.
inline __m512 row_max(const float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax0 = minus_inf, vmax1 = minus_inf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    vmax0 = _mm512_max_ps(vmax0, _mm512_loadu_ps(x + i));
    vmax1 = _mm512_max_ps(vmax1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16) vmax0 = _mm512_max_ps(vmax0, _mm512_mask_loadu_ps(minus_inf, tail_mask(n - i), x + i));
  return _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(vmax0, vmax1)));
}

// Two independent max and sum chains over alternate vectors: one chain is latency-bound
// (a max, or two double adds, per 16 floats).
void softmax_avx512(float* x, int64_t n) {
  const __m512 m = row_max(x, n);
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
    const __m512 e1 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
    _mm512_storeu_ps(x + i, e0);
    _mm512_storeu_ps(x + i + 16, e1);
    acc0 = add_widened(acc0, e0);
    acc1 = add_widened(acc1, e1);
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m)));
    _mm512_mask_storeu_ps(x + i, k, e);
    acc0 = add_widened(acc0, e);
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1))));
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
  }
}

inline __m512 silu_mul16(__m512 g, __m512 u) {
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, k, silu_mul16(_mm512_maskz_loadu_ps(k, gate + i), _mm512_maskz_loadu_ps(k, up + i)));
  }
}

void conv_silu_avx512(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1,
                      float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t ch = c0; ch < c1; ch += 16) {
    const __mmask16 m = tail_mask(c1 - ch);
    __m512 acc = _mm512_setzero_ps();
    for (int32_t k = 0; k < K; ++k) {
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, taps + int64_t{k} * C + ch),
                                             _mm512_maskz_loadu_ps(m, rows[k] + ch)));
    }
    _mm512_mask_storeu_ps(out + ch, m, silu_mul16(acc, one));
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
// Scores with lanes over 16 keys (K transposed: one dim of 16 keys per vector, a broadcast
// query element per fma), so every query head of the GQA group reuses the keys from L1;
// p . V with lanes over dims, every head of the group reusing each V row. Both keep the
// per-output fma order of the contract in kernels.h. In a batched decode step K and V come
// from DRAM (a task reads one sequence's run of one kv head once); bench_kernels'
// attention_batch measures that case, attention/* the in-cache one (bench/README.md,
// "Attention: fewer instructions per key").

constexpr int kMaxSimdHeadDim = 256;

struct KvF32 {
  using T = float;
  static __m512 load(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
  static float one(const float* p) { return *p; }
};
struct KvF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p, __mmask16 k) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p)); }
  static float one(const uint16_t* p) { return _cvtsh_ss(*p); }
};

// kt[d * 16 + i] = K[t0 + i][d] of kv head h for i < cnt (<= 16), 0 for i >= cnt.
template <class L>
void load_keys_transposed(const KvView& k, int h, int head_dim, int64_t t0, int cnt, float* kt) {
  using T = typename L::T;
  const T* data = static_cast<const T*>(k.data);
  const int64_t bs = k.block_size;
  if (k.token_stride == 1 && bs % 16 == 0) {  // t0 % 16 == 0: the keys are consecutive in one block
    const T* base = data + int64_t(k.block_table[t0 / bs]) * k.block_stride + t0 % bs + int64_t(h) * k.head_stride;
    const __mmask16 m = tail_mask(cnt);
    for (int d = 0; d < head_dim; ++d) _mm512_store_ps(kt + d * 16, L::load(base + d * k.dim_stride, m));
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

// e^x for x <= 0 or NaN (a score less its row's maximum): exp_ps's value for every such x.
inline __m512 exp_nonpositive(__m512 x) { return exp16_clamped<RowExpClamp, true, true>(x); }

// The attention's softmax without its normalisation: x[t] = e^(x[t] - max) in place, returns
// 1 / sum_t x[t] (the caller scales the row's p . V by it: one multiply per output instead of
// one per key). The sum: float partial sums over runs of 256 keys, added in double.
float exp_row_inverse_sum(float* x, int64_t n) {
  const __m512 minus_inf = _mm512_set1_ps(-__builtin_inff());
  const __m512 m = row_max(x, n);
  __m512d total = _mm512_setzero_pd();
  int64_t i = 0;
  while (i + 32 <= n) {
    __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
    const int64_t run_end = n - i >= 256 ? i + 256 : i + (n - i) / 32 * 32;
    for (; i < run_end; i += 32) {
      const __m512 e0 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
      const __m512 e1 = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), m));
      _mm512_storeu_ps(x + i, e0);
      _mm512_storeu_ps(x + i + 16, e1);
      sum0 = _mm512_add_ps(sum0, e0);
      sum1 = _mm512_add_ps(sum1, e1);
    }
    total = add_widened(total, _mm512_add_ps(sum0, sum1));
  }
  for (; i < n; i += 16) {  // the lanes past n read -inf: their exp is 0
    const __mmask16 k = tail_mask(n - i);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(minus_inf, k, x + i), m));
    _mm512_mask_storeu_ps(x + i, k, e);
    total = add_widened(total, e);
  }
  return static_cast<float>(1.0 / _mm512_reduce_add_pd(total));
}

// scores[r][t0 + i] = scale * (q_r . K[t0 + i]) for NR rows and 16 keys; keys(d): dim d of
// the 16 keys as one vector.
template <int NR, class Keys>
void score_rows(const float* const* q, Keys keys, int head_dim, float scale, float* const* scores, int64_t t0) {
  __m512 acc[NR];
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) acc[r] = _mm512_setzero_ps();
  for (int d = 0; d < head_dim; ++d) {
    const __m512 kd = keys(d);
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d]), kd, acc[r]);
  }
  const __m512 s = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) _mm512_storeu_ps(scores[r] + t0, _mm512_mul_ps(acc[r], s));
}

// score_rows for two groups of 16 keys (t0 and t0 + 16; keys(d, b): dim d of group b): each
// broadcast query element feeds both groups' fma, half the broadcast loads per fma. The same
// fma chain per score.
template <int NR, class Keys>
void score_rows2(const float* const* q, Keys keys, int head_dim, float scale, float* const* scores, int64_t t0) {
  __m512 acc[2][NR];
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
  for (int d = 0; d < head_dim; ++d) {
    const __m512 k0 = keys(d, 0), k1 = keys(d, 1);
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      const __m512 qd = _mm512_set1_ps(q[r][d]);
      acc[0][r] = _mm512_fmadd_ps(qd, k0, acc[0][r]);
      acc[1][r] = _mm512_fmadd_ps(qd, k1, acc[1][r]);
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) {
    _mm512_storeu_ps(scores[r] + t0, _mm512_mul_ps(acc[0][r], s));
    _mm512_storeu_ps(scores[r] + t0 + 16, _mm512_mul_ps(acc[1][r], s));
  }
}

// One block's keys [t0, t0 + count) (row i of the block at rows + i * token_stride, dims from
// d0) added into acc[r] for NR rows: acc[r][c] += p_r[t] * V[t][d0 + 16c ..), t increasing,
// keys at or past n_ctx[r] skipped for row r (min_ctx: the smallest n_ctx). kContiguous: the
// block's rows hold their dims consecutively (dim_stride 1, as the engine keeps V).
template <class L, int NV, int NR, bool kContiguous>
inline void weighted_values_block(const KvView& v, const typename L::T* rows, int64_t t0, int64_t count,
                                  int chunk_dims, const __mmask16* mask, const float* const* pr, const int64_t* n_ctx,
                                  int64_t min_ctx, __m512 (&acc)[NR][NV]) {
  auto load_row = [&](int64_t i, __m512* vv) {
    const typename L::T* row = rows + i * v.token_stride;
    if constexpr (kContiguous) {
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) vv[c] = L::load(row + 16 * c, mask[c]);
    } else {
      alignas(64) float gathered[16 * NV];
      for (int d = 0; d < 16 * NV; ++d) gathered[d] = d < chunk_dims ? L::one(row + d * v.dim_stride) : 0.0f;
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) vv[c] = _mm512_load_ps(gathered + 16 * c);
    }
  };
  // Keys every row attends to, without per-row checks; then the rest, checked per row.
  const int64_t common = min_ctx - t0 >= count ? count : (min_ctx > t0 ? min_ctx - t0 : 0);
  int64_t i = 0;
  for (; i < common; ++i) {
    __m512 vv[NV];
    load_row(i, vv);
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      const __m512 pi = _mm512_set1_ps(pr[r][t0 + i]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pi, vv[c], acc[r][c]);
    }
  }
  for (; i < count; ++i) {
    __m512 vv[NV];
    load_row(i, vv);
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
      if (t0 + i >= n_ctx[r]) continue;
      const __m512 pi = _mm512_set1_ps(pr[r][t0 + i]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pi, vv[c], acc[r][c]);
    }
  }
}

// out_r[16 * c0 ..) = sum over t < n_ctx[r] of p_r[t] * V[t][16 * c0 ..) for NR rows and the
// NV vectors of dims from vector c0 on (dims at or past head_dim are neither read nor written).
// Every output element is one fma chain over t in increasing order, whatever c0, NV and NR.
template <class L, int NV, int NR, bool kContiguous>
void weighted_values(const KvView& v, int h, int head_dim, int c0, const float* const* p, const int64_t* n_ctx,
                     float* const* out) {
  using T = typename L::T;
  const T* data = static_cast<const T*>(v.data);
  const int64_t bs = v.block_size;
  const int d0 = 16 * c0;
  __mmask16 mask[NV];
  __m512 acc[NR][NV];
#pragma GCC unroll 16
  for (int c = 0; c < NV; ++c) mask[c] = head_dim > d0 + 16 * c ? tail_mask(head_dim - d0 - 16 * c) : __mmask16(0);
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  int64_t min_ctx = n_ctx[0], max_ctx = n_ctx[0];
  for (int r = 1; r < NR; ++r) {
    min_ctx = n_ctx[r] < min_ctx ? n_ctx[r] : min_ctx;
    max_ctx = n_ctx[r] > max_ctx ? n_ctx[r] : max_ctx;
  }
  const int chunk_dims = head_dim - d0 < 16 * NV ? head_dim - d0 : 16 * NV;
  // This head's rows (this chunk's dims) `ahead` blocks on, the first ones before the sweep.
  const int64_t ahead = kv_prefetch::blocks_ahead<T>(v, chunk_dims);
  for (int64_t b = 0; b < ahead; ++b) kv_prefetch::head_block<T>(v, h, b, max_ctx, d0, chunk_dims);
  for (int64_t t0 = 0; t0 < max_ctx; t0 += bs) {
    const T* block = data + int64_t(v.block_table[t0 / bs]) * v.block_stride + int64_t(h) * v.head_stride +
                     d0 * v.dim_stride;
    const int64_t count = max_ctx - t0 < bs ? max_ctx - t0 : bs;
    kv_prefetch::head_block<T>(v, h, t0 / bs + ahead, max_ctx, d0, chunk_dims);
    weighted_values_block<L, NV, NR, kContiguous>(v, block, t0, count, chunk_dims, mask, p, n_ctx, min_ctx, acc);
  }
#pragma GCC unroll 16
  for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) _mm512_mask_storeu_ps(out[r] + d0 + 16 * c, mask[c], acc[r][c]);
  }
}

// All n_rows rows over the NV vectors of dims from c0 on: kRows rows per pass over V (24
// accumulators), then the remainder in smaller groups.
template <class L, int NV, bool kContiguous>
void weighted_values_rows(const KvView& v, int h, int head_dim, int c0, int n_rows, const float* const* p,
                          const int64_t* n_ctx, float* const* out) {
  constexpr int kRows = NV >= 24 ? 1 : 24 / NV;
  int r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    weighted_values<L, NV, kRows, kContiguous>(v, h, head_dim, c0, p + r, n_ctx + r, out + r);
  }
  if (kRows > 4 && n_rows - r >= 4) {
    weighted_values<L, NV, (kRows > 4 ? 4 : 1), kContiguous>(v, h, head_dim, c0, p + r, n_ctx + r, out + r);
    r += 4;
  }
  if (kRows > 2 && n_rows - r >= 2) {
    weighted_values<L, NV, (kRows > 2 ? 2 : 1), kContiguous>(v, h, head_dim, c0, p + r, n_ctx + r, out + r);
    r += 2;
  }
  for (; r < n_rows; ++r) weighted_values<L, NV, 1, kContiguous>(v, h, head_dim, c0, p + r, n_ctx + r, out + r);
}

// Heads wider than 64 dims (NV > 4) go through V in column chunks of 4 vectors, so that each
// V element loaded serves 6 rows instead of 24 / NV (1 row at head_dim 256).
template <class L, int NV, bool kContiguous>
void weighted_values_all(const KvView& v, int h, int head_dim, int n_rows, const float* const* p,
                         const int64_t* n_ctx, float* const* out) {
  if constexpr (NV <= 4) {
    weighted_values_rows<L, NV, kContiguous>(v, h, head_dim, 0, n_rows, p, n_ctx, out);
  } else {
    for (int c0 = 0; 16 * c0 < head_dim; c0 += 4) {
      weighted_values_rows<L, 4, kContiguous>(v, h, head_dim, c0, n_rows, p, n_ctx, out);
    }
  }
}

// V as the engine keeps it (dim_stride 1) loads each row's dims directly; any other stride
// gathers them (a separate instantiation, so the engine's inner loop carries no branch for it).
template <class L, int NV>
void weighted_values_all(const KvView& v, int h, int head_dim, int n_rows, const float* const* p,
                         const int64_t* n_ctx, float* const* out) {
  if (v.dim_stride == 1) {
    weighted_values_all<L, NV, true>(v, h, head_dim, n_rows, p, n_ctx, out);
  } else {
    weighted_values_all<L, NV, false>(v, h, head_dim, n_rows, p, n_ctx, out);
  }
}

template <class L>
void attention_typed(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim, const KvView& k,
                     const KvView& v, int kv_head, const int64_t* key_counts, float scale, float* out, size_t out_stride,
                     float* scratch) {
  constexpr int kMaxRows = kAttentionMaxTokens * 64;
  const int n_rows = n_tokens * n_group;
  int64_t max_ctx = 0;
  for (int j = 0; j < n_tokens; ++j) max_ctx = key_counts[j] > max_ctx ? key_counts[j] : max_ctx;
  const int64_t ctx_stride = (max_ctx + 15) / 16 * 16;
  const float* qr[kMaxRows];
  float* sr[kMaxRows];
  float* outr[kMaxRows];
  int64_t n_ctx[kMaxRows];
  for (int r = 0; r < n_rows; ++r) {
    const int j = r / n_group, g = r % n_group;
    qr[r] = q + j * q_stride + int64_t(g) * head_dim;
    outr[r] = out + j * out_stride + int64_t(g) * head_dim;
    sr[r] = scratch + r * ctx_stride;
    n_ctx[r] = key_counts[j];
  }
  alignas(64) float kt[2][kMaxSimdHeadDim * 16];
  const bool keys_in_place = k.token_stride == 1 && k.block_size % 16 == 0;
  using T = typename L::T;
  // This head's keys `ahead` blocks on, the first ones before the sweep.
  const int64_t ahead = kv_prefetch::blocks_ahead<T>(k, head_dim);
  if (keys_in_place) {
    for (int64_t b = 0; b < ahead; ++b) kv_prefetch::head_block<T>(k, kv_head, b, max_ctx, 0, head_dim);
  }
  auto prefetch_next_block = [&](int64_t t0) {
    if (keys_in_place && t0 % k.block_size == 0) {
      kv_prefetch::head_block<T>(k, kv_head, t0 / k.block_size + ahead, max_ctx, 0, head_dim);
    }
  };
  // Rows [r, n_rows) (fewer than 8) against the 16 keys transposed in ktb, their scores at t.
  auto score_tail = [&](int r, const float* ktb, int64_t t) {
    auto keys = [&](int d) { return _mm512_load_ps(ktb + d * 16); };
    if (n_rows - r >= 4) {
      score_rows<4>(qr + r, keys, head_dim, scale, sr + r, t);
      r += 4;
    }
    if (n_rows - r >= 2) {
      score_rows<2>(qr + r, keys, head_dim, scale, sr + r, t);
      r += 2;
    }
    if (n_rows - r >= 1) score_rows<1>(qr + r, keys, head_dim, scale, sr + r, t);
  };
  for (int64_t t0 = 0; t0 < max_ctx; t0 += 16) {
    const int cnt = static_cast<int>(max_ctx - t0 < 16 ? max_ctx - t0 : 16);
    prefetch_next_block(t0);
    if (n_rows >= 8 && !(keys_in_place && n_rows == 8) && t0 + 16 < max_ctx) {
      // Two groups of 16 keys at once, transposed into kt[0] and kt[1].
      prefetch_next_block(t0 + 16);
      const int cnt1 = static_cast<int>(max_ctx - t0 - 16 < 16 ? max_ctx - t0 - 16 : 16);
      load_keys_transposed<L>(k, kv_head, head_dim, t0, cnt, kt[0]);
      load_keys_transposed<L>(k, kv_head, head_dim, t0 + 16, cnt1, kt[1]);
      auto keys2 = [&](int d, int b) { return _mm512_load_ps(kt[b] + d * 16); };
      int r = 0;
      for (; r + 8 <= n_rows; r += 8) score_rows2<8>(qr + r, keys2, head_dim, scale, sr + r, t0);
      score_tail(r, kt[0], t0);
      score_tail(r, kt[1], t0 + 16);
      t0 += 16;  // and the loop's 16
      continue;
    }
    if (keys_in_place && n_rows == 8) {
      // Each group of 16 keys is consecutive in one block (t0 % 16 == 0): read each dim
      // directly, two groups at a time while two remain (16 fma chains instead of 8).
      auto group_base = [&](int64_t t) {
        return static_cast<const T*>(k.data) + int64_t(k.block_table[t / k.block_size]) * k.block_stride +
               t % k.block_size + int64_t(kv_head) * k.head_stride;
      };
      const int64_t ds = k.dim_stride;
      const T* base0 = group_base(t0);
      const __mmask16 m0 = tail_mask(cnt);
      if (t0 + 16 < max_ctx) {
        prefetch_next_block(t0 + 16);
        const T* base1 = group_base(t0 + 16);
        const __mmask16 m1 = tail_mask(max_ctx - t0 - 16);
        auto keys2 = [&](int d, int b) { return b == 0 ? L::load(base0 + d * ds, m0) : L::load(base1 + d * ds, m1); };
        score_rows2<8>(qr, keys2, head_dim, scale, sr, t0);
        t0 += 16;  // and the loop's 16
        continue;
      }
      score_rows<8>(qr, [&](int d) { return L::load(base0 + d * ds, m0); }, head_dim, scale, sr, t0);
      continue;
    }
    load_keys_transposed<L>(k, kv_head, head_dim, t0, cnt, kt[0]);
    auto keys = [&](int d) { return _mm512_load_ps(kt[0] + d * 16); };
    int r = 0;
    for (; r + 8 <= n_rows; r += 8) score_rows<8>(qr + r, keys, head_dim, scale, sr + r, t0);
    score_tail(r, kt[0], t0);
  }
  float inverse_sum[kMaxRows];
  for (int r = 0; r < n_rows; ++r) inverse_sum[r] = exp_row_inverse_sum(sr[r], n_ctx[r]);
  const float* const* pr = sr;
  switch ((head_dim + 15) / 16) {
    case 1: weighted_values_all<L, 1>(v, kv_head, head_dim, n_rows, pr, n_ctx, outr); break;
    case 2: weighted_values_all<L, 2>(v, kv_head, head_dim, n_rows, pr, n_ctx, outr); break;
    case 3: weighted_values_all<L, 3>(v, kv_head, head_dim, n_rows, pr, n_ctx, outr); break;
    case 4: weighted_values_all<L, 4>(v, kv_head, head_dim, n_rows, pr, n_ctx, outr); break;
    default: weighted_values_all<L, 5>(v, kv_head, head_dim, n_rows, pr, n_ctx, outr); break;  // chunks of 4
  }
  for (int r = 0; r < n_rows; ++r) {
    const __m512 inv = _mm512_set1_ps(inverse_sum[r]);
    for (int d = 0; d < head_dim; d += 16) {
      const __mmask16 m = tail_mask(head_dim - d);
      _mm512_mask_storeu_ps(outr[r] + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, outr[r] + d), inv));
    }
  }
}

void attention_avx512(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim, const KvView& k,
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

}  // namespace

void add_avx512_row_kernels(KernelTable& t) {
  t.rms_norm = rms_norm_avx512;
  t.softmax = softmax_avx512;
  t.silu_mul = silu_mul_avx512;
  t.add_inplace = add_inplace_avx512;
  t.conv_silu = conv_silu_avx512;
  t.rope = rope_avx512;
  t.attention = attention_avx512;
}

}  // namespace spillway::kernels
