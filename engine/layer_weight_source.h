// Where the forward pass gets each layer's weights during a step.
//
// The forward calls acquire_layer(l) before layer l and release_layer(l) after it, in layer
// order, every step. A source whose layers are all in memory returns them at once (no
// locks, no waiting); a streaming source (engine/weight_residency.h) may block in
// acquire_layer until the layer's bytes are loaded.
//
// Thread contract: called only from the thread that runs the forward (the engine thread).
#pragma once

#include <cstdint>

#include "common/result.h"
#include "engine/model.h"

namespace spillway::engine {

class LayerWeightSource {
 public:
  virtual ~LayerWeightSource() = default;
  // Valid until release_layer(layer). An Error when a streamed layer could not be read.
  virtual Result<const LayerWeights*> acquire_layer(int32_t layer) = 0;
  virtual void release_layer(int32_t layer) = 0;
  virtual const kernels::WeightMatrix& token_embedding() const = 0;
  virtual const kernels::WeightMatrix& output() const = 0;
};

// The model's weights as mapped from its file: every layer always available.
class MappedWeights final : public LayerWeightSource {
 public:
  explicit MappedWeights(const Model& model) : model_(model) {}
  Result<const LayerWeights*> acquire_layer(int32_t layer) override {
    return &model_.layers()[layer];
  }
  void release_layer(int32_t) override {}
  const kernels::WeightMatrix& token_embedding() const override { return model_.token_embedding(); }
  const kernels::WeightMatrix& output() const override { return model_.output(); }

 private:
  const Model& model_;
};

}  // namespace spillway::engine
