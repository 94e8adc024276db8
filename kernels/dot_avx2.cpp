// AVX2 + FMA + F16C: activation quantizers and weight-row dot kernels.
//
// Every kernel keeps the per-output order of its contract in kernel_table.h (float weights:
// 16 fp32 lanes over k; Q8_0 / Q4_0 tiles: exact block sums, one fma per block; Q4_K / Q6_K:
// exact 256-block sums scaled once), so all are bit-identical to the scalar reference.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Four vectors of 8 int32 (each within int8 range) -> 32 int8 in element order.
inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantizers (bit-identical to the scalar ones) -----------------------------

void quantize_q8(const float* x, int64_t n, int32_t offset, void* group, int row) {
  const Q8Group g = q8_group(group, n);
  auto* q4 = const_cast<int32_t*>(g.q4);
  auto* d = const_cast<float*>(g.d);
  auto* corr = const_cast<int32_t*>(g.corr);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    const float amax = hmax(m);
    d[b * kTileActs + row] = half_to_float(fp32_to_fp16(amax / 127.0f));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    corr[b * kTileActs + row] = -offset * hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    alignas(32) int32_t words[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(words), pack_i32_to_i8(q0, q1, q2, q3));
    for (int k = 0; k < 8; ++k) q4[(b * 8 + k) * kTileActs + row] = words[k];
  }
}

void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    int first = 0;  // the first value of largest magnitude sets the sign of the scale
    while (!(x[first] == amax || x[first] == -amax)) ++first;
    const float iscale = -127.0f / x[first];
    const __m256 s = _mm256_set1_ps(iscale);
    const __m256i limit = _mm256_set1_epi32(127);
    for (int j = 0; j < kQK_K; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), s)), limit);
      }
      y[b].bsums[j / 16] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[b].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + j), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
    y[b].d = 1.0f / iscale;
  }
}

// ---- float weights ------------------------------------------------------------------------

