// Measures this machine's physical limits with the instructions the kernels use, so
// benchmarks can report speeds as fractions of them within one run (the machines are
// shared and noisy: ratios measured together are what compare).
//
// - DRAM read bandwidth: streaming vector loads over a buffer much larger than the caches,
//   on one thread and on every pool thread; the best of plain loads, loads with software
//   prefetch, and four streams read side by side.
// - int8 multiply-accumulate peak: vpdpbusd (AVX-512 VNNI), else vpmaddubsw + vpmaddwd
//   (AVX2), as the quantized dot kernels use.
// - bf16 peak: vdpbf16ps (AVX-512 BF16); 0 where the CPU lacks it.
// - fp32 FMA peak: vfmadd231ps at the widest available width.
// Ops count a multiply-accumulate as 2 (the usual TOPS / FLOPS convention).
//
// Thread contract: call from the engine thread (it uses the pool); allocates the buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"

namespace spillway::kernels {

class ThreadPool;

struct MachinePeaks {
  Isa isa = Isa::Scalar;
  int threads = 1;
  double dram_read_bytes_per_second_1_thread = 0;
  double dram_read_bytes_per_second = 0;  // all pool threads
  double int8_ops_per_second = 0;
  double bf16_flops = 0;
  double fp32_flops = 0;
};

struct ProbeOptions {
  size_t buffer_bytes = size_t{1} << 29;  // 512 MiB: far beyond any last-level cache
  double seconds_per_measure = 0.15;      // each compute peak runs about this long
  int repeats = 3;                        // best of
};

MachinePeaks probe_machine(ThreadPool& pool, const ProbeOptions& options = {});

// A DRAM probe buffer that fits in `spare_bytes` of memory (e.g. what a cgroup has left
// above its pressure floor): half of it, rounded down to 1 MiB, between 16 MiB and the
// default 512 MiB. Under ~64 MiB the figure may include last-level cache hits.
size_t probe_buffer_bytes_for(int64_t spare_bytes);

// Per-ISA loops (machine_probe_avx2.cpp / machine_probe_avx512.cpp), exposed for tests.
// read: xor-folds n bytes (n a multiple of 256) so the loads cannot be elided.
// The others run `iterations` rounds of independent accumulator chains and return the
// number of multiply-accumulates done; *sink receives the sum of every accumulator (int8:
// each MAC adds 1 * 3; bf16 and fp32: each adds ~1e-3 * 2e-3 resp. 1e-3 * 0.999).
struct ProbeLoops {
  uint64_t (*read)(const uint8_t* p, size_t n) = nullptr;
  // The same with software prefetches ahead of the loads (null: none).
  uint64_t (*read_prefetch)(const uint8_t* p, size_t n) = nullptr;
  // The same bytes as four equal parts read side by side (null: none): several sequential
  // streams keep more lines in flight than one, as the kernels' two weight streams a thread
  // do. The probe reports the fastest of the read loops, so a kernel is compared with the
  // most this machine's memory delivers to any of them.
  uint64_t (*read_streams)(const uint8_t* p, size_t n) = nullptr;
  uint64_t (*int8_macs)(int64_t iterations, uint32_t* sink) = nullptr;
  uint64_t (*bf16_macs)(int64_t iterations, float* sink) = nullptr;  // null: unsupported
  uint64_t (*fp32_macs)(int64_t iterations, float* sink) = nullptr;
};
const ProbeLoops& probe_loops(Isa isa);

}  // namespace spillway::kernels
