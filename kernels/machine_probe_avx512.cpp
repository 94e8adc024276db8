// AVX-512 probe loops (see machine_probe.h). Compiled with AVX-512 flags; reached only
// through probe_loops(Isa::Avx512) on a CPU that has it.
#include <immintrin.h>

#include "kernels/machine_probe.h"

namespace spillway::kernels {

namespace {

// Makes the compiler forget that the accumulators start out equal, so it keeps kChains
// independent chains (identical chains would be merged into one, a latency-bound loop), and
// the unrolled chain loops below keep every accumulator in a register.
template <class V, int N>
inline void hide_values(V (&acc)[N]) {
#pragma GCC unroll 16
  for (int k = 0; k < N; ++k) asm volatile("" : "+v"(acc[k]));
}

constexpr int kChains = 12;  // enough independent accumulators to cover latency x ports

// Lane sums through memory, once per probe: GCC 12's _mm512_reduce_add_* expand to
// _mm256_undefined_* and warn (-Wuninitialized) when inlined here.
inline uint64_t sum_lanes(__m512i v) {
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, v);
  uint64_t total = 0;
  for (uint64_t x : lanes) total += x;
  return total;
}

inline float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 256 <= n; i += 256) {
    a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
  }
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return sum_lanes(x);
}

uint64_t read_prefetch_avx512(const uint8_t* p, size_t n) {
  constexpr size_t kAhead = 2048;
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 256 <= n; i += 256) {
    for (size_t o = 0; o < 256; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i + kAhead + o), _MM_HINT_T0);
    a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
  }
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return sum_lanes(x);
}

uint64_t int8_avx512(int64_t iterations, uint32_t* sink) {
  __m512i acc[kChains];
  for (auto& v : acc) v = _mm512_setzero_si512();
  hide_values(acc);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(3);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_dpbusd_epi32(v, a, b);
  }
  __m512i s = acc[0];
#pragma GCC unroll 16
  for (int k = 1; k < kChains; ++k) s = _mm512_add_epi32(s, acc[k]);
  // Lanes wrap (as the hardware accumulators do): sum them as unsigned, which is defined.
  alignas(64) uint32_t lanes[16];
  _mm512_store_si512(lanes, s);
  uint32_t total = 0;
  for (uint32_t x : lanes) total += x;
  *sink = total;
  return static_cast<uint64_t>(iterations) * kChains * 64;
}

uint64_t bf16_avx512(int64_t iterations, float* sink) {
  __m512 acc[kChains];
  for (auto& v : acc) v = _mm512_setzero_ps();
  hide_values(acc);
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(2e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_dpbf16_ps(v, a, b);
  }
  __m512 s = acc[0];
#pragma GCC unroll 16
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  *sink = sum_lanes(s);
  return static_cast<uint64_t>(iterations) * kChains * 32;
}

uint64_t fp32_avx512(int64_t iterations, float* sink) {
  __m512 acc[kChains];
  for (auto& v : acc) v = _mm512_setzero_ps();
  hide_values(acc);
  const __m512 a = _mm512_set1_ps(1e-3f), b = _mm512_set1_ps(0.999f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm512_fmadd_ps(a, b, v);
  }
  __m512 s = acc[0];
#pragma GCC unroll 16
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  *sink = sum_lanes(s);
  return static_cast<uint64_t>(iterations) * kChains * 16;
}

}  // namespace

const ProbeLoops& probe_loops_avx512() {
  static const ProbeLoops loops = {read_avx512, read_prefetch_avx512, int8_avx512, bf16_avx512, fp32_avx512};
  return loops;
}

}  // namespace spillway::kernels
