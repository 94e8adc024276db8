// The portable reference implementation of every dispatched kernel. SIMD variants are
// tested against these functions; integer parts (activation quantization, per-block
// integer dots) must match them exactly.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

// Round to nearest, ties to even, for |v| < 2^22 (llama.cpp's nearest_int).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;  // 1.5 * 2^23
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// ---- activation quantizers ----------------------------------------------------------

void quantize_q8(const float* x, int64_t n, int32_t offset, void* group, int row) {
  const int64_t nb = n / kQK8_0;
  const Q8Group g = q8_group(group, n);
  auto* q4 = const_cast<int32_t*>(g.q4);
  auto* d = const_cast<float*>(g.d);
  auto* corr = const_cast<int32_t*>(g.corr);
  for (int64_t b = 0; b < nb; ++b, x += kQK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    d[b * kTileActs + row] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    int8_t q[kQK8_0];
    for (int j = 0; j < kQK8_0; ++j) {
      q[j] = static_cast<int8_t>(nearest_int(x[j] * id));
      sum += q[j];
    }
    for (int k = 0; k < 8; ++k) std::memcpy(&q4[(b * 8 + k) * kTileActs + row], q + 4 * k, 4);
    corr[b * kTileActs + row] = -offset * sum;
  }
}

void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

// ---- dot products: one weight row against nx activation rows -------------------------

template <class RowDot>
void for_each_row(const void* x, size_t x_stride, int nx, float* y, size_t y_stride, RowDot dot) {
  for (int i = 0; i < nx; ++i) {
    y[i * y_stride] = dot(reinterpret_cast<const uint8_t*>(x) + i * x_stride);
  }
}

// ---- float weights: the one-chain order of FloatDotFn ---------------------------------------

struct WidenF32 {
  using T = float;
  static float get(const float* p) { return *p; }
};
struct WidenF16 {
  using T = uint16_t;
  static float get(const uint16_t* p) { return fp16_to_fp32(*p); }
};
struct WidenBF16 {
  using T = uint16_t;
  static float get(const uint16_t* p) { return bf16_to_fp32(*p); }
};

// w_at(k): weight k of the row, widened; x[k * x_step]: activation k.
template <class WeightAt>
float dot_float_chain(WeightAt w_at, const float* x, size_t x_step, int64_t cols) {
  float acc = 0.0f;
  for (int64_t k = 0; k < cols; ++k) acc = std::fma(w_at(k), x[k * x_step], acc);
  return acc;
}

template <class L>
void float_dot(const void* w, size_t w_stride, int nw, const float* x, size_t x_step, int nx, int64_t cols,
               float* y, size_t ys) {
  for (int j = 0; j < nw; ++j) {
    const auto* wr = reinterpret_cast<const typename L::T*>(static_cast<const uint8_t*>(w) + j * w_stride);
    for (int i = 0; i < nx; ++i) {
      y[i * ys + j] = dot_float_chain([&](int64_t k) { return L::get(wr + k); }, x + i, x_step, cols);
    }
  }
}

// A tiled group of kFloatDotW rows: value k of row j at element kFloatDotW * k + j.
template <class L>
void float_tile_dot(const void* w, const float* x, size_t x_step, int nx, int64_t cols, float* y, size_t ys,
                    int /*flags*/) {
  const auto* g = static_cast<const typename L::T*>(w);
  for (int j = 0; j < kFloatDotW; ++j) {
    auto w_at = [&](int64_t k) { return L::get(g + kFloatDotW * k + j); };
    for (int i = 0; i < nx; ++i) y[i * ys + j] = dot_float_chain(w_at, x + i, x_step, cols);
  }
}

void transpose_rows(const float* x, size_t x_stride, int n, int64_t cols, float* out) {
  for (int r = 0; r < n; ++r) {
    for (int64_t k = 0; k < cols; ++k) out[k * kFloatDotX + r] = x[r * x_stride + k];
  }
}

// ---- Q8_0 / Q4_0 tiles: the sequential block order of TileDotFn -----------------------------

