#include "engine/format/gguf_writer.h"

#include <cassert>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace spillway::engine {

namespace {

// Appends n bytes from p (which must not point into out). Grown with resize and memcpy,
// not vector::insert: GCC 12 at -O3 reports a false -Wstringop-overflow (and -Warray-bounds)
// in insert's reallocation path when it is inlined into header().
void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;  // p may be null (an empty vector's data())
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
uint64_t padded(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  put(out, &v, sizeof(T));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  put(out, s.data(), s.size());
}

}  // namespace

void GgufWriter::begin_key(const std::string& key, GgufValueType type) {
  put_string(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(type));
  ++n_kv_;
}

void GgufWriter::begin_array(const std::string& key, GgufValueType elem_type, uint64_t count) {
  begin_key(key, GgufValueType::Array);
  put<uint32_t>(kv_, static_cast<uint32_t>(elem_type));
  put<uint64_t>(kv_, count);
}

void GgufWriter::scalar(const std::string& key, GgufValueType type, const void* v, size_t n) {
  begin_key(key, type);
  put(kv_, v, n);
  if (key == "general.alignment" && type != GgufValueType::Float32 &&
      type != GgufValueType::Float64 && type != GgufValueType::Bool) {
    uint64_t value = 0;
    std::memcpy(&value, v, n);  // little-endian host, as the file format
    const bool is_signed = type == GgufValueType::Int8 || type == GgufValueType::Int16 ||
                           type == GgufValueType::Int32 || type == GgufValueType::Int64;
    const bool negative = is_signed && (value >> (8 * n - 1)) != 0;
    if (!negative && value != 0 && value <= kGgufMaxAlignment && (value & (value - 1)) == 0) {
      alignment_ = value;
    }
  }
}

void GgufWriter::array(const std::string& key, GgufValueType elem_type, const void* elems,
                       size_t elem_size, size_t count) {
  begin_array(key, elem_type, count);
  put(kv_, elems, elem_size * count);
}

void GgufWriter::set_bool(const std::string& key, bool v) {
  const uint8_t b = v ? 1 : 0;
  scalar(key, GgufValueType::Bool, &b, 1);
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  begin_key(key, GgufValueType::String);
  put_string(kv_, v);
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  begin_array(key, GgufValueType::String, v.size());
  for (const auto& s : v) put_string(kv_, s);
}

void GgufWriter::set_float32_array(const std::string& key, const std::vector<float>& v) {
  begin_array(key, GgufValueType::Float32, v.size());
  put(kv_, v.data(), v.size() * sizeof(float));
}

void GgufWriter::set_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  begin_array(key, GgufValueType::Int32, v.size());
  put(kv_, v.data(), v.size() * sizeof(int32_t));
}

void GgufWriter::set_bool_array(const std::string& key, const std::vector<bool>& v) {
  begin_array(key, GgufValueType::Bool, v.size());
  for (bool b : v) put<uint8_t>(kv_, b ? 1 : 0);
}

void GgufWriter::add_tensor(const std::string& name, kernels::DType type,
                            std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  tensors_.push_back({name, type, std::move(shape), std::move(bytes)});
}

std::vector<uint8_t> GgufWriter::header() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kGgufMagic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, n_kv_);
  put(out, kv_.data(), kv_.size());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += padded(t.bytes.size(), alignment_);
  }
  out.resize(padded(out.size(), alignment_), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::serialize() const {
  std::vector<uint8_t> out = header();
  for (const Tensor& t : tensors_) {
    put(out, t.bytes.data(), t.bytes.size());
    out.resize(padded(out.size(), alignment_), 0);
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Error{fmt::format("{}: cannot open for writing", path)};
  const std::vector<uint8_t> head = header();
  f.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  const std::vector<char> zeros(alignment_, 0);
  for (const Tensor& t : tensors_) {
    f.write(reinterpret_cast<const char*>(t.bytes.data()),
            static_cast<std::streamsize>(t.bytes.size()));
    f.write(zeros.data(),
            static_cast<std::streamsize>(padded(t.bytes.size(), alignment_) - t.bytes.size()));
  }
  f.close();
  if (!f) return Error{fmt::format("{}: write failed (disk full?)", path)};
  return {};
}

}  // namespace spillway::engine
