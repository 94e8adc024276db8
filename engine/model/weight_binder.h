// Looks up a model's tensors by name for an architecture file and checks each against the
// shape the architecture expects. Every error names the model file and the tensor.
//
// Ownership: matrices returned point into the source's mapping (the source outlives the
// Model); 1-D tensors are copied to float32 into `owned` (the Model's), whatever their file
// type, so the forward reads norms and biases in one format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/format/model_source.h"
#include "kernels/kernels.h"

namespace spillway::engine {

class WeightBinder {
 public:
  WeightBinder(const ModelSource& source, std::vector<std::unique_ptr<float[]>>& owned)
      : source_(source), owned_(owned) {}

  bool has(const std::string& name) const { return source_.find_tensor(name) != nullptr; }
  // A [rows, cols] matrix (GGUF shape [cols, rows]); cols a multiple of its type's block.
  Result<kernels::WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) const;
  // An n-element vector as float32, after the tensor's ValueTransform; nullptr when absent and
  // not required.
  Result<const float*> vector_f32(const std::string& name, int64_t n, bool required);
  // The tensor, checked against `shape` (GGUF order).
  Result<const TensorInfo*> require(const std::string& name, const std::vector<int64_t>& shape) const;

  const ModelSource& source() const { return source_; }

 private:
  // 'name' for error messages, with the Hugging Face name it comes from for an HF folder.
  std::string quoted(const std::string& name) const;

  const ModelSource& source_;
  std::vector<std::unique_ptr<float[]>>& owned_;
};

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace spillway::engine
