// AVX-512 kernels of the float weights (F32 / F16 / BF16; FloatDotFn in kernel_table.h):
// weight rows in the 16 lanes, one widened weight vector per k feeding an fma for every
// activation row (a broadcast x_i[k] each), so every output is the contract's one fma chain
// in increasing k. Tiled groups are read as they lie (value k of row r at 16 k + r);
// row-major rows are transposed 16 x 16 in registers first.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

static_assert(kFloatDotW == 16 && kFloatDotX == 16);

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

// How far ahead a streamed group is prefetched (kTileStream), and the k steps per 64-byte line
// of a group (16 values of sizeof(T) bytes a step).
constexpr size_t kFloatPrefetchBytes = 4096;
template <class T>
constexpr int kStepsPerLine = int(64 / (kFloatDotW * sizeof(T)));

// One tiled group at g against NA activation rows (value k of row i at x[k * x_step + i]):
// y[i * ys + r] for the group's 16 rows.
template <class L, int NA>
void float_group_block(const typename L::T* g, const float* x, size_t x_step, int64_t cols, float* y, size_t ys,
                       bool stream, bool next) {
  using T = typename L::T;
  constexpr int kStep = kStepsPerLine<T>;
  __m512 acc[NA];
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) acc[i] = _mm512_setzero_ps();
  const float* xk = x;
  for (int64_t k = 0; k < cols; k += kStep) {  // cols is a multiple of 16
    // The addresses outside the tests: GCC 12 deletes a guarded prefetch computing them inside.
    const char* ahead = reinterpret_cast<const char*>(g + kFloatDotW * k) + kFloatPrefetchBytes;
    const char* following = reinterpret_cast<const char*>(g + kFloatDotW * (cols + k));
    if (stream) _mm_prefetch(ahead, _MM_HINT_T0);
    if (next) _mm_prefetch(following, _MM_HINT_T0);
#pragma GCC unroll 4
    for (int s = 0; s < kStep; ++s, xk += x_step) {
      const __m512 wv = L::load(g + kFloatDotW * (k + s));
#pragma GCC unroll 16
      for (int i = 0; i < NA; ++i) acc[i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xk[i]), acc[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) _mm512_storeu_ps(y + i * ys, acc[i]);
}

template <class L>
void float_tile_dot(const void* w, const float* x, size_t x_step, int nx, int64_t cols, float* y, size_t ys,
                    int flags) {
  const auto* g = static_cast<const typename L::T*>(w);
  const bool next = flags & kTilePrefetchNext, stream = flags & kTileStream;
#define SPILLWAY_GROUP(NA) return float_group_block<L, NA>(g, x, x_step, cols, y, ys, stream, next);
  switch (nx) {
    case 1: SPILLWAY_GROUP(1)
    case 2: SPILLWAY_GROUP(2)
    case 3: SPILLWAY_GROUP(3)
    case 4: SPILLWAY_GROUP(4)
    case 5: SPILLWAY_GROUP(5)
    case 6: SPILLWAY_GROUP(6)
    case 7: SPILLWAY_GROUP(7)
    case 8: SPILLWAY_GROUP(8)
    case 9: SPILLWAY_GROUP(9)
    case 10: SPILLWAY_GROUP(10)
    case 11: SPILLWAY_GROUP(11)
    case 12: SPILLWAY_GROUP(12)
    case 13: SPILLWAY_GROUP(13)
    case 14: SPILLWAY_GROUP(14)
    case 15: SPILLWAY_GROUP(15)
    default: SPILLWAY_GROUP(16)
  }
#undef SPILLWAY_GROUP
}

// Two consecutive tiled groups at g against NA activation rows: y[i * ys + r] for r < 32, each
// output's chain as float_group_block forms it.
template <class L, int NA>
void float_group2_block(const typename L::T* g, const float* x, size_t x_step, int64_t cols, float* y, size_t ys,
                        bool stream, bool next) {
  using T = typename L::T;
  constexpr int kStep = kStepsPerLine<T>;
  const T* g2 = g + kFloatDotW * cols;
  __m512 acc[2][NA];
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) acc[0][i] = acc[1][i] = _mm512_setzero_ps();
  const float* xk = x;
  for (int64_t k = 0; k < cols; k += kStep) {
    const char* ahead0 = reinterpret_cast<const char*>(g + kFloatDotW * k) + kFloatPrefetchBytes;
    const char* ahead1 = reinterpret_cast<const char*>(g2 + kFloatDotW * k) + kFloatPrefetchBytes;
    const char* following0 = reinterpret_cast<const char*>(g2 + kFloatDotW * (cols + k));
    const char* following1 = reinterpret_cast<const char*>(g2 + kFloatDotW * (2 * cols + k));
    if (stream) {
      _mm_prefetch(ahead0, _MM_HINT_T0);
      _mm_prefetch(ahead1, _MM_HINT_T0);
    }
    if (next) {
      _mm_prefetch(following0, _MM_HINT_T0);
      _mm_prefetch(following1, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int s = 0; s < kStep; ++s, xk += x_step) {
      const __m512 w0 = L::load(g + kFloatDotW * (k + s)), w1 = L::load(g2 + kFloatDotW * (k + s));
#pragma GCC unroll 16
      for (int i = 0; i < NA; ++i) {
        const __m512 xb = _mm512_set1_ps(xk[i]);
        acc[0][i] = _mm512_fmadd_ps(w0, xb, acc[0][i]);
        acc[1][i] = _mm512_fmadd_ps(w1, xb, acc[1][i]);
      }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) {
    _mm512_storeu_ps(y + i * ys, acc[0][i]);
    _mm512_storeu_ps(y + i * ys + kFloatDotW, acc[1][i]);
  }
}

// float_tile2_dot: the activation rows in passes of at most 12 (2 x 12 accumulators), as even
// as they go; the first pass streams the two groups, the last prefetches the next two.
template <class L>
void float_tile2_dot(const void* w, const float* x, size_t x_step, int nx, int64_t cols, float* y, size_t ys,
                     int flags) {
  const auto* g = static_cast<const typename L::T*>(w);
  const int passes = (nx + 11) / 12;
  for (int p = 0, i = 0; p < passes; ++p) {
    const int n = (nx - i) / (passes - p);
    const bool stream = p == 0 && (flags & kTileStream), next = p == passes - 1 && (flags & kTilePrefetchNext);
    const float* xb = x + i;
    float* yb = y + i * ys;
#define SPILLWAY_GROUPS(NA) float_group2_block<L, NA>(g, xb, x_step, cols, yb, ys, stream, next); break;
    switch (n) {
      case 1: SPILLWAY_GROUPS(1)
      case 2: SPILLWAY_GROUPS(2)
      case 3: SPILLWAY_GROUPS(3)
      case 4: SPILLWAY_GROUPS(4)
      case 5: SPILLWAY_GROUPS(5)
      case 6: SPILLWAY_GROUPS(6)
      case 7: SPILLWAY_GROUPS(7)
      case 8: SPILLWAY_GROUPS(8)
      case 9: SPILLWAY_GROUPS(9)
      case 10: SPILLWAY_GROUPS(10)
      case 11: SPILLWAY_GROUPS(11)
      default: SPILLWAY_GROUPS(12)
    }
#undef SPILLWAY_GROUPS
    i += n;
  }
}

// FloatTilePairFn: step k of group 0, then of group 1, one broadcast x[k] for both; each
// output's chain as float_group_block<L, 1> forms it.
template <class L>
void float_tile_pair(const void* const w[2], const float* x, int64_t cols, float* const y[2]) {
  using T = typename L::T;
  constexpr int kStep = kStepsPerLine<T>;
  const T* g[2] = {static_cast<const T*>(w[0]), static_cast<const T*>(w[1])};
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t k = 0; k < cols; k += kStep) {
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(g[s] + kFloatDotW * k) + kFloatPrefetchBytes, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kStep; ++j) {
      const __m512 xb = _mm512_set1_ps(x[k + j]);
      acc[0] = _mm512_fmadd_ps(L::load(g[0] + kFloatDotW * (k + j)), xb, acc[0]);
      acc[1] = _mm512_fmadd_ps(L::load(g[1] + kFloatDotW * (k + j)), xb, acc[1]);
    }
  }
  _mm512_storeu_ps(y[0], acc[0]);
  _mm512_storeu_ps(y[1], acc[1]);
}

