// AVX-512 (F/BW/VL/DQ/VNNI) weight-row dot kernels. Activation quantizers come from the
// AVX2 table (the AVX-512 table extends it).
//
// Integer dots use VNNI vpdpbusd (u8 x s8 -> int32, no saturation): Q8_0 / Q4_0 as
// |w| x sign(x, w) two blocks per zmm; Q4_K / Q6_K with their unsigned quants directly
// (Q6_K's +32 offset removed through the activation block sums). K-quant integer sums are
// formed exactly and scaled once per 256 block, as in the scalar reference.
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined_*().
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i combine(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

inline int32_t hsum_i32_256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

#define SPILLWAY_DISPATCH_NX(fn, nx, ...) \
  switch (nx) {                           \
    case 1: fn<1>(__VA_ARGS__); break;    \
    case 2: fn<2>(__VA_ARGS__); break;    \
    case 3: fn<3>(__VA_ARGS__); break;    \
    default: fn<4>(__VA_ARGS__); break;   \
  }

// ---- float weights ------------------------------------------------------------------------

struct LoadF32 {
  using T = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct LoadF16 {
  using T = uint16_t;
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m512 widen(__m256i raw) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_masked(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <class L, int NX>
void dot_float_rows(const typename L::T* w, const uint8_t* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const float* xr[NX];
  __m512 acc0[NX], acc1[NX];
  for (int i = 0; i < NX; ++i) {
    xr[i] = reinterpret_cast<const float*>(x + i * xs);
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) {
    const __m512 w0 = L::load(w + k), w1 = L::load(w + k + 16);
    for (int i = 0; i < NX; ++i) {
      acc0[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr[i] + k), acc0[i]);
      acc1[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr[i] + k + 16), acc1[i]);
    }
  }
  for (; k < cols; k += 16) {
    const __mmask16 m = cols - k >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - k)) - 1);
    const __m512 w0 = L::load_masked(w + k, m);
    for (int i = 0; i < NX; ++i) acc0[i] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, xr[i] + k), acc0[i]);
  }
  for (int i = 0; i < NX; ++i) y[i * ys] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
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

struct DecodeQ8_0 {
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static __m256i quants(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ8_0*>(p)->qs));
  }
  static float scale(const uint8_t* p) { return half_to_float(reinterpret_cast<const BlockQ8_0*>(p)->d); }
};
struct DecodeQ4_0 {
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static __m256i quants(const uint8_t* p) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const BlockQ4_0*>(p)->qs));
    const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
  }
  static float scale(const uint8_t* p) { return half_to_float(reinterpret_cast<const BlockQ4_0*>(p)->d); }
};

inline __m256i load_x_quants(const BlockQ8_0& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }

template <class D, int NX>
void dot_q8_0_family(const uint8_t* w, const uint8_t* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const int64_t nb = cols / 32;
  __m512 acc[NX];
  for (int i = 0; i < NX; ++i) acc[i] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* w0 = w + b * D::kBytes;
    const __m512i wq = combine(D::quants(w0), D::quants(w0 + D::kBytes));
    const __m512i w_abs = _mm512_abs_epi8(wq);
    const __mmask64 negative = _mm512_movepi8_mask(wq);
    const float d0 = D::scale(w0), d1 = D::scale(w0 + D::kBytes);
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_0* xb = reinterpret_cast<const BlockQ8_0*>(x + i * xs) + b;
      const __m512i xq = combine(load_x_quants(xb[0]), load_x_quants(xb[1]));
      const __m512i x_signed = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_abs, x_signed);
      const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(d0 * half_to_float(xb[0].d)),
                                          _mm256_set1_ps(d1 * half_to_float(xb[1].d)), 1);
      acc[i] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc[i]);
    }
  }
  float tail[NX];
  for (int i = 0; i < NX; ++i) tail[i] = 0.0f;
  if (b < nb) {  // odd block count: one block in a ymm
    const uint8_t* w0 = w + b * D::kBytes;
    const __m256i wq = D::quants(w0);
    const __m256i w_abs = _mm256_abs_epi8(wq);
    const float d0 = D::scale(w0);
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_0& xb = reinterpret_cast<const BlockQ8_0*>(x + i * xs)[b];
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w_abs, _mm256_sign_epi8(load_x_quants(xb), wq));
      const __m256 s = _mm256_cvtepi32_ps(sums);
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      h = _mm_add_ss(h, _mm_movehdup_ps(h));
      tail[i] = (d0 * half_to_float(xb.d)) * _mm_cvtss_f32(h);
    }
  }
  for (int i = 0; i < NX; ++i) y[i * ys] = _mm512_reduce_add_ps(acc[i]) + tail[i];
}

