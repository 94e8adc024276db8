#include "engine/model/weight_binder.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/format/hf_tensor_names.h"

namespace spillway::engine {

std::string WeightBinder::quoted(const std::string& name) const {
  auto format = source_.metadata().get_string("spillway.source_format");
  if (!format.ok() || format->value_or("") != "huggingface") return fmt::format("'{}'", name);
  const std::string hf = hf_tensor_name(name);
  return hf.empty() ? fmt::format("'{}'", name) : fmt::format("'{}' (Hugging Face '{}')", name, hf);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Result<const TensorInfo*> WeightBinder::require(const std::string& name,
                                                const std::vector<int64_t>& shape) const {
  const TensorInfo* t = source_.find_tensor(name);
  if (!t) return Error{fmt::format("{}: missing tensor {}", source_.path(), quoted(name))};
  if (t->shape != shape) {
    return Error{fmt::format("{}: tensor {} has shape {}, expected {}", source_.path(), quoted(name),
                             shape_string(t->shape), shape_string(shape))};
  }
  return t;
}

Result<kernels::WeightMatrix> WeightBinder::matrix(const std::string& name, int64_t rows,
                                                   int64_t cols) const {
  auto t = require(name, {cols, rows});
  if (!t) return t.error();
  const TensorInfo& info = **t;
  if (info.transform != ValueTransform::None) {
    return Error{fmt::format("{}: tensor '{}' is read as a matrix but its stored values need a transform",
                             source_.path(), name)};
  }
  if (cols % kernels::block_elems(info.type) != 0) {
    return Error{fmt::format("{}: tensor '{}' rows of {} are not a multiple of the {} block",
                             source_.path(), name, cols, kernels::dtype_name(info.type))};
  }
  return kernels::WeightMatrix{info.type, info.data, rows, cols};
}

Result<const float*> WeightBinder::vector_f32(const std::string& name, int64_t n, bool required) {
  const TensorInfo* t = source_.find_tensor(name);
  if (!t) {
    if (!required) return static_cast<const float*>(nullptr);
    return Error{fmt::format("{}: missing tensor {}", source_.path(), quoted(name))};
  }
  if (t->n_elements() != n) {
    return Error{fmt::format("{}: tensor {} has shape {}, expected [{}]", source_.path(), quoted(name),
                             shape_string(t->shape), n)};
  }
  auto copy = std::make_unique<float[]>(n);
  kernels::dequantize_row(t->type, t->data, copy.get(), n);
  if (t->transform == ValueTransform::AddOne) {
    for (int64_t i = 0; i < n; ++i) copy[i] += 1.0f;
  } else if (t->transform == ValueTransform::NegExp) {
    for (int64_t i = 0; i < n; ++i) copy[i] = -std::exp(copy[i]);
  }
  owned_.push_back(std::move(copy));
  return owned_.back().get();
}

}  // namespace spillway::engine