// v[c] <- column c of the 16 x 16 matrix whose row r is v[r].
inline void transpose16(__m512 (&v)[16]) {
  __m512 a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // b[4 i + j], 128-bit lane l: rows 4 i .. 4 i + 3 at column 4 l + j.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d lo0 = _mm512_castps_pd(a[4 * i]), lo1 = _mm512_castps_pd(a[4 * i + 2]);
    const __m512d hi0 = _mm512_castps_pd(a[4 * i + 1]), hi1 = _mm512_castps_pd(a[4 * i + 3]);
    b[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 u0 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x88), u1 = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x88), u3 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xDD);
    v[j] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    v[8 + j] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    v[12 + j] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
}

// Row-major rows (FloatDotFn): 16 values of up to 16 rows at a time, transposed so each
// vector holds the rows' values at one k, then the tiled kernel's fma chains.
template <class L, int NA>
void float_rows_block(const uint8_t* w, size_t ws, int nw, const float* x, size_t x_step, int64_t cols, float* y,
                      size_t ys) {
  using T = typename L::T;
  __m512 acc[NA];
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) acc[i] = _mm512_setzero_ps();
  alignas(64) float columns[16][16];
  for (int64_t k0 = 0; k0 < cols; k0 += 16) {
    const int n = cols - k0 < 16 ? int(cols - k0) : 16;
    const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      v[r] = r < nw ? L::load_masked(reinterpret_cast<const T*>(w + r * ws) + k0, m) : _mm512_setzero_ps();
    }
    transpose16(v);
