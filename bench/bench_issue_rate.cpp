// Issue rate of the AVX2 instruction mixes the GEMM kernels are built from, on operands in
// L1 (no DRAM traffic), on every pool thread: the most multiply-accumulates per second a
// GEMM of many activation rows (batched decode, prefill) can reach on this machine with
// those instructions. bench/batch_bound.py sets it against the GEMV of the same run
// (bench/README.md, "What batched decode can reach without VNNI").
//
//   issue/avx2/fp32_fma          vfmadd231ps, 12 independent chains: F32 / F16 / BF16 tiles
//   issue/avx2/int8_int16_sums   per 32 MACs: vpbroadcastd of 4 activation bytes, vpmaddubsw,
//                                vpaddw into int16 sums (4 activation rows per weight vector):
//                                Q4_0 tiles and the unpacked Q4_K / Q5_K / Q6_K tiles
//   issue/avx2/int8_q8_0         the same with vpsignb for the signed codes and vpmaddwd +
//                                vpaddd per product (Q8_0 pair sums do not fit int16 twice)
//
// Counter macs/s: multiply-accumulates per second, all threads together. Registered only
// where the CPU runs AVX2 and FMA; the loops carry their own target attributes, so the rest
// of bench_kernels keeps the baseline ISA.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "bench_pool.h"
#include "kernels/thread_pool.h"

namespace spillway::kernels {
namespace {

// One weight block of a tiled int8 matmul: 8 vectors of 8 weight rows x 4 values (the
// quads of 32 values), and 4 activation rows of 32 int8 values. Loaded again every round
// (the memory clobber), so the loops issue the kernels' loads too.
struct alignas(64) Operands {
  uint8_t code[8][32];
  int8_t act[4][32];
};

Operands make_operands() {
  Operands o{};
  uint32_t state = 12345;
  auto next = [&] { return static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24); };
  for (auto& v : o.code) {
    for (uint8_t& b : v) b = next() & 15;  // nibble-sized, as Q4_0 / Q4_K codes
  }
  for (auto& r : o.act) {
    for (int8_t& b : r) b = static_cast<int8_t>(next());
  }
  return o;
}

__attribute__((target("avx2"))) inline __m256i broadcast_quad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Rounds of 8 x 4 vpmaddubsw (1,024 MACs a round); returns a value the caller sinks.
// kSignedCodes: Q8_0's mix (vpsignb for |code| and the activation's sign, int32 sums per
// product); otherwise int16 sums widened once a round.
template <bool kSignedCodes>
__attribute__((target("avx2"), noinline)) int64_t int8_rounds(const Operands& o, int64_t rounds) {
  __m256i total = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < rounds; ++r) {
    __m256i sums[4] = {};
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m256i code = _mm256_load_si256(reinterpret_cast<const __m256i*>(o.code[l]));
      const __m256i magnitude = kSignedCodes ? _mm256_sign_epi8(code, code) : code;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m256i act = broadcast_quad(o.act[i] + 4 * l);
        if constexpr (kSignedCodes) {
          const __m256i pair_sums = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(act, code));
          sums[i] = _mm256_add_epi32(sums[i], _mm256_madd_epi16(pair_sums, ones));
        } else {
          sums[i] = _mm256_add_epi16(sums[i], _mm256_maddubs_epi16(code, act));
        }
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      total = _mm256_add_epi32(total, kSignedCodes ? sums[i] : _mm256_madd_epi16(sums[i], ones));
    }
    asm volatile("" ::: "memory");
  }
  return _mm256_extract_epi64(total, 0);
}

// Rounds of 12 independent vfmadd231ps chains (96 MACs a round).
__attribute__((target("avx2,fma"), noinline)) int64_t fma_rounds(int64_t rounds) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1e-3f * float(i));
  __m256 a = _mm256_set1_ps(0.999f);
  const __m256 c = _mm256_set1_ps(1e-3f);
  for (int64_t r = 0; r < rounds; ++r) {
    asm volatile("" : "+x"(a));  // opaque: no chain is folded or hoisted
#pragma GCC unroll 12
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, c);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  return static_cast<int64_t>(_mm256_cvtss_f32(s));
}

enum class Mix { Fp32Fma, Int16Sums, Q8_0 };

void bench_issue(benchmark::State& state, Mix mix) {
  constexpr int64_t kRounds = 1 << 16;
  ThreadPool& pool = bench_pool();
  const Operands operands = make_operands();
  std::vector<int64_t> sinks(size_t(pool.size()));
  for (auto _ : state) {
    pool.run_on_all([&](int t) {
      switch (mix) {
        case Mix::Fp32Fma: sinks[size_t(t)] += fma_rounds(kRounds * 8); break;
        case Mix::Int16Sums: sinks[size_t(t)] += int8_rounds<false>(operands, kRounds); break;
        case Mix::Q8_0: sinks[size_t(t)] += int8_rounds<true>(operands, kRounds); break;
      }
    });
    benchmark::DoNotOptimize(sinks.data());
  }
  const double macs_per_thread = mix == Mix::Fp32Fma ? double(kRounds) * 8 * 96 : double(kRounds) * 1024;
  state.counters["macs/s"] = benchmark::Counter(macs_per_thread * pool.size(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool.size();
}

const bool kRegistered = [] {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  for (auto [name, mix] : {std::pair{"issue/avx2/fp32_fma", Mix::Fp32Fma},
                           std::pair{"issue/avx2/int8_int16_sums", Mix::Int16Sums},
                           std::pair{"issue/avx2/int8_q8_0", Mix::Q8_0}}) {
    benchmark::RegisterBenchmark(name, bench_issue, mix)->Unit(benchmark::kMillisecond)->UseRealTime();
  }
  return true;
}();

}  // namespace
}  // namespace spillway::kernels
