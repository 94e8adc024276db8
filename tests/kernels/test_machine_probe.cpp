// The probe loops do the work they claim (the accumulated values prove every counted
// multiply-accumulate happened) and the probe returns finite positive figures. No timing
// thresholds: speeds are reported by the benches, not asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/probe/machine_probe.h"
#include "kernels/thread_pool.h"

namespace spillway::kernels {
namespace {

class ProbeLoopsTest : public ::testing::TestWithParam<Isa> {};

TEST_P(ProbeLoopsTest, Int8LoopCountsWhatItComputes) {
  const ProbeLoops& loops = probe_loops(GetParam());
  uint32_t sink = 0;
  const uint64_t macs = loops.int8_macs(1000, &sink);
  ASSERT_GT(macs, 0u);
  EXPECT_EQ(sink, static_cast<uint32_t>(macs * 3));  // 1 * 3 per MAC, modulo 2^32
  const uint64_t many = loops.int8_macs(1 << 22, &sink);  // wraps: must stay defined (UBSan)
  EXPECT_EQ(sink, static_cast<uint32_t>(many * 3));
}

TEST_P(ProbeLoopsTest, FloatLoopsCountWhatTheyCompute) {
  const ProbeLoops& loops = probe_loops(GetParam());
  float sink = 0;
  uint64_t macs = loops.fp32_macs(100, &sink);
  EXPECT_NEAR(sink, macs * 1e-3 * 0.999, macs * 1e-3 * 1e-3);
  if (loops.bf16_macs && (GetParam() != Isa::Avx512 || has_avx512_bf16())) {
    macs = loops.bf16_macs(100, &sink);
    // bf16 inputs: 1e-3 and 2e-3 rounded to 8 bits of mantissa.
    EXPECT_NEAR(sink, macs * 2e-6, macs * 2e-6 * 0.01);
  }
}

TEST_P(ProbeLoopsTest, ReadLoopFoldsEveryByte) {
  const ProbeLoops& loops = probe_loops(GetParam());
  for (auto read : {loops.read, loops.read_prefetch, loops.read_streams}) {
    if (!read) continue;
    // 4096: the streams loop's four parts exactly; 4096 + 768: three 256-byte blocks left
    // after its parts.
    for (const size_t n : {size_t{4096}, size_t{4096 + 768}}) {
      auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, n));
      std::fill(p, p + n, 0);
      const uint64_t zero = read(p, n);
      // A byte in each quarter and the last byte (in the rest, where there is one) each
      // reach the result.
      for (const size_t at : {size_t{0}, n / 4 + 1, n / 2 + 5, 3 * n / 4 + 7, n - 1}) {
        p[at] = 0x80;
        EXPECT_NE(read(p, n), zero) << "n " << n << ", byte " << at;
        p[at] = 0;
      }
      std::free(p);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ProbeLoopsTest, ::testing::ValuesIn(supported_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(MachineProbe, ReturnsFinitePositiveFigures) {
  ThreadPool pool(2);
  ProbeOptions o;
  o.buffer_bytes = 64 << 20;
  o.seconds_per_measure = 0.01;
  o.repeats = 1;
  const MachinePeaks m = probe_machine(pool, o);
  EXPECT_GT(m.dram_read_bytes_per_second_1_thread, 0);
  EXPECT_GT(m.dram_read_bytes_per_second, 0);
  EXPECT_GT(m.int8_ops_per_second, 0);
  EXPECT_GT(m.fp32_flops, 0);
  EXPECT_TRUE(std::isfinite(m.int8_ops_per_second));
  EXPECT_EQ(m.threads, 2);
}

}  // namespace
}  // namespace spillway::kernels

namespace spillway::kernels {
namespace {

// Issue #21: the DRAM probe's buffer fits the memory left (a 557 MiB cgroup was OOM-killed
// by the fixed 512 MiB buffer): half the spare memory, within [16 MiB, 512 MiB].
TEST(MachineProbe, BufferIsSizedToTheSpareMemory) {
  constexpr int64_t kMiB = 1 << 20;
  EXPECT_EQ(probe_buffer_bytes_for(8192 * kMiB), size_t{512} << 20);
  EXPECT_EQ(probe_buffer_bytes_for(300 * kMiB), size_t{150} << 20);
  EXPECT_EQ(probe_buffer_bytes_for(301 * kMiB), size_t{150} << 20);  // whole MiB
  EXPECT_EQ(probe_buffer_bytes_for(10 * kMiB), size_t{16} << 20);
  EXPECT_EQ(probe_buffer_bytes_for(-1), size_t{16} << 20);
}

}  // namespace
}  // namespace spillway::kernels
