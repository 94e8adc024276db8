// Row (de)quantization of weight types: the reference quantizers that write model files
// and the dequantizers used for embeddings and small tensors.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

int round_half_even(float v) { return static_cast<int>(std::nearbyint(v)); }

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
    float amax = 0.0f, max = 0.0f;  // max: the value of largest magnitude, with its sign
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK4_0 / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Fits x[0..n) ~ scale * L + offset with L in [0, nmax] and offset <= 0 (least squares,
// refined a few rounds from the min/max start). Returns scale; *neg_min = -offset >= 0.
float fit_affine(const float* x, int n, int nmax, float* neg_min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.0f);
  if (hi <= lo) {
    *neg_min = -lo;
    return 0.0f;
  }
  float scale = (hi - lo) / nmax, offset = lo;
  float best_err = INFINITY, best_scale = scale, best_offset = offset;
  for (int round = 0; round < 4; ++round) {
    double sum_l = 0, sum_l2 = 0, sum_x = 0, sum_xl = 0, err = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_half_even((x[i] - offset) / scale), 0, nmax);
      const double diff = scale * l + offset - x[i];
      err += diff * diff;
      sum_l += l;
      sum_l2 += double(l) * l;
      sum_x += x[i];
      sum_xl += double(x[i]) * l;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      best_scale = scale;
      best_offset = offset;
    }
    // Least-squares refit of (scale, offset) for these levels, keeping offset <= 0.
    const double det = n * sum_l2 - sum_l * sum_l;
    if (det <= 0) break;
    double s = (n * sum_xl - sum_l * sum_x) / det;
    double b = (sum_x - s * sum_l) / n;
    if (b > 0) {
      b = 0;
      s = sum_l2 > 0 ? sum_xl / sum_l2 : 0;
    }
    if (s <= 0) break;
    scale = static_cast<float>(s);
    offset = static_cast<float>(b);
  }
  *neg_min = -best_offset;
  return best_scale;
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    // Per group of 16: a signed scale such that the largest-magnitude value maps to -32,
    // refined by least squares over the chosen levels.
    float group_scale[16];
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < 16; ++g) {
      const float* xg = x + 16 * g;
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(xg[l]) > amax) {
          amax = std::fabs(xg[l]);
          max = xg[l];
        }
      }
      float s = max / -32.0f;
      if (s != 0.0f) {
        double sum_xl = 0, sum_l2 = 0;
        for (int l = 0; l < 16; ++l) {
          const int q = std::clamp(round_half_even(xg[l] / s), -32, 31);
          sum_xl += double(xg[l]) * q;
          sum_l2 += double(q) * q;
        }
        if (sum_l2 > 0 && sum_xl / sum_l2 * s > 0) s = static_cast<float>(sum_xl / sum_l2);
      }
      group_scale[g] = s;
      if (std::fabs(s) > max_abs_scale) {
        max_abs_scale = std::fabs(s);
        max_scale = s;
      }
    }
    BlockQ6_K& b = y[i];
    uint8_t levels[kQK_K];
    if (max_abs_scale == 0.0f) {
      std::memset(&b, 0, sizeof b);
      std::memset(levels, 32, sizeof levels);
    } else {
      const float iscale = -128.0f / max_scale;
      b.d = fp32_to_fp16(1.0f / iscale);
      const float d = fp16_to_fp32(b.d);
      for (int g = 0; g < 16; ++g) {
        const int sc = std::clamp(round_half_even(iscale * group_scale[g]), -128, 127);
        b.scales[g] = static_cast<int8_t>(sc);
        const float step = d * sc;
        for (int l = 0; l < 16; ++l) {
          const int q = step != 0.0f ? std::clamp(round_half_even(x[16 * g + l] / step), -32, 31) : 0;
          levels[16 * g + l] = static_cast<uint8_t>(q + 32);
        }
      }
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* lv = levels + 128 * half;
      uint8_t* ql = b.ql + 64 * half;
      uint8_t* qh = b.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((lv[l] & 0x0F) | ((lv[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((lv[l + 32] & 0x0F) | ((lv[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) |
                                     ((lv[l + 64] >> 4) << 4) | ((lv[l + 96] >> 4) << 6));
      }
    }
  }
}


// Q4_1 / Q5_1: min and max of the block, q = round((x - min) / d) with d = (max - min) / nmax
// (as ggml's reference quantizers).
template <int kNmax>
void quantize_affine_32(const float* x, uint16_t* d_out, uint16_t* m_out, uint8_t q[32]) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / kNmax;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_out = fp32_to_fp16(d);
  *m_out = fp32_to_fp16(lo);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::min(kNmax, static_cast<int>((x[j] - lo) * id + 0.5f)));
}

void pack_nibbles_32(const uint8_t q[32], uint8_t qs[16]) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
}

