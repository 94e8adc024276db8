// A loaded decoder-only model: its config (with a LayerSpec per layer) and views of its
// weights, one BlockWeights per layer, bound by the model's architecture file
// (model/arch/).
//
// Ownership: Model keeps the ModelSource alive (matrices point into its mappings) and
// owns float32 copies of the small 1-D tensors (norm weights, biases), whatever their
// file type. Immutable after load; safe to share between threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"
#include "engine/format/model_source.h"
#include "kernels/kernels.h"

namespace spillway::engine {


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
  const std::vector<BlockWeights>& layers() const { return layers_; }

 private:
  Model() = default;

  std::unique_ptr<ModelSource> source_;
  ModelConfig config_;
  kernels::WeightMatrix token_embd_;
  const float* output_norm_ = nullptr;
  kernels::WeightMatrix output_;
  std::vector<BlockWeights> layers_;
  std::vector<std::unique_ptr<float[]>> owned_vectors_;
};

}  // namespace spillway::engine
