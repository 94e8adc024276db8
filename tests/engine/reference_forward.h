// A deliberately naive double-precision transformer forward for tests: one sequence,
// full recomputation, no KV cache, weights dequantized with kernels::dequantize_row (tested
// against hand-computed blocks). K and V are rounded to fp16 after rope, as the engine's
// F16 KV cache stores them (that rounding is a documented property of the engine, not an
// error to tolerate). It shares no code with engine/forward.cpp,
// so agreement checks the engine's batching, paging, rope layouts, GQA, biases and
// QK-norm against the textbook formulas.
#pragma once

#include <algorithm>
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

// SwiGLU: down(silu(gate h) * up h).
inline std::vector<double> swiglu(const kernels::WeightMatrix& gate, const kernels::WeightMatrix& up,
                                  const kernels::WeightMatrix& down, const std::vector<double>& h) {
  auto g = matvec(dequantize_matrix(gate), gate.rows, gate.cols, h);
  const auto u = matvec(dequantize_matrix(up), up.rows, up.cols, h);
  for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return matvec(dequantize_matrix(down), down.rows, down.cols, g);
}

// The FFN of a layer on its normalized input h: dense SwiGLU, or MoE (softmax router over
// all experts, the spec's top-k with ties to the lower id, renormalised when the spec says,
// times its scale; plus the sigmoid-gated shared expert).
inline std::vector<double> reference_ffn(const engine::LayerSpec& spec, const engine::BlockWeights& block,
                                         const std::vector<double>& h) {
  if (const auto* f = std::get_if<engine::DenseFfnWeights>(&block.ffn)) return swiglu(f->w_gate, f->w_up, f->w_down, h);
  const auto& m = std::get<engine::MoeFfnWeights>(block.ffn);
  std::vector<double> p = matvec(dequantize_matrix(m.router), m.router.rows, m.router.cols, h);
  const double mx = *std::max_element(p.begin(), p.end());
  double z = 0;
  for (double& v : p) z += (v = std::exp(v - mx));
  for (double& v : p) v /= z;
  std::vector<int32_t> order(p.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  double sum = 0;
  for (int32_t j = 0; j < spec.n_expert_used; ++j) sum += p[order[j]];
  std::vector<double> out(h.size(), 0.0);
  for (int32_t j = 0; j < spec.n_expert_used; ++j) {
    const engine::ExpertWeights& e = m.experts[order[j]];
    double w = spec.moe_renormalize ? p[order[j]] / std::max(sum, 6.103515625e-5) : p[order[j]];
    w *= spec.expert_weights_scale;
    const auto y = swiglu(e.gate, e.up, e.down, h);
    for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
  }
  if (m.has_shared()) {
    double gate = 1.0;
    if (m.shared_gate_inp) {
      double dot = 0;
      for (size_t i = 0; i < h.size(); ++i) dot += m.shared_gate_inp[i] * h[i];
      gate = 1.0 / (1.0 + std::exp(-dot));
    }
    const auto y = swiglu(m.shared_gate, m.shared_up, m.shared_down, h);
    for (size_t i = 0; i < out.size(); ++i) out[i] += gate * y[i];
  }
  return out;
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
    const auto wq = dequantize_matrix(l.wq), wk = dequantize_matrix(l.wk), wv = dequantize_matrix(l.wv);
    const auto wo = dequantize_matrix(l.wo);
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
      const auto down = reference_ffn(c.layers[&block - model.layers().data()], block, h);
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
