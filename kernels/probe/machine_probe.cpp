#include "kernels/probe/machine_probe.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/huge_pages.h"
#include "kernels/thread_pool.h"

namespace spillway::kernels {

const ProbeLoops& probe_loops_avx2();
const ProbeLoops& probe_loops_avx512();

namespace {

using Clock = std::chrono::steady_clock;

uint64_t read_scalar(const uint8_t* p, size_t n) {
  uint64_t a = 0, b = 0;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    uint64_t x, y;
    std::memcpy(&x, p + i, 8);
    std::memcpy(&y, p + i + 8, 8);
    a ^= x;
    b ^= y;
  }
  return a + b;
}

uint64_t int8_scalar(int64_t iterations, uint32_t* sink) {
  uint32_t acc[8] = {};  // unsigned: long runs wrap, defined
  volatile int8_t va = 1, vb = 3;
  const uint32_t a = static_cast<uint32_t>(va), b = static_cast<uint32_t>(vb);
  for (int64_t i = 0; i < iterations; ++i) {
    for (uint32_t& v : acc) v += a * b;
  }
  uint32_t total = 0;
  for (uint32_t v : acc) total += v;
  *sink = total;
  return static_cast<uint64_t>(iterations) * 8;
}

uint64_t fp32_scalar(int64_t iterations, float* sink) {
  float acc[8] = {};
  volatile float va = 1e-3f, vb = 0.999f;
  const float a = va, b = vb;
  for (int64_t i = 0; i < iterations; ++i) {
    for (float& v : acc) v += a * b;
  }
  float total = 0;
  for (float v : acc) total += v;
  *sink = total;
  return static_cast<uint64_t>(iterations) * 8;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs loop(iterations) on every pool thread at once; multiply-accumulates per second.
template <class Sink>
double peak(ThreadPool& pool, uint64_t (*loop)(int64_t, Sink*), const ProbeOptions& o) {
  if (!loop) return 0;
  Sink sink{};
  // Calibrate on one thread to ~seconds_per_measure.
  int64_t iterations = 1 << 14;
  while (true) {
    const auto t = Clock::now();
    loop(iterations, &sink);
    const double s = seconds_since(t);
    if (s >= o.seconds_per_measure / 8 || iterations > (int64_t{1} << 40)) {
      iterations = static_cast<int64_t>(iterations * (o.seconds_per_measure / std::max(s, 1e-9)));
      break;
    }
    iterations *= 4;
  }
  double best = 0;
  std::vector<Sink> sinks(pool.size());
  for (int r = 0; r < o.repeats; ++r) {
    std::atomic<uint64_t> macs{0};
    const auto t = Clock::now();
    pool.run_on_all([&](int thread) { macs += loop(iterations, &sinks[thread]); });
    best = std::max(best, static_cast<double>(macs.load()) / seconds_since(t));
  }
  return best;
}

}  // namespace

const ProbeLoops& probe_loops(Isa isa) {
  static const ProbeLoops scalar = {read_scalar, nullptr, nullptr, int8_scalar, nullptr, fp32_scalar};
  switch (isa) {
    case Isa::Avx512: return probe_loops_avx512();
    case Isa::Avx2: return probe_loops_avx2();
    case Isa::Scalar: break;
  }
  return scalar;
}

size_t probe_buffer_bytes_for(int64_t spare_bytes) {
  constexpr int64_t kMin = int64_t{16} << 20, kMiB = int64_t{1} << 20;
  const auto most = static_cast<int64_t>(ProbeOptions{}.buffer_bytes);
  return static_cast<size_t>(std::clamp<int64_t>(spare_bytes / 2 / kMiB * kMiB, kMin, most));
}

MachinePeaks probe_machine(ThreadPool& pool, const ProbeOptions& o) {
  MachinePeaks m;
  m.isa = active_isa();
  m.threads = pool.size();
  ProbeLoops loops = probe_loops(m.isa);
  if (m.isa == Isa::Avx512 && !has_avx512_bf16()) loops.bf16_macs = nullptr;

  const size_t bytes = o.buffer_bytes / 4096 * 4096;
  auto* buffer = static_cast<uint8_t*>(allocate_maybe_huge(bytes, 4096));
  if (buffer) {
    // Touch every page from all threads so the kernel backs the buffer before timing.
    pool.parallel_for(static_cast<int64_t>(bytes / 4096), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) std::memset(buffer + p * 4096, static_cast<int>(p), 4096);
    });
    std::vector<uint64_t> sinks(pool.size());
    for (int r = 0; r < o.repeats; ++r) {
      for (auto read : {loops.read, loops.read_prefetch, loops.read_streams}) {
        if (!read) continue;
        auto t = Clock::now();
        sinks[0] ^= read(buffer, bytes);
        m.dram_read_bytes_per_second_1_thread =
            std::max(m.dram_read_bytes_per_second_1_thread, bytes / seconds_since(t));
        const size_t per_thread = bytes / pool.size() / 256 * 256;
        t = Clock::now();
        pool.run_on_all([&](int thread) {
          sinks[thread] ^= read(buffer + per_thread * thread, per_thread);
        });
        m.dram_read_bytes_per_second =
            std::max(m.dram_read_bytes_per_second, per_thread * pool.size() / seconds_since(t));
      }
    }
    std::free(buffer);
  }
  m.int8_ops_per_second = 2 * peak(pool, loops.int8_macs, o);
  m.bf16_flops = 2 * peak(pool, loops.bf16_macs, o);
  m.fp32_flops = 2 * peak(pool, loops.fp32_macs, o);
  return m;
}

}  // namespace spillway::kernels