template <DType T>
void tile_dot(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, int nx, float* y,
              size_t ys, int flags) {
  const size_t code_bytes = tile_block_code_bytes(T);
  for (int i = 0; i < nx; ++i) {
    for (int r = 0; r < kTileRows; ++r) {
      float acc = (flags & kTileAccumulate) ? y[i * ys + r] : 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int8_t q[kQK8_0];  // row i's quants of block b
        for (int k = 0; k < 8; ++k) std::memcpy(q + 4 * k, &x.q4[(b * 8 + k) * kTileActs + i], 4);
        const uint8_t* c = codes + b * code_bytes;
        int32_t isum = x.corr[b * kTileActs + i];
        for (int g = 0; g < tile_groups(T); ++g) {
          for (int l = 0; l < 4; ++l) {
            const int code = c[(g * kTileRows + r) * 4 + l];
            if constexpr (T == DType::Q8_0) {
              isum += code * q[4 * g + l];
            } else {
              isum += (code & 0x0F) * q[4 * g + l];
              isum += (code >> 4) * q[16 + 4 * g + l];
            }
          }
        }
        const float s = fp16_to_fp32(wd[b * kTileRows + r]) * x.d[b * kTileActs + i];
        acc = std::fma(s, static_cast<float>(isum), acc);
      }
      y[i * ys + r] = acc;
    }
  }
}

// ---- K-quants ------------------------------------------------------------------------------

// One 256 block of each: acc plus the block's term, in DotRowsFn's order.
float q4_k_block(const BlockQ4_K& w, const BlockQ8_K& x, float acc) {
  int32_t sum_q = 0, sum_mins = 0;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    q4k_scale_min(w.scales, j, &sc, &m);
    const uint8_t* q = w.qs + 32 * (j / 2);
    const int shift = (j % 2) * 4;
    int32_t sub = 0;
    for (int l = 0; l < 32; ++l) sub += ((q[l] >> shift) & 0x0F) * x.qs[32 * j + l];
    sum_q += sc * sub;
    sum_mins += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  const float d = x.d * fp16_to_fp32(w.d);
  const float dmin = x.d * fp16_to_fp32(w.dmin);
  return acc + (d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_mins));
}

float q5_k_block(const BlockQ5_K& w, const BlockQ8_K& x, float acc) {
  int32_t sum_q = 0, sum_mins = 0;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    q4k_scale_min(w.scales, j, &sc, &m);
    int32_t sub = 0;
    for (int l = 0; l < 32; ++l) sub += q5k_quant(w, 32 * j + l) * x.qs[32 * j + l];
    sum_q += sc * sub;
    sum_mins += m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  const float d = x.d * fp16_to_fp32(w.d);
  const float dmin = x.d * fp16_to_fp32(w.dmin);
  return acc + (d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_mins));
}

float q6_k_block(const BlockQ6_K& w, const BlockQ8_K& x, float acc) {
  int32_t sum = 0;
  for (int g = 0; g < 16; ++g) {
    int32_t group = 0;
    for (int l = 0; l < 16; ++l) group += (q6k_quant(w, 16 * g + l) - 32) * x.qs[16 * g + l];
    sum += w.scales[g] * group;
  }
  return acc + (x.d * fp16_to_fp32(w.d)) * static_cast<float>(sum);
}

template <class Block, float (*Step)(const Block&, const BlockQ8_K&, float)>
void dot_k_rows(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const Block*>(w);
  for_each_row(x, xs, nx, y, ys, [&](const uint8_t* xr) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(xr);
    float acc = 0.0f;
    for (int64_t b = 0; b < cols / kQK_K; ++b) acc = Step(wb[b], xb[b], acc);
    return acc;
  });
}

// A tile: each row's blocks read back out of the tile, then the row kernel's arithmetic.
template <DType T, class Block, float (*Step)(const Block&, const BlockQ8_K&, float)>
void kquant_tile_dot(const uint8_t* tile, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys,
                     int /*flags*/) {
  for (int i = 0; i < nx; ++i) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + i * xs);
    for (int r = 0; r < kTileRows; ++r) {
      float acc = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        Block blk;
        kquant_tile_row_block(T, tile + b * kTileRows * sizeof(Block), r, reinterpret_cast<uint8_t*>(&blk));
        acc = Step(blk, xb[b], acc);
      }
      y[i * ys + r] = acc;
    }
  }
}

