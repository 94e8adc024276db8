// Block layouts decoded from hand-built bytes, quantize -> dequantize error bounds, and
// the activation quantizers (bit-identical on every ISA, and equal to their formulas).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {
namespace {

using testing::random_floats;

void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

TEST(Dequantize, Q8_0HandBuilt) {
  uint8_t block[34];
  put_u16(block, 0x3800);  // 0.5
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  float out[32];
  dequantize_row(DType::Q8_0, block, out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j * 8 - 128)) << j;
}

TEST(Dequantize, Q4_0HandBuilt) {
  uint8_t block[18];
  put_u16(block, 0xC000);  // -2.0
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  dequantize_row(DType::Q4_0, block, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], -2.0f * (j - 8)) << j;
    EXPECT_EQ(out[16 + j], -2.0f * ((15 - j) - 8)) << j;
  }
}

TEST(Dequantize, Q4_KHandBuiltScalePacking) {
  // Scales and mins chosen so that sub-blocks 4-7 use their two high bits.
  const int sc[8] = {1, 17, 33, 63, 5, 20, 40, 63};
  const int mn[8] = {0, 3, 16, 63, 7, 31, 48, 1};
  uint8_t block[144] = {};
  put_u16(block, 0x3C00);      // d = 1
  put_u16(block + 2, 0x3800);  // dmin = 0.5
  uint8_t* scales = block + 4;
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  auto level = [](int e) { return (e * 5 + 3) % 16; };
  uint8_t* qs = block + 16;
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32, l = e % 32;
    qs[32 * (sub / 2) + l] |= static_cast<uint8_t>(level(e) << (sub % 2 ? 4 : 0));
  }
  float out[256];
  dequantize_row(DType::Q4_K, block, out, 256);
  for (int e = 0; e < 256; ++e) {
    const int sub = e / 32;
    EXPECT_EQ(out[e], 1.0f * sc[sub] * level(e) - 0.5f * mn[sub]) << e;
  }
}

TEST(Dequantize, Q4_KWordwiseScaleUnpackMatchesBytewise) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t scales[12];
    for (uint8_t& b : scales) b = static_cast<uint8_t>(rng());
    uint8_t sc[8], mn[8];
    q4k_scales_mins(scales, sc, mn);
    for (int j = 0; j < 8; ++j) {
      int s, m;
      q4k_scale_min(scales, j, &s, &m);
      ASSERT_EQ(sc[j], s) << j;
      ASSERT_EQ(mn[j], m) << j;
    }
  }
}

TEST(Dequantize, Q6_KHandBuiltHighBits) {
  uint8_t block[210] = {};
  uint8_t* ql = block;
  uint8_t* qh = block + 128;
  auto* scales = reinterpret_cast<int8_t*>(block + 192);
  put_u16(block + 208, 0x3400);  // d = 0.25
  auto level = [](int e) { return (e * 7 + 3) % 64; };
  for (int g = 0; g < 16; ++g) scales[g] = static_cast<int8_t>(g * 17 - 128);
  for (int e = 0; e < 256; ++e) {
    // 128-element halves; within one, element 32*k + l (k = 0..3) keeps its low nibble in
    // ql[l + 32*(k%2)] (low nibble for k < 2, high for k >= 2), its top 2 bits in qh[l]
    // at bit 2k.
    const int half = e / 128, k = (e % 128) / 32, l = e % 32;
    ql[64 * half + l + 32 * (k % 2)] |= static_cast<uint8_t>((level(e) & 15) << (k >= 2 ? 4 : 0));
    qh[32 * half + l] |= static_cast<uint8_t>((level(e) >> 4) << (2 * k));
  }
  float out[256];
  dequantize_row(DType::Q6_K, block, out, 256);
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(out[e], 0.25f * scales[e / 16] * (level(e) - 32)) << e;
  }
}

// ggml's dequantize_row_* loops for the newer types, written out in their loop form (a second
// reading of the layouts, not the index helpers the kernels use), on random bytes.
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (uint8_t& v : b) v = static_cast<uint8_t>(rng());
  return b;
}

