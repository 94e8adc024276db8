// A read-only memory mapping of a whole file (model weights are read through it).
//
// Ownership: the mapping lives as long as the MappedFile; pointers into data() are
// invalid after it is destroyed. Immutable after open: safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace spillway::engine {

class MappedFile {
 public:
  // Errors name the path and the OS reason. An empty file maps to size() == 0.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace spillway::engine