// Two consecutive tiles: two single-tile calls.
template <DType T, class Block, float (*Step)(const Block&, const BlockQ8_K&, float)>
void kquant_tile2_dot(const uint8_t* tile, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys,
                      int flags) {
  kquant_tile_dot<T, Block, Step>(tile, nb, x, xs, nx, y, ys, flags);
  kquant_tile_dot<T, Block, Step>(tile + nb * kTileRows * sizeof(Block), nb, x, xs, nx, y + kTileRows, ys, flags);
}

void dot_q3_k(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ3_K*>(w);
  for_each_row(x, xs, nx, y, ys, [&](const uint8_t* xr) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(xr);
    float acc = 0.0f;
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
      int32_t sum = 0;
      for (int g = 0; g < 16; ++g) {
        int32_t group = 0;
        for (int l = 0; l < 16; ++l) group += (q3k_code(wb[b], 16 * g + l) - 4) * xb[b].qs[16 * g + l];
        sum += q3k_scale(wb[b].scales, g) * group;
      }
      acc += (xb[b].d * fp16_to_fp32(wb[b].d)) * static_cast<float>(sum);
    }
    return acc;
  });
}

void dot_q2_k(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ2_K*>(w);
  for_each_row(x, xs, nx, y, ys, [&](const uint8_t* xr) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(xr);
    float acc = 0.0f;
    for (int64_t b = 0; b < cols / kQK_K; ++b) {
      int32_t sum_q = 0, sum_mins = 0;
      for (int g = 0; g < 16; ++g) {
        int32_t group = 0;
        for (int l = 0; l < 16; ++l) group += q2k_low_bits(wb[b].qs, 16 * g + l) * xb[b].qs[16 * g + l];
        sum_q += (wb[b].scales[g] & 0x0F) * group;
        sum_mins += (wb[b].scales[g] >> 4) * xb[b].bsums[g];
      }
      const float d = xb[b].d * fp16_to_fp32(wb[b].d);
      const float dmin = xb[b].d * fp16_to_fp32(wb[b].dmin);
      acc += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_mins);
    }
    return acc;
  });
}

// Q4_1 / Q5_0 / Q5_1: 32-value blocks against sub-block k % 8 of Q8_K block k / 8.
template <DType T>
void dot_q32(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
  const auto* wbytes = static_cast<const uint8_t*>(w);
  for_each_row(x, xs, nx, y, ys, [&](const uint8_t* xr) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(xr);
    float acc = 0.0f;
    for (int64_t k = 0; k < cols / 32; ++k) {
      const BlockQ8_K& a = xb[k / 8];
      const int j = static_cast<int>(k % 8);
      const int8_t* xq = a.qs + 32 * j;
      int32_t isum = 0;
      if constexpr (T == DType::Q4_1) {
        const auto& blk = reinterpret_cast<const BlockQ4_1*>(wbytes)[k];
        for (int l = 0; l < 16; ++l) isum += (blk.qs[l] & 0x0F) * xq[l] + (blk.qs[l] >> 4) * xq[l + 16];
        const float bs = static_cast<float>(a.bsums[2 * j] + a.bsums[2 * j + 1]);
        acc += (a.d * fp16_to_fp32(blk.d)) * static_cast<float>(isum) + (a.d * fp16_to_fp32(blk.m)) * bs;
      } else if constexpr (T == DType::Q5_0) {
        const auto& blk = reinterpret_cast<const BlockQ5_0*>(wbytes)[k];
        for (int l = 0; l < 32; ++l) isum += (q5_quant(blk.qh, blk.qs, l) - 16) * xq[l];
        acc += (a.d * fp16_to_fp32(blk.d)) * static_cast<float>(isum);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ5_1*>(wbytes)[k];
        for (int l = 0; l < 32; ++l) isum += q5_quant(blk.qh, blk.qs, l) * xq[l];
        const float bs = static_cast<float>(a.bsums[2 * j] + a.bsums[2 * j + 1]);
        acc += (a.d * fp16_to_fp32(blk.d)) * static_cast<float>(isum) + (a.d * fp16_to_fp32(blk.m)) * bs;
      }
    }
    return acc;
  });
}

// ---- row operations -------------------------------------------------------------------

void to_fp16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void rms_norm_scalar(const float* x, const float* weight, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (weight) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void softmax_scalar(float* x, int64_t n) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float silu_scalar(float g) { return g / (1.0f + std::exp(-g)); }

void silu_mul_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu_scalar(gate[i]) * up[i];
}

