#include "engine/residency/unit_layout.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

namespace spillway::engine {

namespace {
constexpr uint64_t kA = DirectReader::kAlignment;
uint64_t align_up(uint64_t x) { return (x + kA - 1) / kA * kA; }
}  // namespace

TensorLocator::TensorLocator(const Model& model) : model_(model) {
  for (const TensorInfo& t : model.source().tensors()) by_address_.push_back(&t);
  std::sort(by_address_.begin(), by_address_.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::less<const void*>()(a->data, b->data);
  });
}

Result<const TensorInfo*> TensorLocator::locate(const kernels::WeightMatrix& m) {
  const auto* p = static_cast<const uint8_t*>(m.data);
  auto it = std::upper_bound(by_address_.begin(), by_address_.end(), p, [](const uint8_t* x, const TensorInfo* t) {
    return std::less<const void*>()(x, t->data);
  });
  const auto bytes = static_cast<uint64_t>(kernels::row_bytes(m.type, m.cols) * m.rows);
  if (it != by_address_.begin()) {
    const TensorInfo* t = *(it - 1);
    const auto offset = static_cast<uint64_t>(p - static_cast<const uint8_t*>(t->data));
    if (offset == 0 && bytes == t->n_bytes) return t;
    if (offset + bytes <= t->n_bytes) {
      TensorInfo& s = slices_.emplace_back();
      s.name = t->name;
      s.type = t->type;
      s.shape = {m.cols, m.rows};
      s.data = p;
      s.n_bytes = bytes;
      s.file_index = t->file_index;
      s.file_offset = t->file_offset + offset;
      return &s;
    }
  }
  return Error{fmt::format("{}: a weight matrix does not point at a tensor of the file", model_.source().path())};
}

std::vector<uint64_t> build_stream_unit(const std::vector<const TensorInfo*>& tensors, uint64_t gap,
                                        StreamUnit& unit) {
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TensorInfo& x = *tensors[a];
    const TensorInfo& y = *tensors[b];
    return x.file_index != y.file_index ? x.file_index < y.file_index : x.file_offset < y.file_offset;
  });
  std::vector<size_t> range_of(tensors.size());
  for (size_t i : order) {
    const TensorInfo& t = *tensors[i];
    if (!unit.ranges.empty()) {
      UnitRange& r = unit.ranges.back();
      if (r.file_index == t.file_index && t.file_offset <= r.file_offset + r.bytes + gap) {
        r.bytes = std::max(r.file_offset + r.bytes, t.file_offset + t.n_bytes) - r.file_offset;
        range_of[i] = unit.ranges.size() - 1;
        continue;
      }
    }
    unit.ranges.push_back({t.file_index, t.file_offset, t.n_bytes, 0});
    range_of[i] = unit.ranges.size() - 1;
  }
  uint64_t cursor = 0;
  for (UnitRange& r : unit.ranges) {
    r.buffer_offset = cursor;
    cursor += align_up(DirectReader::span_bytes(r.file_offset, r.bytes));
  }
  unit.buffer_bytes = cursor;
  std::vector<uint64_t> offsets(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const UnitRange& r = unit.ranges[range_of[i]];
    offsets[i] = r.buffer_offset + r.file_offset % kA + (tensors[i]->file_offset - r.file_offset);
  }
  return offsets;
}

}  // namespace spillway::engine