#pragma GCC unroll 16
    for (int c = 0; c < 16; ++c) _mm512_store_ps(columns[c], v[c]);
    const float* xk = x + k0 * x_step;
    for (int c = 0; c < n; ++c, xk += x_step) {
      const __m512 wv = _mm512_load_ps(columns[c]);
#pragma GCC unroll 16
      for (int i = 0; i < NA; ++i) acc[i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xk[i]), acc[i]);
    }
  }
  const __mmask16 rows = nw >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nw) - 1);
#pragma GCC unroll 16
  for (int i = 0; i < NA; ++i) _mm512_mask_storeu_ps(y + i * ys, rows, acc[i]);
}

template <class L>
void float_dot(const void* w, size_t ws, int nw, const float* x, size_t x_step, int nx, int64_t cols, float* y,
               size_t ys) {
  const auto* wb = static_cast<const uint8_t*>(w);
#define SPILLWAY_ROWS(NA) return float_rows_block<L, NA>(wb, ws, nw, x, x_step, cols, y, ys);
  switch (nx) {
    case 1: SPILLWAY_ROWS(1)
    case 2: SPILLWAY_ROWS(2)
    case 3: SPILLWAY_ROWS(3)
    case 4: SPILLWAY_ROWS(4)
    case 5: SPILLWAY_ROWS(5)
    case 6: SPILLWAY_ROWS(6)
    case 7: SPILLWAY_ROWS(7)
    case 8: SPILLWAY_ROWS(8)
    case 9: SPILLWAY_ROWS(9)
    case 10: SPILLWAY_ROWS(10)
    case 11: SPILLWAY_ROWS(11)
    case 12: SPILLWAY_ROWS(12)
    case 13: SPILLWAY_ROWS(13)
    case 14: SPILLWAY_ROWS(14)
    case 15: SPILLWAY_ROWS(15)
    default: SPILLWAY_ROWS(16)
  }
#undef SPILLWAY_ROWS
}

// TransposeRowsFn: 16 values of the n rows at a time, transposed in registers.
void transpose_rows(const float* x, size_t x_stride, int n, int64_t cols, float* out) {
  for (int64_t k0 = 0; k0 < cols; k0 += 16) {
    const int left = cols - k0 < 16 ? int(cols - k0) : 16;
    const __mmask16 m = left == 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    __m512 v[16];
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) v[r] = r < n ? _mm512_maskz_loadu_ps(m, x + r * x_stride + k0) : _mm512_setzero_ps();
    transpose16(v);
    const __mmask16 rows = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
    for (int c = 0; c < left; ++c) _mm512_mask_storeu_ps(out + (k0 + c) * kFloatDotX, rows, v[c]);
  }
}

}  // namespace

void add_avx512_float_kernels(KernelTable& t) {
  t.float_dot[0] = float_dot<LoadF32>;
  t.float_dot[1] = float_dot<LoadF16>;
  t.float_dot[2] = float_dot<LoadBF16>;
  t.float_tile_dot[0] = float_tile_dot<LoadF32>;
  t.float_tile_dot[1] = float_tile_dot<LoadF16>;
  t.float_tile_dot[2] = float_tile_dot<LoadBF16>;
  t.float_tile_pair[0] = float_tile_pair<LoadF32>;
  t.float_tile_pair[1] = float_tile_pair<LoadF16>;
  t.float_tile_pair[2] = float_tile_pair<LoadBF16>;
  t.transpose_rows = transpose_rows;
  t.float_tile2_dot[0] = float_tile2_dot<LoadF32>;
  t.float_tile2_dot[1] = float_tile2_dot<LoadF16>;
  t.float_tile2_dot[2] = float_tile2_dot<LoadBF16>;
}

}  // namespace spillway::kernels
