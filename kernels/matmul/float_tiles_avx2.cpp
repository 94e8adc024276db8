// AVX2 + FMA + F16C kernels of the float weights (F32 / F16 / BF16; FloatDotFn in
// kernel_table.h): a group's 16 weight rows in two 8-lane vectors, one widened weight vector
// pair per k feeding an fma for every activation row (a broadcast x_i[k] each), so every
// output is the contract's one fma chain in increasing k, as on AVX-512. Row-major rows are
// transposed 8 x 8 in registers first.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

static_assert(kFloatDotW == 16 && kFloatDotX == 16);

struct LoadF32 {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// How far ahead a streamed group is prefetched (kTileStream), and the k steps per 64-byte line.
constexpr size_t kFloatPrefetchBytes = 4096;
template <class T>
constexpr int kStepsPerLine = int(64 / (kFloatDotW * sizeof(T)));
// Activation rows per pass over a group: two accumulators each, in 16 registers.
constexpr int kRowsPerPass = 6;

// One tiled group at g against NA activation rows (value k of row i at x[k * x_step + i]):
// y[i * ys + r] for the group's 16 rows.
template <class L, int NA>
void float_group_block(const typename L::T* g, const float* x, size_t x_step, int64_t cols, float* y, size_t ys,
                       bool stream, bool next) {
  using T = typename L::T;
  constexpr int kStep = kStepsPerLine<T>;
  __m256 lo[NA], hi[NA];
#pragma GCC unroll 8
  for (int i = 0; i < NA; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  const float* xk = x;
  for (int64_t k = 0; k < cols; k += kStep) {  // cols is a multiple of 16
    // The addresses outside the tests: GCC 12 deletes a guarded prefetch computing them inside.
    const char* ahead = reinterpret_cast<const char*>(g + kFloatDotW * k) + kFloatPrefetchBytes;
    const char* following = reinterpret_cast<const char*>(g + kFloatDotW * (cols + k));
    if (stream) _mm_prefetch(ahead, _MM_HINT_T0);
    if (next) _mm_prefetch(following, _MM_HINT_T0);
#pragma GCC unroll 4
    for (int s = 0; s < kStep; ++s, xk += x_step) {
      const __m256 w0 = L::load(g + kFloatDotW * (k + s)), w1 = L::load(g + kFloatDotW * (k + s) + 8);
#pragma GCC unroll 8
      for (int i = 0; i < NA; ++i) {
        const __m256 xb = _mm256_broadcast_ss(xk + i);
        lo[i] = _mm256_fmadd_ps(w0, xb, lo[i]);
        hi[i] = _mm256_fmadd_ps(w1, xb, hi[i]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NA; ++i) {
    _mm256_storeu_ps(y + i * ys, lo[i]);
    _mm256_storeu_ps(y + i * ys + 8, hi[i]);
  }
}

template <class L>
void float_tile_dot(const void* w, const float* x, size_t x_step, int nx, int64_t cols, float* y, size_t ys,
                    int flags) {
  const auto* g = static_cast<const typename L::T*>(w);
  const bool next = flags & kTilePrefetchNext, stream = flags & kTileStream;
  // The first pass streams the group (and prefetches the next one only where it is the last).
  for (int i = 0; i < nx; i += kRowsPerPass) {
    const bool first = i == 0, last = i + kRowsPerPass >= nx;
    const float* xb = x + i;
    float* yb = y + i * ys;
    switch (nx - i < kRowsPerPass ? nx - i : kRowsPerPass) {
      case 1: float_group_block<L, 1>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
      case 2: float_group_block<L, 2>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
      case 3: float_group_block<L, 3>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
      case 4: float_group_block<L, 4>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
      case 5: float_group_block<L, 5>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
      default: float_group_block<L, 6>(g, xb, x_step, cols, yb, ys, stream && first, next && last); break;
    }
  }
}

// FloatTilePairFn: step k of group 0, then of group 1, one broadcast x[k] for both; each
// output's chain as float_group_block<L, 1> forms it.
template <class L>
void float_tile_pair(const void* const w[2], const float* x, int64_t cols, float* const y[2]) {
  using T = typename L::T;
  constexpr int kStep = kStepsPerLine<T>;
  const T* g[2] = {static_cast<const T*>(w[0]), static_cast<const T*>(w[1])};
  __m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
  for (int64_t k = 0; k < cols; k += kStep) {
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(g[s] + kFloatDotW * k) + kFloatPrefetchBytes, _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int j = 0; j < kStep; ++j) {
      const __m256 xb = _mm256_broadcast_ss(x + k + j);
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {
        acc[s][0] = _mm256_fmadd_ps(L::load(g[s] + kFloatDotW * (k + j)), xb, acc[s][0]);
        acc[s][1] = _mm256_fmadd_ps(L::load(g[s] + kFloatDotW * (k + j) + 8), xb, acc[s][1]);
      }
    }
  }
#pragma GCC unroll 2
  for (int s = 0; s < 2; ++s) {
    _mm256_storeu_ps(y[s], acc[s][0]);
    _mm256_storeu_ps(y[s] + 8, acc[s][1]);
  }
}

// v[c] <- column c of the 8 x 8 matrix whose row r is v[r].
inline void transpose8(__m256 (&v)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // u[4 h + j], 128-bit lane l: rows 4 h .. 4 h + 3 at column 4 l + j.
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// Row-major rows (FloatDotFn): 8 values of up to 16 rows at a time, transposed in two halves
// of 8 rows so each vector pair holds the rows' values at one k, then the group kernel's fma
// chains. A row's last values (cols not a multiple of 8) come through a zero-padded copy.
template <class L, int NA>
void float_rows_block(const uint8_t* w, size_t ws, int nw, const float* x, size_t x_step, int64_t cols, float* y,
                      size_t ys) {
  using T = typename L::T;
  __m256 lo[NA], hi[NA];
#pragma GCC unroll 8
  for (int i = 0; i < NA; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  alignas(32) float columns[8][16];
  for (int64_t k0 = 0; k0 < cols; k0 += 8) {
    const int n = cols - k0 < 8 ? int(cols - k0) : 8;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 v[8];
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        const int row = 8 * h + r;
        if (row >= nw) {
          v[r] = _mm256_setzero_ps();
        } else if (n == 8) {
          v[r] = L::load(reinterpret_cast<const T*>(w + row * ws) + k0);
        } else {
          T part[8] = {};
          std::memcpy(part, reinterpret_cast<const T*>(w + row * ws) + k0, n * sizeof(T));
          v[r] = L::load(part);
        }
      }
      transpose8(v);
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) _mm256_store_ps(columns[c] + 8 * h, v[c]);
    }
    const float* xk = x + k0 * x_step;
    for (int c = 0; c < n; ++c, xk += x_step) {
      const __m256 w0 = _mm256_load_ps(columns[c]), w1 = _mm256_load_ps(columns[c] + 8);
#pragma GCC unroll 8
      for (int i = 0; i < NA; ++i) {
        const __m256 xb = _mm256_broadcast_ss(xk + i);
        lo[i] = _mm256_fmadd_ps(w0, xb, lo[i]);
        hi[i] = _mm256_fmadd_ps(w1, xb, hi[i]);
      }
    }
  }
  for (int i = 0; i < NA; ++i) {
    alignas(32) float out[16];
    _mm256_store_ps(out, lo[i]);
    _mm256_store_ps(out + 8, hi[i]);
    std::memcpy(y + i * ys, out, size_t(nw) * sizeof(float));
  }
}

template <class L>
void float_dot(const void* w, size_t ws, int nw, const float* x, size_t x_step, int nx, int64_t cols, float* y,
               size_t ys) {
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int i = 0; i < nx; i += kRowsPerPass) {
    const float* xb = x + i;
    float* yb = y + i * ys;
    switch (nx - i < kRowsPerPass ? nx - i : kRowsPerPass) {
      case 1: float_rows_block<L, 1>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
      case 2: float_rows_block<L, 2>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
      case 3: float_rows_block<L, 3>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
      case 4: float_rows_block<L, 4>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
      case 5: float_rows_block<L, 5>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
      default: float_rows_block<L, 6>(wb, ws, nw, xb, x_step, cols, yb, ys); break;
    }
  }
}

}  // namespace

void add_avx2_float_kernels(KernelTable& t) {
  t.float_dot[0] = float_dot<LoadF32>;
  t.float_dot[1] = float_dot<LoadF16>;
  t.float_dot[2] = float_dot<LoadBF16>;
  t.float_tile_dot[0] = float_tile_dot<LoadF32>;
  t.float_tile_dot[1] = float_tile_dot<LoadF16>;
  t.float_tile_dot[2] = float_tile_dot<LoadBF16>;
  t.float_tile_pair[0] = float_tile_pair<LoadF32>;
  t.float_tile_pair[1] = float_tile_pair<LoadF16>;
  t.float_tile_pair[2] = float_tile_pair<LoadBF16>;
}

}  // namespace spillway::kernels
