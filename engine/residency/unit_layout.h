// Where a residency unit's matrices come from in the model's files and where they land in
// its buffer: shared by the layer units (weight_residency.h) and the expert units
// (expert_cache.h).
//
// A bound matrix points into the file mapping: at a whole tensor, or at a slice of one (a
// routed expert of a 3-D expert tensor). TensorLocator finds the tensor holding it and
// describes the matrix's bytes as a tensor of their own (same file, offset inside it).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/result.h"
#include "engine/model/model.h"
#include "engine/residency/weight_streamer.h"

namespace spillway::engine {

class TensorLocator {
 public:
  explicit TensorLocator(const Model& model);
  // The tensor (or slice of one) holding exactly the matrix's bytes; valid while the
  // locator lives. An Error naming the model when the matrix points elsewhere.
  Result<const TensorInfo*> locate(const kernels::WeightMatrix& m);

 private:
  const Model& model_;
  std::vector<const TensorInfo*> by_address_;  // sorted by data pointer
  std::deque<TensorInfo> slices_;
};

// Groups tensors into the file ranges of one unit (ranges closer than `gap` merged), fills
// unit.ranges and unit.buffer_bytes, and returns, per tensor in input order, where its first
// byte lands in the unit's buffer.
std::vector<uint64_t> build_stream_unit(const std::vector<const TensorInfo*>& tensors, uint64_t gap,
                                        StreamUnit& unit);

}  // namespace spillway::engine
