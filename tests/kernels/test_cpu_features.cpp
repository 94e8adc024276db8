#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"

namespace spillway::kernels {
namespace {

TEST(CpuFeatures, ScalarFirstAndActiveIsSupported) {
  const std::vector<Isa>& isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::Scalar);
  bool found = false;
  for (Isa isa : isas) found |= isa == active_isa();
  EXPECT_TRUE(found);
  for (size_t i = 1; i < isas.size(); ++i) EXPECT_LT(int(isas[i - 1]), int(isas[i]));
  if (has_avx512_bf16()) {
    EXPECT_EQ(isas.back(), Isa::Avx512);
  }
}

TEST(CpuFeatures, ReportsWhatThisMachineRuns) {
  std::string names;
  for (Isa isa : supported_isas()) names += std::string(isa_name(isa)) + " ";
  std::printf("supported: %s active: %s avx512_bf16: %d\n", names.c_str(), std::string(isa_name(active_isa())).c_str(),
              has_avx512_bf16() ? 1 : 0);
  EXPECT_FALSE(names.empty());
}

TEST(CpuFeatures, EveryTableIsCompleteAndLabelled) {
  for (Isa isa : supported_isas()) {
    const KernelTable& t = kernels_for(isa);
    EXPECT_EQ(t.isa, isa);
    EXPECT_NE(t.quantize_q8, nullptr);
    EXPECT_NE(t.quantize_q8_K, nullptr);
    for (auto* f : t.float_dot) EXPECT_NE(f, nullptr);
    for (auto* f : t.tile_dot) EXPECT_NE(f, nullptr);
    for (auto* f : t.kquant_dot) EXPECT_NE(f, nullptr);
    EXPECT_NE(t.rms_norm, nullptr);
    EXPECT_NE(t.softmax, nullptr);
    EXPECT_NE(t.silu_mul, nullptr);
    EXPECT_NE(t.add_inplace, nullptr);
    EXPECT_NE(t.conv_silu, nullptr);
    EXPECT_NE(t.exp_scaled_sum, nullptr);
    EXPECT_NE(t.rope, nullptr);
    EXPECT_NE(t.attention, nullptr);
  }
}

TEST(CpuFeatures, IsaNames) {
  EXPECT_EQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_EQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_EQ(isa_name(Isa::Avx512), "avx512");
}

}  // namespace
}  // namespace spillway::kernels

namespace spillway::kernels {
namespace {

TEST(CpuFeatures, IsaRequestPicksASupportedLevel) {
  const Isa best = supported_isas().back();
  EXPECT_EQ(resolve_isa_request("scalar"), Isa::Scalar);
  EXPECT_EQ(resolve_isa_request(""), best);
  EXPECT_EQ(resolve_isa_request("sse9"), best);
  const bool has_avx2 = supported_isas().size() > 1;
  EXPECT_EQ(resolve_isa_request("avx2"), has_avx2 ? Isa::Avx2 : best);
  EXPECT_EQ(resolve_isa_request("avx512"), best);
}

}  // namespace
}  // namespace spillway::kernels
