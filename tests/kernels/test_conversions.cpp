// fp16 / bf16 conversions against independent formulas (ldexp on the bit fields).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/kernel_table.h"
#include "kernels/kernels.h"

namespace spillway::kernels {
namespace {

// IEEE binary16 value of h from its fields, computed in double.
double half_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  double v;
  if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -24);
  } else if (exponent == 31) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  }
  return sign ? -v : v;
}

double bf16_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 7) & 255, mantissa = h & 127;
  double v;
  if (exponent == 0) {
    v = std::ldexp(static_cast<double>(mantissa), -133);
  } else if (exponent == 255) {
    v = mantissa == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + mantissa / 128.0, exponent - 127);
  }
  return sign ? -v : v;
}

TEST(Fp16, ExhaustiveToFp32MatchesFieldFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double expected = half_value(static_cast<uint16_t>(h));
    const float got = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;  // -0 stays -0
    }
  }
}

TEST(Fp16, ExhaustiveRoundTripOfEveryNonNan) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if (std::isnan(half_value(static_cast<uint16_t>(h)))) continue;
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Fp16, TiesRoundToEvenAndNeighboursToNearest) {
  // Midpoints between consecutive finite halves (exact in fp32), for both signs.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t lo = static_cast<uint16_t>(h | sign), hi = static_cast<uint16_t>((h + 1) | sign);
      const double mid = (half_value(lo) + half_value(hi)) / 2;
      const float midf = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(midf), mid);
      const uint16_t even = (lo & 1) ? hi : lo;
      ASSERT_EQ(fp32_to_fp16(midf), even) << "tie between " << lo << " and " << hi;
      const float toward_lo = std::nextafter(midf, static_cast<float>(half_value(lo)));
      const float toward_hi = std::nextafter(midf, static_cast<float>(half_value(hi)));
      ASSERT_EQ(fp32_to_fp16(toward_lo), lo);
      ASSERT_EQ(fp32_to_fp16(toward_hi), hi);
    }
  }
}

TEST(Fp16, OverflowInfNanAndSubnormals) {
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // tie with "65536" rounds to even = Inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_NE(fp32_to_fp16(std::bit_cast<float>(0x7F800001u)) & 0x03FF, 0);  // signalling NaN stays NaN
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);         // tie with 0 -> even
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x1.8p-24f), 0x0002);       // tie between 1 and 2 -> 2
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);     // tie between 0x3FF and 0x400 -> 0x400
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-1e-30f), 0x8000);
}

TEST(Fp16, RandomFloatsRoundToTheNearestHalf) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f) || std::fabs(f) >= 65520.0f) continue;
    const uint16_t h = fp32_to_fp16(f);
    // No other finite half is closer; on a tie, h is even.
    const double err = std::fabs(half_value(h) - f);
    for (int delta : {-1, 1}) {
      const int other = (h & 0x7FFF) + delta;
      if (other < 0 || other > 0x7BFF) continue;
      const uint16_t o = static_cast<uint16_t>((h & 0x8000) | other);
      const double other_err = std::fabs(half_value(o) - f);
      ASSERT_LE(err, other_err) << f;
      if (err == other_err) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
  }
}

TEST(Bf16, ExhaustiveToFp32AndRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double expected = bf16_value(static_cast<uint16_t>(h));
    const float got = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      ASSERT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(got))));
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), expected) << h;
    ASSERT_EQ(fp32_to_bf16(got), h) << h;
  }
}

TEST(Bf16, TiesRoundToEven) {
  for (uint32_t h = 0; h < 0x7F7F; ++h) {
    const auto lo = static_cast<uint16_t>(h), hi = static_cast<uint16_t>(h + 1);
    const float mid = static_cast<float>((bf16_value(lo) + bf16_value(hi)) / 2);
    ASSERT_EQ(fp32_to_bf16(mid), (lo & 1) ? hi : lo) << h;
    ASSERT_EQ(fp32_to_bf16(std::nextafter(mid, 0.0f)), lo) << h;
    ASSERT_EQ(fp32_to_bf16(std::nextafter(mid, INFINITY)), hi) << h;
  }
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to Inf
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  const uint16_t nan = fp32_to_bf16(std::bit_cast<float>(0x7F800001u));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(nan)));
}

TEST(Fp16, RowConversionIsTheScalarOneOnEveryIsa) {
  // Every fp32 exponent, random mantissas and signs, plus the special values; odd lengths
  // exercise the vector tails.
  std::vector<float> x;
  std::mt19937 rng(11);
  for (uint32_t e = 0; e < 256; ++e) {
    for (int i = 0; i < 40; ++i) {
      const uint32_t bits = (rng() & 0x807FFFFFu) | (e << 23);
      x.push_back(std::bit_cast<float>(bits));
    }
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()}) {
    x.push_back(f);
  }
  for (int64_t n : {int64_t(x.size()), int64_t{7}, int64_t{9}}) {
    for (Isa isa : supported_isas()) {
      std::vector<uint16_t> y(size_t(n), 0x1234);
      kernels_for(isa).to_fp16(x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[size_t(i)], fp32_to_fp16(x[size_t(i)])) << isa_name(isa) << " i=" << i << " x=" << x[size_t(i)];
      }
    }
  }
}

}  // namespace
}  // namespace spillway::kernels