void pack_high_bits_32(const uint8_t q[32], uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= uint32_t(q[j] >> 4) << j;
  std::memcpy(qh, &h, 4);
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    uint8_t q[32];
    quantize_affine_32<15>(x, &y[i].d, &y[i].m, q);
    pack_nibbles_32(q, y[i].qs);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    uint8_t q[32];
    quantize_affine_32<31>(x, &y[i].d, &y[i].m, q);
    pack_nibbles_32(q, y[i].qs);
    pack_high_bits_32(q, y[i].qh);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint8_t q[32];
    for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
    pack_nibbles_32(q, y[i].qs);
    pack_high_bits_32(q, y[i].qh);
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 fitted as scale * L - min, L in [0, kNmax]; scales and mins
// quantized to 6 bits against d, dmin. Writes d, dmin, the packed scales and the levels.
template <int kNmax>
void quantize_k_affine(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t packed[12], uint8_t levels[kQK_K]) {
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    scales[j] = fit_affine(x + 32 * j, 32, kNmax, &mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  int ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = d > 0 ? std::clamp(round_half_even(scales[j] / d), 0, 63) : 0;
    lm[j] = dmin > 0 ? std::clamp(round_half_even(mins[j] / dmin), 0, 63) : 0;
  }
  std::memset(packed, 0, 12);
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(ls[j]);
    packed[j + 4] = static_cast<uint8_t>(lm[j]);
  }
  for (int j = 4; j < 8; ++j) {
    packed[j + 4] = static_cast<uint8_t>((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
    packed[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
    packed[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
  }
  for (int j = 0; j < 8; ++j) {
    const float step = d * ls[j], offset = dmin * lm[j];
    for (int l = 0; l < 32; ++l) {
      const float v = x[32 * j + l];
      levels[32 * j + l] =
          step > 0 ? static_cast<uint8_t>(std::clamp(round_half_even((v + offset) / step), 0, kNmax)) : 0;
    }
  }
}

void pack_k_nibbles(const uint8_t levels[kQK_K], uint8_t qs[kQK_K / 2]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>((levels[64 * c + l] & 0x0F) | ((levels[64 * c + 32 + l] & 0x0F) << 4));
    }
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t levels[kQK_K];
    quantize_k_affine<15>(x, &y[i].d, &y[i].dmin, y[i].scales, levels);
    pack_k_nibbles(levels, y[i].qs);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    uint8_t levels[kQK_K];
    quantize_k_affine<31>(x, &y[i].d, &y[i].dmin, y[i].scales, levels);
    pack_k_nibbles(levels, y[i].qs);
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int e = 0; e < kQK_K; ++e) y[i].qh[e % 32] |= static_cast<uint8_t>((levels[e] >> 4) << (e / 32));
  }
}

// The 2-bit fields of Q2_K / Q3_K: element 128h + 32j + l in bits 2j of qs[32h + l].
void pack_2bit(const uint8_t levels[kQK_K], uint8_t qs[kQK_K / 4]) {
  std::memset(qs, 0, kQK_K / 4);
  for (int e = 0; e < kQK_K; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] |= static_cast<uint8_t>((levels[e] & 3) << (2 * j));
  }
}

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[16], mins[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int g = 0; g < 16; ++g) {
      scales[g] = fit_affine(x + 16 * g, 16, 3, &mins[g]);
      max_scale = std::max(max_scale, scales[g]);
      max_min = std::max(max_min, mins[g]);
    }
    BlockQ2_K& b = y[i];
    b.d = fp32_to_fp16(max_scale / 15.0f);
    b.dmin = fp32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    uint8_t levels[kQK_K];
    for (int g = 0; g < 16; ++g) {
      const int ls = d > 0 ? std::clamp(round_half_even(scales[g] / d), 0, 15) : 0;
      const int lm = dmin > 0 ? std::clamp(round_half_even(mins[g] / dmin), 0, 15) : 0;
      b.scales[g] = static_cast<uint8_t>(ls | (lm << 4));
      const float step = d * ls, offset = dmin * lm;
      for (int l = 0; l < 16; ++l) {
        const float v = x[16 * g + l];
        levels[16 * g + l] = step > 0 ? static_cast<uint8_t>(std::clamp(round_half_even((v + offset) / step), 0, 3)) : 0;
      }
    }
    pack_2bit(levels, b.qs);
  }
}

