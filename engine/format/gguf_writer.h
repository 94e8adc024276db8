// Writes GGUF v3 files: demo models, test fixtures, and (later) converted models.
//
// Keys and tensors are written in the order they were added. Tensor data is aligned to
// general.alignment: 32 unless the key is set (through an integer setter) to another power
// of two up to kGgufMaxAlignment; any other value is written as given (tests use that to
// make invalid files) and the data stays 32-aligned. Keys are not deduplicated. Holds everything
// in memory until write(); meant for small and medium models (the demo models), not for
// streaming conversions of huge ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/format/gguf.h"
#include "kernels/dtype.h"

namespace spillway::engine {

class GgufWriter {
 public:
  void set_uint8(const std::string& key, uint8_t v) { scalar(key, GgufValueType::Uint8, &v, 1); }
  void set_int8(const std::string& key, int8_t v) { scalar(key, GgufValueType::Int8, &v, 1); }
  void set_uint16(const std::string& key, uint16_t v) { scalar(key, GgufValueType::Uint16, &v, 2); }
  void set_int16(const std::string& key, int16_t v) { scalar(key, GgufValueType::Int16, &v, 2); }
  void set_uint32(const std::string& key, uint32_t v) { scalar(key, GgufValueType::Uint32, &v, 4); }
  void set_int32(const std::string& key, int32_t v) { scalar(key, GgufValueType::Int32, &v, 4); }
  void set_uint64(const std::string& key, uint64_t v) { scalar(key, GgufValueType::Uint64, &v, 8); }
  void set_int64(const std::string& key, int64_t v) { scalar(key, GgufValueType::Int64, &v, 8); }
  void set_float32(const std::string& key, float v) { scalar(key, GgufValueType::Float32, &v, 4); }
  void set_float64(const std::string& key, double v) { scalar(key, GgufValueType::Float64, &v, 8); }
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_float32_array(const std::string& key, const std::vector<float>& v);
  void set_int32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_bool_array(const std::string& key, const std::vector<bool>& v);
  // An array of a fixed-size element type (any integer or float GgufValueType; T must have
  // that type's size), e.g. set_array<uint64_t>(key, GgufValueType::Uint64, {...}).
  template <class T>
  void set_array(const std::string& key, GgufValueType elem_type, const std::vector<T>& v) {
    array(key, elem_type, v.data(), sizeof(T), v.size());
  }

  // shape in GGUF order (shape[0] is the row length); bytes must hold exactly the tensor.
  void add_tensor(const std::string& name, kernels::DType type, std::vector<int64_t> shape,
                  std::vector<uint8_t> bytes);

  // The whole file as bytes (tests corrupt it to check the reader).
  std::vector<uint8_t> serialize() const;
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    kernels::DType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> header() const;  // up to the (aligned) start of the tensor data
  void scalar(const std::string& key, GgufValueType type, const void* v, size_t n);
  void array(const std::string& key, GgufValueType elem_type, const void* elems, size_t elem_size,
             size_t count);
  void begin_key(const std::string& key, GgufValueType type);
  void begin_array(const std::string& key, GgufValueType elem_type, uint64_t count);

  std::vector<uint8_t> kv_;  // serialized key/values
  uint64_t n_kv_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  std::vector<Tensor> tensors_;
};

}  // namespace spillway::engine
