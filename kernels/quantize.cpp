// Row (de)quantization of weight types: the reference quantizers that write model files
// and the dequantizers used for embeddings and small tensors.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"

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

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float scales[8], mins[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_affine(x + 32 * j, 32, 15, &mins[j]);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ4_K& b = y[i];
    b.d = fp32_to_fp16(max_scale / 63.0f);
    b.dmin = fp32_to_fp16(max_min / 63.0f);
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    int ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
      ls[j] = d > 0 ? std::clamp(round_half_even(scales[j] / d), 0, 63) : 0;
      lm[j] = dmin > 0 ? std::clamp(round_half_even(mins[j] / dmin), 0, 63) : 0;
    }
    std::memset(b.scales, 0, sizeof b.scales);
    for (int j = 0; j < 4; ++j) {
      b.scales[j] = static_cast<uint8_t>(ls[j]);
      b.scales[j + 4] = static_cast<uint8_t>(lm[j]);
    }
    for (int j = 4; j < 8; ++j) {
      b.scales[j + 4] = static_cast<uint8_t>((ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4));
      b.scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      b.scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
    uint8_t levels[kQK_K];
    for (int j = 0; j < 8; ++j) {
      const float step = d * ls[j], offset = dmin * lm[j];
      for (int l = 0; l < 32; ++l) {
        const float v = x[32 * j + l];
        levels[32 * j + l] =
            step > 0 ? static_cast<uint8_t>(std::clamp(round_half_even((v + offset) / step), 0, 15)) : 0;
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b.qs[32 * c + l] = static_cast<uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
      }
    }
  }
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
    case DType::Q4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
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
