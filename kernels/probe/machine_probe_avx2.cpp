// AVX2 probe loops (see machine_probe.h): the instructions the AVX2 kernels use.
#include <immintrin.h>

#include "kernels/probe/machine_probe.h"
#include "kernels/probe/probe_loop_helpers.h"

namespace spillway::kernels {

namespace {

using probe::hide_values;
using probe::kReadStreams;
using probe::sum_lanes;

constexpr int kChains = 10;

uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a = _mm256_xor_si256(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_xor_si256(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_xor_si256(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_xor_si256(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  return sum_lanes<uint64_t>(x);
}

// As read_streams_avx512 (machine_probe_avx512.cpp), with 256-bit loads.
uint64_t read_streams_avx2(const uint8_t* p, size_t n) {
  const size_t part = n / kReadStreams / 256 * 256;
  __m256i acc[kReadStreams];
  for (auto& v : acc) v = _mm256_setzero_si256();
  auto load = [](const uint8_t* q) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(q)); };
  for (size_t i = 0; i < part; i += 256) {
#pragma GCC unroll 8
    for (int s = 0; s < kReadStreams; ++s) {
      const uint8_t* q = p + size_t(s) * part + i;
      __m256i x = _mm256_xor_si256(load(q), load(q + 32));
      x = _mm256_xor_si256(x, _mm256_xor_si256(load(q + 64), load(q + 96)));
      x = _mm256_xor_si256(x, _mm256_xor_si256(load(q + 128), load(q + 160)));
      x = _mm256_xor_si256(x, _mm256_xor_si256(load(q + 192), load(q + 224)));
      acc[s] = _mm256_xor_si256(acc[s], x);
    }
  }
  __m256i x = acc[0];
#pragma GCC unroll 8
  for (int s = 1; s < kReadStreams; ++s) x = _mm256_xor_si256(x, acc[s]);
  return sum_lanes<uint64_t>(x) ^ read_avx2(p + kReadStreams * part, n - kReadStreams * part);
}

// The AVX2 quantized dot: maddubs (u8 x s8 -> s16 pairs), madd with ones (-> s32), add.
uint64_t int8_avx2(int64_t iterations, uint32_t* sink) {
  __m256i acc[kChains];
  for (auto& v : acc) v = _mm256_setzero_si256();
  hide_values(acc);
  const __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) {
      __m256i ak = a;  // opaque, so every chain does its own multiplies (not hoisted or shared)
      asm volatile("" : "+v"(ak));
      v = _mm256_add_epi32(v, _mm256_madd_epi16(_mm256_maddubs_epi16(ak, b), ones));
    }
  }
  __m256i s = acc[0];
#pragma GCC unroll 16
  for (int k = 1; k < kChains; ++k) s = _mm256_add_epi32(s, acc[k]);
  *sink = sum_lanes<uint32_t>(s);  // unsigned: wrapping lanes are defined
  return static_cast<uint64_t>(iterations) * kChains * 32;
}

uint64_t fp32_avx2(int64_t iterations, float* sink) {
  __m256 acc[kChains];
  for (auto& v : acc) v = _mm256_setzero_ps();
  hide_values(acc);
  const __m256 a = _mm256_set1_ps(1e-3f), b = _mm256_set1_ps(0.999f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (auto& v : acc) v = _mm256_fmadd_ps(a, b, v);
  }
  __m256 s = acc[0];
#pragma GCC unroll 16
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  *sink = sum_lanes<float>(s);
  return static_cast<uint64_t>(iterations) * kChains * 8;
}

}  // namespace

const ProbeLoops& probe_loops_avx2() {
  static const ProbeLoops loops = {read_avx2, nullptr, read_streams_avx2, int8_avx2, nullptr, fp32_avx2};
  return loops;
}

}  // namespace spillway::kernels
