// AVX2 + FMA + F16C: activation quantizers and weight-row dot kernels.
//
// Q8_0 / Q4_0: per 32-value block, |w| x sign(x, w) through maddubs/madd (llama.cpp's
// scheme), scaled by d_w * d_x into fp32 lanes. Q4_K / Q6_K: the integer sum of a 256
// block is formed exactly and scaled once, in the scalar reference's order, so these are
// bit-identical to it. Float weights: widened to fp32, fp32 FMA accumulation.
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

void quantize_act_q8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    const float amax = hmax(m);
    y[b].d = fp32_to_fp16(amax / 127.0f);
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q = pack_i32_to_i8(_mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), _mm256_cvtps_epi32(_mm256_mul_ps(v1, id)),
                                     _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), _mm256_cvtps_epi32(_mm256_mul_ps(v3, id)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), q);
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

template <class L, int NX>
void dot_float_rows(const typename L::T* w, const uint8_t* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const float* xr[NX];
  __m256 acc0[NX], acc1[NX];
  for (int i = 0; i < NX; ++i) {
    xr[i] = reinterpret_cast<const float*>(x + i * xs);
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    const __m256 w0 = L::load(w + k), w1 = L::load(w + k + 8);
    for (int i = 0; i < NX; ++i) {
      acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + k), acc0[i]);
      acc1[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[i] + k + 8), acc1[i]);
    }
  }
  for (; k + 8 <= cols; k += 8) {
    const __m256 w0 = L::load(w + k);
    for (int i = 0; i < NX; ++i) acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + k), acc0[i]);
  }
  for (int i = 0; i < NX; ++i) {
    float s = hsum(_mm256_add_ps(acc0[i], acc1[i]));
    for (int64_t t = k; t < cols; ++t) s += L::one(w + t) * xr[i][t];
    y[i * ys] = s;
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

template <class L>
struct FloatDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_float_rows<L, NX>(static_cast<const typename L::T*>(w), static_cast<const uint8_t*>(x), xs, cols, y, ys);
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};

// ---- Q8_0 / Q4_0 weights x Q8_0 activations -----------------------------------------------

// Per-lane int32 sums of w * x for 32 int8 pairs, as fp32 (|w| x sign(x, w), no saturation
// since |x| <= 127).
inline __m256 dot_i8_32(__m256i w_abs, __m256i w, __m256i x) {
  const __m256i products = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(products, _mm256_set1_epi16(1)));
}

template <class DecodeBlock, int NX>
void dot_q8_0_family(const uint8_t* w, size_t w_block_bytes, const uint8_t* x, size_t xs, int64_t cols, float* y,
                     size_t ys, DecodeBlock decode) {
  __m256 acc[NX];
  for (int i = 0; i < NX; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / 32; ++b) {
    float dw;
    const __m256i wq = decode(w + b * w_block_bytes, &dw);
    const __m256i w_abs = _mm256_sign_epi8(wq, wq);
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_0& xb = reinterpret_cast<const BlockQ8_0*>(x + i * xs)[b];
      const __m256 d = _mm256_set1_ps(dw * half_to_float(xb.d));
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
      acc[i] = _mm256_fmadd_ps(d, dot_i8_32(w_abs, wq, xq), acc[i]);
    }
  }
  for (int i = 0; i < NX; ++i) y[i * ys] = hsum(acc[i]);
}

struct DecodeQ8_0 {
  __m256i operator()(const uint8_t* p, float* d) const {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
    *d = half_to_float(b.d);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct DecodeQ4_0 {
  __m256i operator()(const uint8_t* p, float* d) const {
    const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
    *d = half_to_float(b.d);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
  }
};

template <class Decode, size_t kBlockBytes>
struct Q8_0FamilyDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q8_0_family<Decode, NX>(static_cast<const uint8_t*>(w), kBlockBytes, static_cast<const uint8_t*>(x), xs, cols,
                                y, ys, Decode{});
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q4_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    alignas(16) uint8_t sc[8], mn[8];
    q4k_scales_mins(wb[b].scales, sc, mn);
    // Each min twice, as int16, to pair with the 16 bsums (two per 32-value sub-block).
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    __m256i isum[NX];
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q, low_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
      const __m256i sc_lo = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c]));
      const __m256i sc_hi = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1]));
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
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(hsum_i32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q6_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2h = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    __m256i isum[NX];
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
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
        for (int i = 0; i < NX; ++i) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 128 * h + 32 * k));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xq), scales));
        }
      }
    }
    const float dw = half_to_float(blk.d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      // q is stored +32: subtract 32 * sum_g scale_g * bsum_g.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t offset = hsum_i32(_mm256_madd_epi16(bsums, sc16));
      acc[i] += (xb.d * dw) * static_cast<float>(hsum_i32(isum[i]) - 32 * offset);
    }
  }
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
  t.quantize_q8_0 = quantize_act_q8_0;
  t.quantize_q8_K = quantize_act_q8_k;
  t.dot[int(WeightSlot::F32)] = FloatDot<LoadF32>::run;
  t.dot[int(WeightSlot::F16)] = FloatDot<LoadF16>::run;
  t.dot[int(WeightSlot::BF16)] = FloatDot<LoadBF16>::run;
  t.dot[int(WeightSlot::Q8_0)] = Q8_0FamilyDot<DecodeQ8_0, sizeof(BlockQ8_0)>::run;
  t.dot[int(WeightSlot::Q4_0)] = Q8_0FamilyDot<DecodeQ4_0, sizeof(BlockQ4_0)>::run;
  t.dot[int(WeightSlot::Q4_K)] = Q4KDot::run;
  t.dot[int(WeightSlot::Q6_K)] = Q6KDot::run;
}

}  // namespace spillway::kernels