struct LoadF32 {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float one(const uint16_t* p) {
    const uint32_t u = uint32_t{*p} << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

// One weight row against NX activation rows, lanes 0-7 and 8-15 of FloatDotFn's 16 in two
// vectors.
// kMul 4: a row of a tiled group (values k..k+15 at w + 4k), cols a multiple of 16.
template <class L, int NX, int kMul = 1>
void float_dot_row(const typename L::T* w, const float* x, size_t xs, int64_t cols, float* y, size_t ys) {
  __m256 lo[NX], hi[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
    lo[i] = _mm256_setzero_ps();
    hi[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    const __m256 w0 = L::load(w + kMul * k), w1 = L::load(w + kMul * k + 8);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      lo[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * xs + k), lo[i]);
      hi[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * xs + k + 8), hi[i]);
    }
  }
  if (k < cols) {  // zero-padded tail: copy the remaining values into a padded buffer
    alignas(32) float wt[16] = {}, xt[16];
    for (int64_t t = k; t < cols; ++t) wt[t - k] = L::one(w + t);
    const __m256 w0 = _mm256_load_ps(wt), w1 = _mm256_load_ps(wt + 8);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      for (int t = 0; t < 16; ++t) xt[t] = k + t < cols ? x[i * xs + k + t] : 0.0f;
      lo[i] = _mm256_fmadd_ps(w0, _mm256_load_ps(xt), lo[i]);
      hi[i] = _mm256_fmadd_ps(w1, _mm256_load_ps(xt + 8), hi[i]);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
    const __m256 s8 = _mm256_add_ps(lo[i], hi[i]);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    y[i * ys] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
}

template <class L>
void float_tile_dot(const void* w, const float* x, size_t xs, int nx, int64_t cols, float* y, size_t ys,
                    int /*flags*/) {
  const auto* g = static_cast<const typename L::T*>(w);
  for (int j = 0; j < kFloatDotW; ++j) {
    int i = 0;
    for (; i + 3 <= nx; i += 3) float_dot_row<L, 3, 4>(g + 16 * j, x + i * xs, xs, cols, y + i * ys + j, ys);
    if (nx - i == 2) float_dot_row<L, 2, 4>(g + 16 * j, x + i * xs, xs, cols, y + i * ys + j, ys);
    if (nx - i == 1) float_dot_row<L, 1, 4>(g + 16 * j, x + i * xs, xs, cols, y + i * ys + j, ys);
  }
}

template <class L>
void float_dot(const void* w, size_t ws, int nw, const float* x, size_t xs, int nx, int64_t cols, float* y,
               size_t ys) {
  for (int j = 0; j < nw; ++j) {
    const auto* wr = reinterpret_cast<const typename L::T*>(static_cast<const uint8_t*>(w) + j * ws);
    int i = 0;
    for (; i + 3 <= nx; i += 3) float_dot_row<L, 3>(wr, x + i * xs, xs, cols, y + i * ys + j, ys);
    if (nx - i == 2) float_dot_row<L, 2>(wr, x + i * xs, xs, cols, y + i * ys + j, ys);
    if (nx - i == 1) float_dot_row<L, 1>(wr, x + i * xs, xs, cols, y + i * ys + j, ys);
  }
}

// Instantiates fn<1..4> for a runtime row count.
#define SPILLWAY_DISPATCH_NX(fn, nx, ...) \
  switch (nx) {                           \
    case 1: fn<1>(__VA_ARGS__); break;    \
    case 2: fn<2>(__VA_ARGS__); break;    \
    case 3: fn<3>(__VA_ARGS__); break;    \
    default: fn<4>(__VA_ARGS__); break;   \
  }

// ---- Q8_0 / Q4_0 tiles x Q8 activations ----------------------------------------------------
// Rows 0-7 and 8-15 of a tile in two vectors of 8 int32 lanes. Q8_0 codes are turned back
// into signed quants and multiplied as |w| x sign(x, w) (maddubs cannot take the unsigned
// codes without saturating), so their block sums start from 0 instead of the correction;
// Q4_0 nibbles (0..15) go into maddubs directly and start from the correction.

// Activation rows i0..i0 + NX - 1 of the group x.
template <bool kQ4, int NX>
void tile_dot_block(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, int i0, float* y,
                    size_t ys, int flags) {
  constexpr int kGroups = kQ4 ? 4 : 8;
  constexpr size_t kCodeBytes = size_t(64) * kGroups;
  __m256 flo[NX], fhi[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
    flo[i] = (flags & kTileAccumulate) ? _mm256_loadu_ps(y + i * ys) : _mm256_setzero_ps();
    fhi[i] = (flags & kTileAccumulate) ? _mm256_loadu_ps(y + i * ys + 8) : _mm256_setzero_ps();
  }
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8(char(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* c = codes + b * kCodeBytes;
    __m256i ilo[NX], ihi[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      ilo[i] = kQ4 ? _mm256_set1_epi32(x.corr[b * kTileActs + i0 + i]) : _mm256_setzero_si256();
      ihi[i] = ilo[i];
    }
    #pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) {
      if constexpr (kQ4) {
        const __m256i raw0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64 * g));
        const __m256i raw1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64 * g + 32));
        const __m256i lo0 = _mm256_and_si256(raw0, low), lo1 = _mm256_and_si256(raw1, low);
        const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(raw0, 4), low);
        const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(raw1, 4), low);
        #pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const __m256i xa = _mm256_set1_epi32(x.q4[(b * 8 + g) * kTileActs + i0 + i]);
          const __m256i xb = _mm256_set1_epi32(x.q4[(b * 8 + 4 + g) * kTileActs + i0 + i]);
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, xa), _mm256_maddubs_epi16(hi0, xb));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, xa), _mm256_maddubs_epi16(hi1, xb));
          ilo[i] = _mm256_add_epi32(ilo[i], _mm256_madd_epi16(p0, ones));
          ihi[i] = _mm256_add_epi32(ihi[i], _mm256_madd_epi16(p1, ones));
        }
      } else {
        #pragma GCC unroll 16
        for (int h = 0; h < 2; ++h) {  // code groups 2g and 2g + 1
          const uint8_t* cg = c + 128 * g + 64 * h;
          const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cg)), bias);
          const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cg + 32)), bias);
          const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            const __m256i xv = _mm256_set1_epi32(x.q4[(b * 8 + 2 * g + h) * kTileActs + i0 + i]);
            ilo[i] = _mm256_add_epi32(ilo[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xv, w0)), ones));
            ihi[i] = _mm256_add_epi32(ihi[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xv, w1)), ones));
          }
        }
      }
    }
    const __m256 dlo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wd + b * kTileRows)));
    const __m256 dhi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wd + b * kTileRows + 8)));
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m256 dx = _mm256_set1_ps(x.d[b * kTileActs + i0 + i]);
      flo[i] = _mm256_fmadd_ps(_mm256_mul_ps(dlo, dx), _mm256_cvtepi32_ps(ilo[i]), flo[i]);
      fhi[i] = _mm256_fmadd_ps(_mm256_mul_ps(dhi, dx), _mm256_cvtepi32_ps(ihi[i]), fhi[i]);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
    _mm256_storeu_ps(y + i * ys, flo[i]);
    _mm256_storeu_ps(y + i * ys + 8, fhi[i]);
  }
}

