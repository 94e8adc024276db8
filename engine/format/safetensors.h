// One safetensors file, read through mmap.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {...}, "<name>": {"dtype": "F32", "shape": [d0, d1, ...],
//                                      "data_offsets": [begin, end]}, ...}
// then the byte buffer; begin/end are relative to the buffer, the shape is row-major (the
// last dimension is contiguous). Every tensor's byte range is checked against the file
// size, its shape and dtype, and against the other tensors (no overlap); a bad file is an
// Error naming the file and the tensor, never a crash.
//
// Ownership: a SafetensorsFile owns its mapping; SafetensorsTensor::data points into it.
// Immutable after open: safe to read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/platform/mapped_file.h"

namespace spillway::engine {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;              // as written: "F32", "F16", "BF16", "I64", "F8_E4M3", ...
  std::vector<int64_t> shape;     // as written (row-major); may be empty (a scalar)
  const uint8_t* data = nullptr;  // n_bytes of mapped data
  uint64_t n_bytes = 0;
  uint64_t file_offset = 0;       // absolute byte offset of data in the file
};

// Bytes per element of a safetensors dtype; nullopt for a dtype this reader does not know.
std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype);

class SafetensorsFile {
 public:
  // Headers larger than this are rejected as corrupt (as the reference implementation).
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // Sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::vector<SafetensorsTensor> tensors_;
};

}  // namespace spillway::engine