template <class D>
struct Q8_0FamilyDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q8_0_family<D, NX>(static_cast<const uint8_t*>(w), static_cast<const uint8_t*>(x), xs, cols, y, ys);
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
    __m512i isum[NX];
    for (int i = 0; i < NX; ++i) isum[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      const __m512i nibbles = combine(_mm256_and_si256(q, low_mask), _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask));
      const __m512i scales = combine(_mm256_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]));
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m512i xq = _mm512_loadu_si512(xb.qs + 64 * c);
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, xq);
        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(sums, scales));
      }
    }
    const float dw = half_to_float(wb[b].d), dmin = half_to_float(wb[b].dmin);
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32_256(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(_mm512_reduce_add_epi32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------

// int32 lanes [s[0] x4, s[1] x4, s[2] x4, s[3] x4] from four int8 scales.
inline __m512i group_scales(const int8_t* s) {
  int32_t four;
  std::memcpy(&four, s, 4);
  const __m128i spread = _mm_shuffle_epi8(_mm_cvtsi32_si128(four), _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  return _mm512_cvtepi8_epi32(spread);
}

template <int NX>
void dot_q6_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2h = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    __m512i isum[NX];
    for (int i = 0; i < NX; ++i) isum[i] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      const __m512i qh_a = combine(qh, _mm256_srli_epi16(qh, 2));                          // quarters 0, 1
      const __m512i qh_b = combine(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));    // quarters 2, 3
      const __m512i q_a = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh_a, 4), m2h));
      const __m512i q_b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh_b, 4), m2h));
      const __m512i sc_a = group_scales(blk.scales + 8 * h), sc_b = group_scales(blk.scales + 8 * h + 4);
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m512i xa = _mm512_loadu_si512(xb.qs + 128 * h), xbq = _mm512_loadu_si512(xb.qs + 128 * h + 64);
        const __m512i pa = _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q_a, xa), sc_a);
        const __m512i pb = _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q_b, xbq), sc_b);
        isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(pa, pb));
      }
    }
    const float dw = half_to_float(blk.d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t offset = hsum_i32_256(_mm256_madd_epi16(bsums, sc16));
      acc[i] += (xb.d * dw) * static_cast<float>(_mm512_reduce_add_epi32(isum[i]) - 32 * offset);
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

void add_avx512_dot_kernels(KernelTable& t) {
  t.dot[int(WeightSlot::F32)] = FloatDot<LoadF32>::run;
  t.dot[int(WeightSlot::F16)] = FloatDot<LoadF16>::run;
  t.dot[int(WeightSlot::BF16)] = FloatDot<LoadBF16>::run;
  t.dot[int(WeightSlot::Q8_0)] = Q8_0FamilyDot<DecodeQ8_0>::run;
  t.dot[int(WeightSlot::Q4_0)] = Q8_0FamilyDot<DecodeQ4_0>::run;
  t.dot[int(WeightSlot::Q4_K)] = Q4KDot::run;
  t.dot[int(WeightSlot::Q6_K)] = Q6KDot::run;
}

}  // namespace spillway::kernels
