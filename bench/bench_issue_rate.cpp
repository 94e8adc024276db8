// Issue rate of the instruction mixes the GEMM kernels are built from, on operands in
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
//   issue/avx512/fp32_fma        512-bit vfmadd231ps, 12 independent chains: F32 / F16 / BF16
//   issue/avx512/int8_vpdpbusd   per 64 MACs: one vpdpbusd of a 64-byte code vector (16
//                                weight rows x 4 values) and 4 broadcast activation bytes, 8
//                                activation rows per vector (kTileActs): the Q8_0 / Q4_0 tile
//                                kernels' dot and the K-quant tiles' (their unpacking and
//                                scale products are not in it, so it is their floor)
//
// Counter macs/s: multiply-accumulates per second, all threads together. Registered only
// where the CPU runs the ISA (AVX2 + FMA; AVX-512 F/BW/VNNI); the loops carry their own
// target attributes, so the rest of bench_kernels keeps the baseline ISA.
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

// Pseudo-random operand bytes (a linear congruential generator's high byte).
struct ByteStream {
  uint32_t state;
  uint8_t operator()() { return static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24); }
};

Operands make_operands() {
  Operands o{};
  ByteStream next{12345};
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

// AVX-512: one weight block of 8 code vectors of 16 rows x 4 values, 8 activation rows.
struct alignas(64) Operands512 {
  uint8_t code[8][64];
  int8_t act[8][32];
};

Operands512 make_operands_512() {
  Operands512 o{};
  ByteStream next{54321};
  for (auto& v : o.code) {
    for (uint8_t& b : v) b = next();
  }
  for (auto& r : o.act) {
    for (int8_t& b : r) b = static_cast<int8_t>(next());
  }
  return o;
}

__attribute__((target("avx512f"))) inline __m512i broadcast_quad_512(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Rounds of 8 x 8 vpdpbusd (4,096 MACs a round): 8 independent int32 chains a round (one
// per activation row, as the tile kernels at 8 rows, the activation quad broadcast from
// memory), folded into one total after the round as a kernel folds a block's sums.
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int64_t vpdpbusd_rounds(const Operands512& o,
                                                                                        int64_t rounds) {
  __m512i total = _mm512_setzero_si512();
  for (int64_t r = 0; r < rounds; ++r) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) {
      const __m512i code = _mm512_load_si512(o.code[l]);
      s0 = _mm512_dpbusd_epi32(s0, code, broadcast_quad_512(o.act[0] + 4 * l));
      s1 = _mm512_dpbusd_epi32(s1, code, broadcast_quad_512(o.act[1] + 4 * l));
      s2 = _mm512_dpbusd_epi32(s2, code, broadcast_quad_512(o.act[2] + 4 * l));
      s3 = _mm512_dpbusd_epi32(s3, code, broadcast_quad_512(o.act[3] + 4 * l));
      s4 = _mm512_dpbusd_epi32(s4, code, broadcast_quad_512(o.act[4] + 4 * l));
      s5 = _mm512_dpbusd_epi32(s5, code, broadcast_quad_512(o.act[5] + 4 * l));
      s6 = _mm512_dpbusd_epi32(s6, code, broadcast_quad_512(o.act[6] + 4 * l));
      s7 = _mm512_dpbusd_epi32(s7, code, broadcast_quad_512(o.act[7] + 4 * l));
    }
    const __m512i pairs = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3));
    total = _mm512_add_epi32(total, _mm512_add_epi32(pairs, _mm512_add_epi32(_mm512_add_epi32(s4, s5), _mm512_add_epi32(s6, s7))));
    asm volatile("" ::: "memory");
  }
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, total);
  return lanes[0];
}

// Rounds of 12 independent 512-bit vfmadd231ps chains (192 MACs a round).
__attribute__((target("avx512f"), noinline)) int64_t fma512_rounds(int64_t rounds) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1e-3f * float(i));
  __m512 a = _mm512_set1_ps(0.999f);
  const __m512 c = _mm512_set1_ps(1e-3f);
  for (int64_t r = 0; r < rounds; ++r) {
    asm volatile("" : "+v"(a));  // opaque: no chain is folded or hoisted
#pragma GCC unroll 12
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, c);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return static_cast<int64_t>(lanes[0]);
}

enum class Mix { Fp32Fma, Int16Sums, Q8_0, Fp32Fma512, Vpdpbusd };

// Rounds of the mix's loop in one call (the FMA loops' rounds are shorter) and the
// multiply-accumulates of one round, per thread.
constexpr int64_t kRounds = 1 << 16;
int64_t rounds_per_call(Mix mix) {
  switch (mix) {
    case Mix::Fp32Fma: return kRounds * 8;
    case Mix::Fp32Fma512: return kRounds * 4;
    default: return kRounds;
  }
}
double macs_per_round(Mix mix) {
  switch (mix) {
    case Mix::Fp32Fma: return 96;
    case Mix::Int16Sums:
    case Mix::Q8_0: return 1024;
    case Mix::Fp32Fma512: return 192;
    case Mix::Vpdpbusd: return 4096;
  }
  return 0;
}

void bench_issue(benchmark::State& state, Mix mix) {
  const int64_t rounds = rounds_per_call(mix);
  ThreadPool& pool = bench_pool();
  const Operands operands = make_operands();
  const Operands512 operands_512 = make_operands_512();
  std::vector<int64_t> sinks(size_t(pool.size()));
  for (auto _ : state) {
    pool.run_on_all([&](int t) {
      switch (mix) {
        case Mix::Fp32Fma: sinks[size_t(t)] += fma_rounds(rounds); break;
        case Mix::Int16Sums: sinks[size_t(t)] += int8_rounds<false>(operands, rounds); break;
        case Mix::Q8_0: sinks[size_t(t)] += int8_rounds<true>(operands, rounds); break;
        case Mix::Fp32Fma512: sinks[size_t(t)] += fma512_rounds(rounds); break;
        case Mix::Vpdpbusd: sinks[size_t(t)] += vpdpbusd_rounds(operands_512, rounds); break;
      }
    });
    benchmark::DoNotOptimize(sinks.data());
  }
  const double macs_per_thread = double(rounds) * macs_per_round(mix);
  state.counters["macs/s"] = benchmark::Counter(macs_per_thread * pool.size(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool.size();
}

const bool kRegistered = [] {
  auto add = [](const char* name, Mix mix) {
    benchmark::RegisterBenchmark(name, bench_issue, mix)->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    add("issue/avx2/fp32_fma", Mix::Fp32Fma);
    add("issue/avx2/int8_int16_sums", Mix::Int16Sums);
    add("issue/avx2/int8_q8_0", Mix::Q8_0);
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni")) {
    add("issue/avx512/fp32_fma", Mix::Fp32Fma512);
    add("issue/avx512/int8_vpdpbusd", Mix::Vpdpbusd);
  }
  return true;
}();

}  // namespace
}  // namespace spillway::kernels
