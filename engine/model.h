// A loaded decoder-only transformer: its config and views of its weights.
//
// Ownership: Model keeps the ModelSource alive (matrices point into its mappings) and
// owns float32 copies of the small 1-D tensors (norm weights, biases), whatever their
// file type. Immutable after load; safe to share between threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model_config.h"
#include "engine/model_source.h"
#include "kernels/kernels.h"

namespace spillway::engine {

struct LayerWeights {
  const float* attn_norm = nullptr;   // [n_embd]
  kernels::WeightMatrix wq, wk, wv;   // [q_dim|kv_dim rows, n_embd cols]
  const float* bq = nullptr;          // [q_dim]  (qkv_bias only)
  const float* bk = nullptr;          // [kv_dim]
  const float* bv = nullptr;          // [kv_dim]
  const float* q_norm = nullptr;      // [head_dim] (qk_norm only)
  const float* k_norm = nullptr;      // [head_dim]
  kernels::WeightMatrix wo;           // [n_embd rows, q_dim cols]
  const float* ffn_norm = nullptr;    // [n_embd]
  kernels::WeightMatrix w_gate, w_up; // [n_ff rows, n_embd cols]
  kernels::WeightMatrix w_down;       // [n_embd rows, n_ff cols]
};

class Model {
 public:
  // Binds every tensor the architecture needs and checks its type and shape; an error
  // names the model path and the tensor.
  static Result<std::unique_ptr<Model>> load(std::unique_ptr<ModelSource> source);
  // open_model_source + load.
  static Result<std::unique_ptr<Model>> open(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const ModelSource& source() const { return *source_; }
  const kernels::WeightMatrix& token_embedding() const { return token_embd_; }
  const float* output_norm() const { return output_norm_; }
  const kernels::WeightMatrix& output() const { return output_; }  // tied: == token_embedding
  const std::vector<LayerWeights>& layers() const { return layers_; }

 private:
  Model() = default;
  Result<const TensorInfo*> require(const std::string& name, std::vector<int64_t> shape) const;
  Result<kernels::WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) const;
  Result<const float*> vector_f32(const std::string& name, int64_t n, bool required);

  std::unique_ptr<ModelSource> source_;
  ModelConfig config_;
  kernels::WeightMatrix token_embd_;
  const float* output_norm_ = nullptr;
  kernels::WeightMatrix output_;
  std::vector<LayerWeights> layers_;
  std::vector<std::unique_ptr<float[]>> owned_vectors_;
};

}  // namespace spillway::engine
