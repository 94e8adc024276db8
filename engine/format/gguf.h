// GGUF (llama.cpp's model format), versions 2 and 3, read through mmap.
//
// Layout: magic "GGUF", version, tensor count, key/value count, the key/values, the tensor
// infos (name, dims, type, offset), then the tensor data at the next multiple of
// general.alignment (default 32). Every length and offset read from the file is checked
// against the file size before use; a bad file is an Error naming the file and the key or
// tensor, never a crash.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "engine/format/model_source.h"

namespace spillway::engine {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
constexpr uint64_t kGgufDefaultAlignment = 32;
// general.alignment must be a power of two no larger than this (the reader rejects others).
constexpr uint64_t kGgufMaxAlignment = 1 << 20;

// GGUF metadata value types (gguf_type).
enum class GgufValueType : uint32_t {
  Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12,
};

Result<std::unique_ptr<ModelSource>> open_gguf(const std::string& path);

}  // namespace spillway::engine
