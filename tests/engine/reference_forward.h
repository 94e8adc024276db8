// A deliberately naive double-precision transformer forward for tests: one sequence,
// full recomputation, no KV cache, weights dequantized with kernels::dequantize_row (tested
// against hand-computed blocks). K and V are rounded to fp16 after rope, as the engine's
// F16 KV cache stores them (that rounding is a documented property of the engine, not an
// error to tolerate). It shares no code with engine/forward.cpp,
// so agreement checks the engine's batching, paging, rope layouts, GQA, biases and
// QK-norm against the textbook formulas.
#pragma once

#include <cmath>
#include <vector>

#include "engine/model/model.h"

namespace spillway::testing {

inline std::vector<double> dequantize_matrix(const kernels::WeightMatrix& w) {
  std::vector<float> row(w.cols);
  std::vector<double> out(static_cast<size_t>(w.rows * w.cols));
  const int64_t rb = kernels::row_bytes(w.type, w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * rb, row.data(), w.cols);
    for (int64_t c = 0; c < w.cols; ++c) out[r * w.cols + c] = row[c];
  }
  return out;
}

// y = W x for W [rows, cols] row-major.
inline std::vector<double> matvec(const std::vector<double>& w, int64_t rows, int64_t cols,
                                  const std::vector<double>& x) {
  std::vector<double> y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

inline void rms_norm(std::vector<double>& x, size_t offset, size_t n, const float* weight,
                     double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  for (size_t i = 0; i < n; ++i) x[offset + i] *= scale * (weight ? weight[i] : 1.0);
}

inline void rope(std::vector<double>& x, size_t offset, int head_dim, int rot_dim, int64_t pos,
                 const engine::ModelConfig& c) {
  for (int i = 0; i < rot_dim / 2; ++i) {
    double theta = pos * c.rope_freq_scale * std::pow(double(c.rope_freq_base), -2.0 * i / rot_dim);
    if (!c.rope_freq_factors.empty()) theta /= c.rope_freq_factors[i];
    const size_t a = offset + (c.rope_style == kernels::RopeStyle::Interleaved ? 2 * i : i);
    const size_t b = offset + (c.rope_style == kernels::RopeStyle::Interleaved ? 2 * i + 1 : i + rot_dim / 2);
    const double x0 = x[a], x1 = x[b];
    x[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
    x[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

// Logits [tokens.size(), n_vocab] for every position of the sequence.
inline std::vector<std::vector<double>> reference_logits(const engine::Model& model,
                                                         const std::vector<int32_t>& tokens) {
  const engine::ModelConfig& c = model.config();
  const int64_t d = c.n_embd, hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads;
  const size_t T = tokens.size();
  const auto embd = dequantize_matrix(model.token_embedding());
  std::vector<std::vector<double>> x(T);
  for (size_t t = 0; t < T; ++t) x[t].assign(embd.begin() + tokens[t] * d, embd.begin() + (tokens[t] + 1) * d);

  for (const engine::BlockWeights& block : model.layers()) {
    const auto& l = std::get<engine::AttentionWeights>(block.mixer);
    const auto& f = std::get<engine::DenseFfnWeights>(block.ffn);
    const auto wq = dequantize_matrix(l.wq), wk = dequantize_matrix(l.wk), wv = dequantize_matrix(l.wv);
    const auto wo = dequantize_matrix(l.wo), wg = dequantize_matrix(f.w_gate);
    const auto wu = dequantize_matrix(f.w_up), wdn = dequantize_matrix(f.w_down);
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> h = x[t];
      rms_norm(h, 0, d, block.mixer_norm, c.rms_eps);
      q[t] = matvec(wq, nh * hd, d, h);
      k[t] = matvec(wk, nkv * hd, d, h);
      v[t] = matvec(wv, nkv * hd, d, h);
      for (int64_t i = 0; i < nh * hd; ++i) q[t][i] += l.bq ? l.bq[i] : 0.0;
      for (int64_t i = 0; i < nkv * hd; ++i) k[t][i] += l.bk ? l.bk[i] : 0.0;
      for (int64_t i = 0; i < nkv * hd; ++i) v[t][i] += l.bv ? l.bv[i] : 0.0;
      for (int64_t h2 = 0; h2 < nh; ++h2) {
        if (l.q_norm) rms_norm(q[t], h2 * hd, hd, l.q_norm, c.rms_eps);
        rope(q[t], h2 * hd, hd, c.rope_dim, t, c);
      }
      for (int64_t h2 = 0; h2 < nkv; ++h2) {
        if (l.k_norm) rms_norm(k[t], h2 * hd, hd, l.k_norm, c.rms_eps);
        rope(k[t], h2 * hd, hd, c.rope_dim, t, c);
      }
      for (double& x : k[t]) x = kernels::fp16_to_fp32(kernels::fp32_to_fp16(static_cast<float>(x)));
      for (double& x : v[t]) x = kernels::fp16_to_fp32(kernels::fp32_to_fp16(static_cast<float>(x)));
    }
    for (size_t t = 0; t < T; ++t) {
      std::vector<double> attn(nh * hd, 0.0);
      for (int64_t h2 = 0; h2 < nh; ++h2) {
        const int64_t kvh = h2 / (nh / nkv);
        std::vector<double> score(t + 1);
        double mx = -1e300;
        for (size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][h2 * hd + i] * k[s][kvh * hd + i];
          score[s] = dot / std::sqrt(double(hd));
          mx = std::max(mx, score[s]);
        }
        double sum = 0;
        for (double& sc : score) sum += sc = std::exp(sc - mx);
        for (size_t s = 0; s <= t; ++s) {
          for (int64_t i = 0; i < hd; ++i) attn[h2 * hd + i] += score[s] / sum * v[s][kvh * hd + i];
        }
      }
      const auto o = matvec(wo, d, nh * hd, attn);
      for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
      std::vector<double> h = x[t];
      rms_norm(h, 0, d, block.ffn_norm, c.rms_eps);
      auto g = matvec(wg, c.n_ff, d, h);
      const auto u = matvec(wu, c.n_ff, d, h);
      for (int64_t i = 0; i < c.n_ff; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const auto down = matvec(wdn, d, c.n_ff, g);
      for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  const auto out = dequantize_matrix(model.output());
  std::vector<std::vector<double>> logits(T);
  for (size_t t = 0; t < T; ++t) {
    rms_norm(x[t], 0, d, model.output_norm(), c.rms_eps);
    logits[t] = matvec(out, c.n_vocab, d, x[t]);
  }
  return logits;
}

}  // namespace spillway::testing
