// AVX-512 probe loops (see machine_probe.h). Compiled with AVX-512 flags; reached only
// through probe_loops(Isa::Avx512) on a CPU that has it.
#include <immintrin.h>

#include "kernels/probe/machine_probe.h"
#include "kernels/probe/probe_loop_helpers.h"

namespace spillway::kernels {

namespace {

using probe::hide_values;
using probe::kReadStreams;
using probe::sum_lanes;

constexpr int kChains = 12;  // enough independent accumulators to cover latency x ports

uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (size_t i = 0; i + 256 <= n; i += 256) {
    a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
    c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
    d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
  }
  const __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
  return sum_lanes<uint64_t>(x);
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
  return sum_lanes<uint64_t>(x);
}

// kReadStreams equal parts of the buffer read side by side, 256 bytes of each in turn (the
// rest, under kReadStreams x 256 bytes, after them). Each part is a stream the hardware
// prefetchers follow on their own; on the Zen 5 development VM four streams per thread read
// up to a third faster than one (bench/README.md, "The probe reads four streams per thread").
uint64_t read_streams_avx512(const uint8_t* p, size_t n) {
  const size_t part = n / kReadStreams / 256 * 256;
  __m512i acc[kReadStreams];
  for (auto& v : acc) v = _mm512_setzero_si512();
  for (size_t i = 0; i < part; i += 256) {
#pragma GCC unroll 8
    for (int s = 0; s < kReadStreams; ++s) {
      const uint8_t* q = p + size_t(s) * part + i;
      const __m512i x = _mm512_xor_si512(_mm512_load_si512(q), _mm512_load_si512(q + 64));
      const __m512i y = _mm512_xor_si512(_mm512_load_si512(q + 128), _mm512_load_si512(q + 192));
      acc[s] = _mm512_xor_si512(acc[s], _mm512_xor_si512(x, y));
    }
  }
  __m512i x = acc[0];
#pragma GCC unroll 8
  for (int s = 1; s < kReadStreams; ++s) x = _mm512_xor_si512(x, acc[s]);
  return sum_lanes<uint64_t>(x) ^ read_avx512(p + kReadStreams * part, n - kReadStreams * part);
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
  *sink = sum_lanes<uint32_t>(s);  // unsigned: wrapping lanes are defined
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
  *sink = sum_lanes<float>(s);
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
  *sink = sum_lanes<float>(s);
  return static_cast<uint64_t>(iterations) * kChains * 16;
}

}  // namespace

const ProbeLoops& probe_loops_avx512() {
  static const ProbeLoops loops = {read_avx512, read_prefetch_avx512, read_streams_avx512,
                                   int8_avx512, bf16_avx512, fp32_avx512};
  return loops;
}

}  // namespace spillway::kernels
