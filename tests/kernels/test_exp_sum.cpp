// exp_poly against std::exp in double, and exp_scaled_sum on every ISA against the scalar
// reference (bit for bit: the sampler's seeded draws must not depend on the ISA) and
// against the contract's summation order written out here.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/exp_sum.h"

namespace spillway::kernels {
namespace {

using testing::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Ulps between two finite non-negative floats.
int64_t ulps(float a, float b) { return std::llabs(int64_t(bits(a)) - int64_t(bits(b))); }

TEST(ExpPoly, WithinTwoUlpOfTheCorrectlyRoundedExp) {
  // Every 1/4096 over the whole range where exp is a finite nonzero float, plus both ends.
  int64_t worst = 0;
  for (double x = -104.0; x <= 88.72283; x += 1.0 / 4096) {
    const float xf = static_cast<float>(x);
    const float want = static_cast<float>(std::exp(static_cast<double>(xf)));
    const float got = exp_poly(xf);
    if (want >= FLT_MIN) {
      ASSERT_LE(ulps(got, want), 2) << "x=" << xf << " got " << got << " want " << want;
      worst = std::max(worst, ulps(got, want));
    } else {
      // Subnormal results: rounded once, so within one unit of the last place (2^-149).
      ASSERT_LE(ulps(got, want), 1) << "x=" << xf << " got " << got << " want " << want;
    }
  }
  EXPECT_EQ(exp_poly(0.0f), 1.0f);
  EXPECT_EQ(exp_poly(-kInf), 0.0f);
  EXPECT_EQ(exp_poly(-104.5f), 0.0f);
  EXPECT_EQ(exp_poly(-1e30f), 0.0f);
  EXPECT_EQ(exp_poly(89.0f), kInf);
  EXPECT_EQ(exp_poly(kInf), kInf);
  EXPECT_TRUE(std::isnan(exp_poly(std::numeric_limits<float>::quiet_NaN())));
  RecordProperty("worst_ulps", static_cast<int>(worst));
}

// The contract's order, written out: 16 double lanes, then the fixed tree.
double contract_sum(const std::vector<float>& e) {
  double a[16] = {};
  for (size_t i = 0; i < e.size(); ++i) a[i % 16] += e[i];
  double s8[8], s4[4], s2[2];
  for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
  return s2[0] + s2[1];
}

std::vector<float> test_row(int64_t n, uint32_t seed) {
  std::vector<float> x = random_floats(n, seed, 6.0f);
  if (n > 5) x[3] = -kInf;      // masked token
  if (n > 9) x[7] = -200.0f;    // underflows to 0
  if (n > 12) x[11] = -98.0f;   // a subnormal result
  if (n > 40) x[33] = 30.0f;    // the maximum
  return x;
}

constexpr int64_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257, 4000, 151936};

TEST(ExpScaledSum, ScalarReferenceFollowsTheContract) {
  const KernelTable& kt = kernels_for(Isa::Scalar);
  for (int64_t n : kLengths) {
    const std::vector<float> x = test_row(n, uint32_t(n + 1));
    for (float scale : {1.0f, 1.0f / 0.7f, 0.25f}) {
      const float shift = 30.0f;
      std::vector<float> out(size_t(n), -1.0f);
      const double sum = kt.exp_scaled_sum(x.data(), shift, scale, out.data(), n);
      std::vector<float> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) want[size_t(i)] = exp_poly((x[size_t(i)] - shift) * scale);
      ASSERT_EQ(out, want) << "n=" << n;
      EXPECT_EQ(sum, contract_sum(want)) << "n=" << n;
      // Against double precision (of the argument as the contract rounds it, in float):
      // the float exps are within 2 ulp, so the sum is too.
      double exact = 0.0;
      for (float v : x) exact += std::exp(static_cast<double>((v - shift) * scale));
      EXPECT_NEAR(sum, exact, 3e-7 * exact) << "n=" << n;
    }
  }
}

TEST(ExpScaledSum, EveryIsaGivesTheScalarBits) {
  const KernelTable& ref = kernels_for(Isa::Scalar);
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int64_t n : kLengths) {
      const std::vector<float> x = test_row(n, uint32_t(n + 7));
      for (float scale : {1.0f, 1.0f / 1.7f, 3.0f}) {
        for (float shift : {30.0f, 0.0f, 12.5f}) {  // 0 and 12.5: some exps overflow to +inf
          std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.0f);
          const double want_sum = ref.exp_scaled_sum(x.data(), shift, scale, want.data(), n);
          const double got_sum = kt.exp_scaled_sum(x.data(), shift, scale, got.data(), n);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(bits(got[size_t(i)]), bits(want[size_t(i)]))
                << isa_name(isa) << " n=" << n << " i=" << i << " x=" << x[size_t(i)] << " scale=" << scale;
          }
          EXPECT_EQ(std::memcmp(&got_sum, &want_sum, sizeof got_sum), 0)
              << isa_name(isa) << " n=" << n << ": " << got_sum << " vs " << want_sum;
          // Only the sum; and in place.
          const double sum_only = kt.exp_scaled_sum(x.data(), shift, scale, nullptr, n);
          EXPECT_EQ(std::memcmp(&sum_only, &want_sum, sizeof sum_only), 0) << isa_name(isa) << " n=" << n;
          std::vector<float> inplace = x;
          kt.exp_scaled_sum(inplace.data(), shift, scale, inplace.data(), n);
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits(inplace[size_t(i)]), bits(want[size_t(i)])) << isa_name(isa);
        }
      }
    }
  }
}

TEST(ExpScaledSum, NanAndInfinityPropagateAsInTheScalarReference) {
  std::vector<float> x = random_floats(40, 3);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[20] = kInf;
  for (Isa isa : supported_isas()) {
    std::vector<float> out(x.size());
    const double sum = kernels_for(isa).exp_scaled_sum(x.data(), 0.0f, 1.0f, out.data(), int64_t(x.size()));
    EXPECT_TRUE(std::isnan(out[5])) << isa_name(isa);
    EXPECT_EQ(out[20], kInf) << isa_name(isa);
    EXPECT_TRUE(std::isnan(sum)) << isa_name(isa);
  }
}

}  // namespace
}  // namespace spillway::kernels