// Per group of 16, a signed scale mapping the largest-magnitude value to -kLow (refined by
// least squares over the chosen levels in [-kLow, kLow - 1]); returns the group scales.
template <int kLow>
void signed_group_scales(const float* x, float group_scale[16], float* max_scale_out) {
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    const float* xg = x + 16 * g;
    float amax = 0.0f, max = 0.0f;
    for (int l = 0; l < 16; ++l) {
      if (std::fabs(xg[l]) > amax) {
        amax = std::fabs(xg[l]);
        max = xg[l];
      }
    }
    float s = max / -float(kLow);
    if (s != 0.0f) {
      double sum_xl = 0, sum_l2 = 0;
      for (int l = 0; l < 16; ++l) {
        const int q = std::clamp(round_half_even(xg[l] / s), -kLow, kLow - 1);
        sum_xl += double(xg[l]) * q;
        sum_l2 += double(q) * q;
      }
      if (sum_l2 > 0 && sum_xl / sum_l2 * s > 0) s = static_cast<float>(sum_xl / sum_l2);
    }
    group_scale[g] = s;
    if (std::fabs(s) > max_abs_scale) {
      max_abs_scale = std::fabs(s);
      max_scale = s;
    }
  }
  *max_scale_out = max_scale;
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float group_scale[16], max_scale;
    signed_group_scales<4>(x, group_scale, &max_scale);
    BlockQ3_K& b = y[i];
    std::memset(&b, 0, sizeof b);
    uint8_t levels[kQK_K];
    std::memset(levels, 4, sizeof levels);
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      b.d = fp32_to_fp16(1.0f / iscale);
      const float d = fp16_to_fp32(b.d);
      for (int g = 0; g < 16; ++g) {
        const int sc = std::clamp(round_half_even(iscale * group_scale[g]), -32, 31);
        const int l = sc + 32;
        b.scales[g % 8] |= static_cast<uint8_t>((l & 0x0F) << (4 * (g / 8)));
        b.scales[8 + g % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (g / 4)));
        const float step = d * sc;
        for (int k = 0; k < 16; ++k) {
          const int q = step != 0.0f ? std::clamp(round_half_even(x[16 * g + k] / step), -4, 3) : 0;
          levels[16 * g + k] = static_cast<uint8_t>(q + 4);
        }
      }
    } else {
      for (int g = 0; g < 16; ++g) {  // scale code 32 = 0
        b.scales[8 + g % 4] |= static_cast<uint8_t>(2 << (2 * (g / 4)));
      }
    }
    pack_2bit(levels, b.qs);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = (e % 128) / 32, l = e % 32;
      b.hmask[l] |= static_cast<uint8_t>((levels[e] >> 2) << (4 * h + j));
    }
  }
}

}  // namespace

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  assert(n % block_elems(t) == 0);
  const int64_t nb = n / block_elems(t);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::F16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(src[i]);
      return;
    }
    case DType::Q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case DType::Q4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case DType::Q4_1: return quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case DType::Q5_0: return quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case DType::Q5_1: return quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case DType::Q2_K: return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb);
    case DType::Q3_K: return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb);
    case DType::Q4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case DType::Q5_K: return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
    case DType::Q6_K: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
  }
  assert(false && "quantize_row: unsupported type");
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  assert(n % block_elems(t) == 0);
  const int64_t nb = n / block_elems(t);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case DType::F16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(in[i]);
      return;
    }
    case DType::BF16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(in[i]);
      return;
    }
    case DType::Q8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK8_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < kQK8_0; ++j) dst[j] = d * b[i].qs[j];
      }
      return;
    }
    case DType::Q4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK4_0) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          dst[j] = d * ((b[i].qs[j] & 0x0F) - 8);
          dst[j + kQK4_0 / 2] = d * ((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::Q4_K: {
      const auto* b = static_cast<const BlockQ4_K*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          q4k_scale_min(b[i].scales, j, &sc, &m);
          const float step = d * sc, offset = dmin * m;
          const uint8_t* q = b[i].qs + 32 * (j / 2);
          const int shift = (j % 2) * 4;
          for (int l = 0; l < 32; ++l) dst[32 * j + l] = step * ((q[l] >> shift) & 0x0F) - offset;
        }
      }
      return;
    }
    case DType::Q4_1: {
      const auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += 32) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < 16; ++j) {
          dst[j] = (b[i].qs[j] & 0x0F) * d + m;
          dst[j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
      }
      return;
    }
    case DType::Q5_0: {
      const auto* b = static_cast<const BlockQ5_0*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += 32) {
        const float d = fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[j] = (q5_quant(b[i].qh, b[i].qs, j) - 16) * d;
      }
      return;
    }
    case DType::Q5_1: {
      const auto* b = static_cast<const BlockQ5_1*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += 32) {
        const float d = fp16_to_fp32(b[i].d), m = fp16_to_fp32(b[i].m);
        for (int j = 0; j < 32; ++j) dst[j] = q5_quant(b[i].qh, b[i].qs, j) * d + m;
      }
      return;
    }
    case DType::Q2_K: {
      const auto* b = static_cast<const BlockQ2_K*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int e = 0; e < kQK_K; ++e) {
          const uint8_t sc = b[i].scales[e / 16];
          dst[e] = d * (sc & 0x0F) * q2k_low_bits(b[i].qs, e) - dmin * (sc >> 4);
        }
      }
      return;
    }
    case DType::Q3_K: {
      const auto* b = static_cast<const BlockQ3_K*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
        const float d = fp16_to_fp32(b[i].d);
        for (int e = 0; e < kQK_K; ++e) dst[e] = d * q3k_scale(b[i].scales, e / 16) * (q3k_code(b[i], e) - 4);
      }
      return;
    }
    case DType::Q5_K: {
      const auto* b = static_cast<const BlockQ5_K*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
        const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          q4k_scale_min(b[i].scales, j, &sc, &m);
          const float step = d * sc, offset = dmin * m;
          for (int l = 0; l < 32; ++l) dst[32 * j + l] = step * q5k_quant(b[i], 32 * j + l) - offset;
        }
      }
      return;
    }
    case DType::Q6_K: {
      const auto* b = static_cast<const BlockQ6_K*>(src);
      for (int64_t i = 0; i < nb; ++i, dst += kQK_K) {
        const float d = fp16_to_fp32(b[i].d);
        for (int e = 0; e < kQK_K; ++e) dst[e] = d * b[i].scales[e / 16] * (q6k_quant(b[i], e) - 32);
      }
      return;
    }
  }
  assert(false && "dequantize_row: unsupported type");
}

}  // namespace spillway::kernels