TEST(Dequantize, NewerTypesFollowGgmlsLoops) {
  const int nb = 3;
  auto check = [&](DType t, auto&& reference) {
    std::vector<uint8_t> bytes = random_bytes(size_t(block_bytes(t) * nb), uint32_t(t));
    // Sane fp16 scales (random bytes could be NaN): every fp16 field gets a small value.
    const int64_t n = nb * block_elems(t);
    for (int b = 0; b < nb; ++b) {
      uint8_t* blk = bytes.data() + b * block_bytes(t);
      switch (t) {
        case DType::Q4_1: put_u16(blk, fp32_to_fp16(0.5f)); put_u16(blk + 2, fp32_to_fp16(-1.25f)); break;
        case DType::Q5_0: put_u16(blk, fp32_to_fp16(0.25f)); break;
        case DType::Q5_1: put_u16(blk, fp32_to_fp16(0.125f)); put_u16(blk + 2, fp32_to_fp16(0.75f)); break;
        case DType::Q2_K: put_u16(blk + 80, fp32_to_fp16(0.5f)); put_u16(blk + 82, fp32_to_fp16(0.25f)); break;
        case DType::Q3_K: put_u16(blk + 108, fp32_to_fp16(0.0625f)); break;
        case DType::Q5_K: put_u16(blk, fp32_to_fp16(0.5f)); put_u16(blk + 2, fp32_to_fp16(0.125f)); break;
        default: break;
      }
    }
    std::vector<float> got(static_cast<size_t>(n)), want(static_cast<size_t>(n));
    dequantize_row(t, bytes.data(), got.data(), n);
    for (int b = 0; b < nb; ++b) reference(bytes.data() + b * block_bytes(t), want.data() + b * block_elems(t));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << dtype_name(t) << " i=" << i;
  };
  auto f16 = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fp16_to_fp32(h);
  };
  check(DType::Q4_1, [&](const uint8_t* x, float* y) {
    const float d = f16(x), m = f16(x + 2);
    for (int j = 0; j < 16; ++j) {
      y[j] = (x[4 + j] & 0x0F) * d + m;
      y[j + 16] = (x[4 + j] >> 4) * d + m;
    }
  });
  check(DType::Q5_0, [&](const uint8_t* x, float* y) {
    const float d = f16(x);
    uint32_t qh;
    std::memcpy(&qh, x + 2, 4);
    for (int j = 0; j < 16; ++j) {
      const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((x[6 + j] & 0x0F) | xh0) - 16;
      y[j + 16] = ((x[6 + j] >> 4) | xh1) - 16;
      y[j] *= d;
      y[j + 16] *= d;
    }
  });
  check(DType::Q5_1, [&](const uint8_t* x, float* y) {
    const float d = f16(x), m = f16(x + 2);
    uint32_t qh;
    std::memcpy(&qh, x + 4, 4);
    for (int j = 0; j < 16; ++j) {
      const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((x[8 + j] & 0x0F) | xh0) * d + m;
      y[j + 16] = ((x[8 + j] >> 4) | xh1) * d + m;
    }
  });
  check(DType::Q2_K, [&](const uint8_t* x, float* y) {  // scales[16] qs[64] d dmin
    const float d = f16(x + 80), dmin = f16(x + 82);
    const uint8_t* q = x + 16;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[is++];
        for (int l = 0; l < 16; ++l) *y++ = d * (sc & 0xF) * ((q[l] >> shift) & 3) - dmin * (sc >> 4);
        sc = x[is++];
        for (int l = 0; l < 16; ++l) *y++ = d * (sc & 0xF) * ((q[l + 16] >> shift) & 3) - dmin * (sc >> 4);
        shift += 2;
      }
      q += 32;
    }
  });
  check(DType::Q3_K, [&](const uint8_t* x, float* y) {  // hmask[32] qs[64] scales[12] d
    const float d_all = f16(x + 108);
    uint32_t aux[4];
    std::memcpy(aux, x + 96, 12);
    const uint32_t tmp = aux[2], kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    const uint8_t* q = x + 32;
    const uint8_t* hm = x;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) *y++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  });
  check(DType::Q5_K, [&](const uint8_t* x, float* y) {  // d dmin scales[12] qh[32] qs[128]
    const float d = f16(x), dmin = f16(x + 2);
    const uint8_t* ql = x + 48;
    const uint8_t* qh = x + 16;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
      int sc, m;
      q4k_scale_min(x + 4, is, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4k_scale_min(x + 4, is + 1, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  });
}

TEST(Dequantize, FloatTypes) {
  const float values[4] = {1.5f, -2.25f, 0.0f, 65504.0f};
  uint16_t h[4], b[4];
  for (int i = 0; i < 4; ++i) {
    h[i] = fp32_to_fp16(values[i]);
    b[i] = fp32_to_bf16(values[i]);
  }
  float out[4];
  dequantize_row(DType::F16, h, out, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], values[i]);
  dequantize_row(DType::BF16, b, out, 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], values[i]);
  EXPECT_EQ(out[3], 65536.0f);  // 65504 rounds to 2^16 in bf16
  dequantize_row(DType::F32, values, out, 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], values[i]);
}