template <bool kQ4>
void tile_dot(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, int nx, float* y, size_t ys,
              int flags) {
  int i = 0;
  for (; i + 2 <= nx; i += 2) tile_dot_block<kQ4, 2>(wd, codes, nb, x, i, y + i * ys, ys, flags);
  if (i < nx) tile_dot_block<kQ4, 1>(wd, codes, nb, x, i, y + i * ys, ys, flags);
}

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q4_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    alignas(16) uint8_t sc[8], mn[8];
    q4k_scales_mins(wb[b].scales, sc, mn);
    // Each min twice, as int16, to pair with the 16 bsums (two per 32-value sub-block).
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q, low_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
      const __m256i sc_lo = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c]));
      const __m256i sc_hi = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1]));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), sc_lo);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), sc_hi);
        isum[i] = _mm256_add_epi32(isum[i], _mm256_add_epi32(p0, p1));
      }
    }
    const float dw = half_to_float(wb[b].d), dmin = half_to_float(wb[b].dmin);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(hsum_i32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q6_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2h));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2h));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2h));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2h));
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;  // groups g (first 16 values) and g + 1
        const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(blk.scales[g + 1]), _mm_set1_epi16(blk.scales[g]));
        #pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 128 * h + 32 * k));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xq), scales));
        }
      }
    }
    const float dw = half_to_float(blk.d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      // q is stored +32: subtract 32 * sum_g scale_g * bsum_g.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t offset = hsum_i32(_mm256_madd_epi16(bsums, sc16));
      acc[i] += (xb.d * dw) * static_cast<float>(hsum_i32(isum[i]) - 32 * offset);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

struct Q4KDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q4_k_rows<NX>(w, x, xs, cols, y, ys);
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};
struct Q6KDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q6_k_rows<NX>(w, x, xs, cols, y, ys);
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};

}  // namespace

void add_avx2_dot_kernels(KernelTable& t) {
  t.quantize_q8 = quantize_q8;
  t.quantize_q8_K = quantize_act_q8_k;
  t.float_dot[0] = float_dot<LoadF32>;
  t.float_dot[1] = float_dot<LoadF16>;
  t.float_dot[2] = float_dot<LoadBF16>;
  t.float_tile_dot[0] = float_tile_dot<LoadF32>;
  t.float_tile_dot[1] = float_tile_dot<LoadF16>;
  t.float_tile_dot[2] = float_tile_dot<LoadBF16>;
  t.tile_dot[0] = tile_dot<false>;
  t.tile_dot[1] = tile_dot<true>;
  t.kquant_dot[0] = Q4KDot::run;
  t.kquant_dot[1] = Q6KDot::run;
}

}  // namespace spillway::kernels
