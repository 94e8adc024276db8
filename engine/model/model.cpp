#include "engine/model/model.h"

#include <cassert>

#include <fmt/format.h>

#include "engine/model/arch/architecture.h"
#include "engine/model/weight_binder.h"

namespace spillway::engine {

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
  if (c.mask_token_id >= c.n_vocab) {
    return Error{fmt::format("{}: tokenizer.ggml.mask_token_id {} is not below n_vocab {}",
                             m->source_->path(), c.mask_token_id, c.n_vocab)};
  }

  WeightBinder binder(*m->source_, m->owned_vectors_);
  ASSIGN_OR_RETURN(m->token_embd_, binder.matrix("token_embd.weight", c.n_vocab, c.n_embd));
  ASSIGN_OR_RETURN(m->output_norm_, binder.vector_f32("output_norm.weight", c.n_embd, true));
  if (binder.has("output.weight")) {
    ASSIGN_OR_RETURN(m->output_, binder.matrix("output.weight", c.n_vocab, c.n_embd));
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

  const Architecture* arch = find_architecture(c.architecture);
  assert(arch);  // read_model_config accepted it
  m->layers_.reserve(c.n_layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    ASSIGN_OR_RETURN(BlockWeights block, arch->bind_layer(binder, c, i));
    m->layers_.push_back(std::move(block));
  }
  return m;
}

}  // namespace spillway::engine