void conv_silu_scalar(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1,
                      float* out) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    float acc = 0.0f;
    for (int32_t k = 0; k < K; ++k) acc += taps[int64_t{k} * C + ch] * rows[k][ch];
    out[ch] = silu_scalar(acc);  // silu_mul_scalar's with up = 1: the same bits
  }
}

void add_inplace_scalar(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// The reference of exp_scaled_sum (exp_sum.h): exp_poly per element, 16 double lanes.
double exp_scaled_sum_scalar(const float* x, float shift, float scale, float* out, int64_t n) {
  double a[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    const float e = exp_poly((x[i] - shift) * scale);
    if (out) out[i] = e;
    a[i % 16] += e;
  }
  double s8[8], s4[4];
  for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

void rope_scalar(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, RopeStyle style) {
  const int half = rot_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      float* a = style == RopeStyle::Interleaved ? xh + 2 * i : xh + i;
      float* b = style == RopeStyle::Interleaved ? xh + 2 * i + 1 : xh + i + half;
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

// ---- gated delta net ----------------------------------------------------------------------

void gated_delta_net_scalar(const GatedDeltaNetArgs& a) {
  const int dk = a.dk, dv = a.dv;
  for (int c = 0; c < dv; ++c) {
    const float* src = a.state_in;  // the state the token reads: state_in, then state_out
    for (int t = 0; t < a.n_tokens; ++t) {
      const float* q = a.q + t * a.qk_stride;
      const float* k = a.k + t * a.qk_stride;
      const float e = std::exp(a.g[t * a.gb_stride]);
      const float beta = a.beta[t * a.gb_stride];
      float sk = 0.0f;
      for (int i = 0; i < dk; ++i) {
        const float s = src ? src[size_t(i) * dv + c] * e : 0.0f;
        a.state_out[size_t(i) * dv + c] = s;
        sk = std::fma(s, k[i], sk);
      }
      const float d = beta * (a.v[t * a.v_stride + c] - sk);
      float o = 0.0f;
      for (int i = 0; i < dk; ++i) {
        float& s = a.state_out[size_t(i) * dv + c];
        s = std::fma(k[i], d, s);
        o = std::fma(s, q[i], o);
      }
      a.out[t * a.out_stride + c] = o * a.scale;
      src = a.state_out;
    }
    if (a.n_tokens == 0 && a.state_out != a.state_in) {
      for (int i = 0; i < dk; ++i) a.state_out[size_t(i) * dv + c] = a.state_in ? a.state_in[size_t(i) * dv + c] : 0.0f;
    }
  }
}

// ---- attention --------------------------------------------------------------------------

float load_kv(const KvView& view, int64_t t, int head, int d) {
  const int64_t block = view.block_table[t / view.block_size];
  const int64_t e = block * view.block_stride + (t % view.block_size) * view.token_stride +
                    int64_t(head) * view.head_stride + int64_t(d) * view.dim_stride;
  return view.type == DType::F16 ? fp16_to_fp32(static_cast<const uint16_t*>(view.data)[e])
                                 : static_cast<const float*>(view.data)[e];
}

void attention_scalar(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim, const KvView& k,
                      const KvView& v, int kv_head, const int64_t* key_counts, float scale, float* out, size_t out_stride,
                      float* scratch) {
  assert(k.type == v.type && (k.type == DType::F16 || k.type == DType::F32));
  for (int j = 0; j < n_tokens; ++j) {
    const int64_t n_ctx = key_counts[j];
    for (int g = 0; g < n_group; ++g) {
      const float* qg = q + j * q_stride + int64_t(g) * head_dim;
      float* og = out + j * out_stride + int64_t(g) * head_dim;
      for (int64_t t = 0; t < n_ctx; ++t) {
        float acc = 0.0f;
        for (int d = 0; d < head_dim; ++d) acc = std::fma(qg[d], load_kv(k, t, kv_head, d), acc);
        scratch[t] = acc * scale;
      }
      softmax_scalar(scratch, n_ctx);
      for (int d = 0; d < head_dim; ++d) {
        float acc = 0.0f;
        for (int64_t t = 0; t < n_ctx; ++t) acc = std::fma(scratch[t], load_kv(v, t, kv_head, d), acc);
        og[d] = acc;
      }
    }
  }
}

constexpr KernelTable make_scalar_table() {
  KernelTable t;
  t.isa = Isa::Scalar;
  t.quantize_q8 = quantize_q8;
  t.quantize_q8_K = quantize_act_q8_k;
  t.transpose_rows = transpose_rows;
  t.float_dot[0] = float_dot<WidenF32>;
  t.float_dot[1] = float_dot<WidenF16>;
  t.float_dot[2] = float_dot<WidenBF16>;
  t.float_tile_dot[0] = float_tile_dot<WidenF32>;
  t.float_tile_dot[1] = float_tile_dot<WidenF16>;
  t.float_tile_dot[2] = float_tile_dot<WidenBF16>;
  t.tile_dot[0] = tile_dot<DType::Q8_0>;
  t.tile_dot[1] = tile_dot<DType::Q4_0>;
  t.kquant_dot[0] = dot_k_rows<BlockQ4_K, q4_k_block>;
  t.kquant_dot[1] = dot_k_rows<BlockQ6_K, q6_k_block>;
  t.kquant_dot[2] = dot_k_rows<BlockQ5_K, q5_k_block>;
  t.kquant_dot[3] = dot_q3_k;
  t.kquant_dot[4] = dot_q2_k;
  t.kquant_dot[5] = dot_q32<DType::Q4_1>;
  t.kquant_dot[6] = dot_q32<DType::Q5_0>;
  t.kquant_dot[7] = dot_q32<DType::Q5_1>;
  t.kquant_tile_dot[0] = kquant_tile_dot<DType::Q4_K, BlockQ4_K, q4_k_block>;
  t.kquant_tile_dot[1] = kquant_tile_dot<DType::Q6_K, BlockQ6_K, q6_k_block>;
  t.kquant_tile_dot[2] = kquant_tile_dot<DType::Q5_K, BlockQ5_K, q5_k_block>;
  t.kquant_tile2_dot[0] = kquant_tile2_dot<DType::Q4_K, BlockQ4_K, q4_k_block>;
  t.kquant_tile2_dot[1] = kquant_tile2_dot<DType::Q6_K, BlockQ6_K, q6_k_block>;
  t.kquant_tile2_dot[2] = kquant_tile2_dot<DType::Q5_K, BlockQ5_K, q5_k_block>;
  t.to_fp16 = to_fp16_scalar;
  t.rms_norm = rms_norm_scalar;
  t.softmax = softmax_scalar;
  t.silu_mul = silu_mul_scalar;
  t.add_inplace = add_inplace_scalar;
  t.conv_silu = conv_silu_scalar;
  t.exp_scaled_sum = exp_scaled_sum_scalar;
  t.row_range = row_range_scalar;
  t.band_masses = band_masses_scalar;
  t.band_pack = band_pack_scalar;
  t.exp_band_sums = exp_band_sums_scalar;
  t.rope = rope_scalar;
  t.attention = attention_scalar;
  t.gated_delta_net = gated_delta_net_scalar;
  return t;
}

constinit const KernelTable kScalarTable = make_scalar_table();

}  // namespace

const KernelTable& scalar_kernel_table() { return kScalarTable; }

// The exp of exp_scaled_sum, operation for operation as the SIMD versions compute it
// (exp_sum_avx2.cpp / exp_sum_avx512.cpp): the same float products, fmas and roundings, so
// every ISA gives the same bits. Out-of-range inputs return early where the SIMD code clamps
// and then overrides the lane.
float exp_poly(float x) {
  if (x != x) return x;
  if (x < -104.0f) return 0.0f;
  if (x > 88.72283f) return INFINITY;
  // n = round-half-even(x log2 e) (|x log2 e| < 2^22: the 1.5 * 2^23 trick is exact).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = std::fma(-n, 0.693359375f, x);  // x - n ln2, ln2 in two parts (Cody-Waite)
  r = std::fma(-n, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  // 2^n (n in [-150, 128]) as 2^n1 * 2^n2, both normal: the first product is exact, the
  // second rounds once (subnormal results included).
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23, b2 = static_cast<uint32_t>(n2 + 127) << 23;
  float f1, f2;
  std::memcpy(&f1, &b1, sizeof f1);
  std::memcpy(&f2, &b2, sizeof f2);
  return (p * f1) * f2;
}

}  // namespace spillway::kernels
