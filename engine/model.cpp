#include "engine/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace spillway::engine {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

Result<const TensorInfo*> Model::require(const std::string& name,
                                         std::vector<int64_t> shape) const {
  const TensorInfo* t = source_->find_tensor(name);
  if (!t) return Error{fmt::format("{}: missing tensor '{}'", source_->path(), name)};
  if (t->shape != shape) {
    return Error{fmt::format("{}: tensor '{}' has shape {}, expected {}", source_->path(), name,
                             shape_string(t->shape), shape_string(shape))};
  }
  return t;
}

Result<kernels::WeightMatrix> Model::matrix(const std::string& name, int64_t rows,
                                            int64_t cols) const {
  auto t = require(name, {cols, rows});
  if (!t) return t.error();
  const TensorInfo& info = **t;
  if (cols % kernels::block_elems(info.type) != 0) {
    return Error{fmt::format("{}: tensor '{}' rows of {} are not a multiple of the {} block",
                             source_->path(), name, cols, kernels::dtype_name(info.type))};
  }
  return kernels::WeightMatrix{info.type, info.data, rows, cols};
}

Result<const float*> Model::vector_f32(const std::string& name, int64_t n, bool required) {
  const TensorInfo* t = source_->find_tensor(name);
  if (!t) {
    if (!required) return static_cast<const float*>(nullptr);
    return Error{fmt::format("{}: missing tensor '{}'", source_->path(), name)};
  }
  if (t->n_elements() != n) {
    return Error{fmt::format("{}: tensor '{}' has shape {}, expected [{}]", source_->path(),
                             name, shape_string(t->shape), n)};
  }
  auto copy = std::make_unique<float[]>(n);
  kernels::dequantize_row(t->type, t->data, copy.get(), n);
  owned_vectors_.push_back(std::move(copy));
  return owned_vectors_.back().get();
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path) {
  auto source = open_model_source(path);
  if (!source) return source.error();
  return load(std::move(*source));
}

Result<std::unique_ptr<Model>> Model::load(std::unique_ptr<ModelSource> source) {
  std::unique_ptr<Model> m(new Model());
  m->source_ = std::move(source);
  auto config = read_model_config(*m->source_);
  if (!config) return config.error();
  m->config_ = std::move(*config);
  ModelConfig& c = m->config_;

  const TensorInfo* embd = m->source_->find_tensor("token_embd.weight");
  if (!embd) return Error{fmt::format("{}: missing tensor 'token_embd.weight'", m->source_->path())};
  if (embd->shape.size() != 2 || embd->shape[0] != c.n_embd || embd->shape[1] <= 0 ||
      embd->shape[1] > (int64_t{1} << 24)) {
    return Error{fmt::format("{}: tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]",
                             m->source_->path(), shape_string(embd->shape), c.n_embd)};
  }
  c.n_vocab = static_cast<int32_t>(embd->shape[1]);

#define SPILLWAY_BIND(lhs, expr) \
  {                              \
    auto r = (expr);             \
    if (!r) return r.error();    \
    lhs = *r;                    \
  }
  SPILLWAY_BIND(m->token_embd_, m->matrix("token_embd.weight", c.n_vocab, c.n_embd))
  SPILLWAY_BIND(m->output_norm_, m->vector_f32("output_norm.weight", c.n_embd, true))
  if (m->source_->find_tensor("output.weight")) {
    SPILLWAY_BIND(m->output_, m->matrix("output.weight", c.n_vocab, c.n_embd))
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  if (const TensorInfo* ff = m->source_->find_tensor("rope_freqs.weight")) {
    if (ff->n_elements() != c.rope_dim / 2) {
      return Error{fmt::format("{}: tensor 'rope_freqs.weight' has {} elements, expected {}",
                               m->source_->path(), ff->n_elements(), c.rope_dim / 2)};
    }
    c.rope_freq_factors.resize(c.rope_dim / 2);
    kernels::dequantize_row(ff->type, ff->data, c.rope_freq_factors.data(), c.rope_dim / 2);
  }

  m->layers_.resize(c.n_layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = m->layers_[i];
    const std::string p = fmt::format("blk.{}.", i);
    SPILLWAY_BIND(l.attn_norm, m->vector_f32(p + "attn_norm.weight", c.n_embd, true))
    SPILLWAY_BIND(l.wq, m->matrix(p + "attn_q.weight", c.q_dim(), c.n_embd))
    SPILLWAY_BIND(l.wk, m->matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd))
    SPILLWAY_BIND(l.wv, m->matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd))
    SPILLWAY_BIND(l.wo, m->matrix(p + "attn_output.weight", c.n_embd, c.q_dim()))
    const bool bias = c.traits.qkv_bias;
    SPILLWAY_BIND(l.bq, m->vector_f32(p + "attn_q.bias", c.q_dim(), bias))
    SPILLWAY_BIND(l.bk, m->vector_f32(p + "attn_k.bias", c.kv_dim(), bias))
    SPILLWAY_BIND(l.bv, m->vector_f32(p + "attn_v.bias", c.kv_dim(), bias))
    if (c.traits.qk_norm) {
      SPILLWAY_BIND(l.q_norm, m->vector_f32(p + "attn_q_norm.weight", c.head_dim, true))
      SPILLWAY_BIND(l.k_norm, m->vector_f32(p + "attn_k_norm.weight", c.head_dim, true))
    }
    SPILLWAY_BIND(l.ffn_norm, m->vector_f32(p + "ffn_norm.weight", c.n_embd, true))
    SPILLWAY_BIND(l.w_gate, m->matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd))
    SPILLWAY_BIND(l.w_up, m->matrix(p + "ffn_up.weight", c.n_ff, c.n_embd))
    SPILLWAY_BIND(l.w_down, m->matrix(p + "ffn_down.weight", c.n_embd, c.n_ff))
  }
#undef SPILLWAY_BIND
  return m;
}

}  // namespace spillway::engine