// Relative RMS error of quantize -> dequantize on Gaussian data.
double round_trip_error(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, int64_t(x.size()))));
  std::vector<float> back(x.size());
  quantize_row(t, x.data(), q.data(), int64_t(x.size()));
  dequantize_row(t, q.data(), back.data(), int64_t(x.size()));
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(back[i]));
    err += (back[i] - x[i]) * double(back[i] - x[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

TEST(Quantize, RoundTripErrorBounds) {
  const std::vector<float> x = random_floats(256 * 64, 11);
  EXPECT_EQ(round_trip_error(DType::F32, x), 0.0);
  EXPECT_LT(round_trip_error(DType::F16, x), 1e-3);
  EXPECT_LT(round_trip_error(DType::BF16, x), 4e-3);
  EXPECT_LT(round_trip_error(DType::Q8_0, x), 0.01);
  EXPECT_LT(round_trip_error(DType::Q6_K, x), 0.03);
  EXPECT_LT(round_trip_error(DType::Q4_K, x), 0.11);
  EXPECT_LT(round_trip_error(DType::Q4_0, x), 0.13);
  EXPECT_LT(round_trip_error(DType::Q4_1, x), 0.13);
  EXPECT_LT(round_trip_error(DType::Q5_0, x), 0.07);
  EXPECT_LT(round_trip_error(DType::Q5_1, x), 0.07);
  EXPECT_LT(round_trip_error(DType::Q5_K, x), 0.06);
  EXPECT_LT(round_trip_error(DType::Q3_K, x), 0.25);
  EXPECT_LT(round_trip_error(DType::Q2_K, x), 0.45);
}

TEST(Quantize, Q8_0ElementErrorWithinHalfStep) {
  const std::vector<float> x = random_floats(32 * 16, 12, 3.0f);
  std::vector<uint8_t> q(size_t(row_bytes(DType::Q8_0, 32 * 16)));
  quantize_row(DType::Q8_0, x.data(), q.data(), 32 * 16);
  std::vector<float> back(x.size());
  dequantize_row(DType::Q8_0, q.data(), back.data(), int64_t(x.size()));
  for (size_t b = 0; b < 16; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float step = amax / 127;
    // Half a step, plus the fp16 rounding of the scale times |q| <= 127.
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(back[32 * b + j] - x[32 * b + j]), 0.5f * step + 127 * step * 1e-3f);
  }
}

TEST(Quantize, ZeroAndConstantRowsStayExact) {
  for (DType t : testing::kAllWeightTypes) {
    for (float c : {0.0f, 0.75f, -3.0f}) {
      std::vector<float> x(512, c);
      std::vector<uint8_t> q(size_t(row_bytes(t, 512)));
      std::vector<float> back(512);
      quantize_row(t, x.data(), q.data(), 512);
      dequantize_row(t, q.data(), back.data(), 512);
      for (int i = 0; i < 512; ++i) {
        ASSERT_NEAR(back[i], c, std::fabs(c) * 0.02f) << dtype_name(t) << " " << c;
      }
    }
  }
}

TEST(Quantize, KQuantsUseTheFullScaleRange) {
  // Sub-blocks of very different magnitudes: every one must still be represented.
  std::vector<float> x = random_floats(256, 13);
  for (int i = 0; i < 256; ++i) x[i] *= (i / 32 == 3) ? 100.0f : 1.0f;
  for (DType t : {DType::Q4_K, DType::Q6_K}) {
    std::vector<uint8_t> q(size_t(row_bytes(t, 256)));
    std::vector<float> back(256);
    quantize_row(t, x.data(), q.data(), 256);
    dequantize_row(t, q.data(), back.data(), 256);
    double err = 0, ref = 0;
    for (int i = 96; i < 128; ++i) {
      err += std::pow(back[i] - x[i], 2);
      ref += std::pow(x[i], 2);
    }
    EXPECT_LT(std::sqrt(err / ref), 0.12) << dtype_name(t);
  }
}

// ---- activation quantizers ----------------------------------------------------------

std::vector<float> activation_test_data(int64_t n, uint32_t seed) {
  std::vector<float> x = random_floats(n, seed, 2.0f);
  // Exact ties for the rounding and a zero block.
  for (int i = 0; i < 32; ++i) x[size_t(i)] = (i - 16) * 0.5f;
  for (int i = 32; i < 64; ++i) x[size_t(i)] = 0.0f;
  for (int i = 256; i < 512 && i < n; ++i) x[size_t(i)] = 0.0f;  // a zero Q8_K block
  return x;
}

TEST(ActivationQuantizer, Q8GroupsMatchFormulaOnEveryIsa) {
  const int64_t n = 32 * 40;
  const std::vector<float> x = activation_test_data(n, 21);
  for (int32_t offset : {128, 8}) {
    for (int row : {0, 3, kTileActs - 1}) {
      for (Isa isa : supported_isas()) {
        std::vector<uint8_t> group(q8_group_bytes(n), 0xA5);
        kernels_for(isa).quantize_q8(x.data(), n, offset, group.data(), row);
        const Q8Group q = q8_group(group.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(32 * b + j)]));
          ASSERT_EQ(q.d[b * kTileActs + row], fp16_to_fp32(fp32_to_fp16(amax / 127))) << isa_name(isa) << " block " << b;
          const float id = amax != 0 ? 127 / amax : 0;
          int sum = 0;
          for (int j = 0; j < 32; ++j) {
            const int expected = static_cast<int>(std::nearbyint(x[size_t(32 * b + j)] * id));
            int8_t got;
            std::memcpy(&got, reinterpret_cast<const int8_t*>(&q.q4[(b * 8 + j / 4) * kTileActs + row]) + j % 4, 1);
            ASSERT_EQ(got, expected) << isa_name(isa) << " block " << b << " elem " << j;
            sum += expected;
          }
          ASSERT_EQ(q.corr[b * kTileActs + row], -offset * sum) << isa_name(isa) << " block " << b;
          // The other rows of the group are untouched.
          const int other = (row + 1) % kTileActs;
          int32_t pattern;
          std::memset(&pattern, 0xA5, 4);
          ASSERT_EQ(q.corr[b * kTileActs + other], pattern);
          ASSERT_EQ(q.q4[(b * 8) * kTileActs + other], pattern);
        }
      }
    }
  }
}

TEST(ActivationQuantizer, Q8_KMatchesFormulaOnEveryIsa) {
  const int64_t n = 256 * 6;
  std::vector<float> x = activation_test_data(n, 22);
  x[700] = -40.0f;  // negative extreme in block 2
  x[1100] = 40.0f;  // positive extreme in block 4
  x[1101] = -40.0f; // same magnitude later in the block: the first one sets the sign
  for (Isa isa : supported_isas()) {
    std::vector<BlockQ8_K> blocks(size_t(n / 256));
    kernels_for(isa).quantize_q8_K(x.data(), blocks.data(), n);
    for (int64_t b = 0; b < n / 256; ++b) {
      const float* xb = x.data() + 256 * b;
      const BlockQ8_K& blk = blocks[size_t(b)];
      float amax = 0, max = 0;
      for (int j = 0; j < 256; ++j) {
        if (std::fabs(xb[j]) > amax) {
          amax = std::fabs(xb[j]);
          max = xb[j];
        }
      }
      if (amax == 0) {
        EXPECT_EQ(blk.d, 0.0f);
        for (int j = 0; j < 256; ++j) ASSERT_EQ(blk.qs[j], 0);
        for (int g = 0; g < 16; ++g) ASSERT_EQ(blk.bsums[g], 0);
        continue;
      }
      const float iscale = -127.0f / max;
      ASSERT_EQ(blk.d, 1 / iscale) << isa_name(isa) << " block " << b;
      for (int j = 0; j < 256; ++j) {
        const int expected = std::min(127, static_cast<int>(std::nearbyint(iscale * xb[j])));
        ASSERT_EQ(blk.qs[j], expected) << isa_name(isa) << " block " << b << " elem " << j;
      }
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += blk.qs[16 * g + l];
        ASSERT_EQ(blk.bsums[g], sum) << isa_name(isa);
      }
    }
  }
}

}  // namespace
}  // namespace spillway::kernels
