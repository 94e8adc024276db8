#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/format/gguf.h"
#include "engine/platform/mapped_file.h"
#include "kernels/dtype.h"

namespace spillway::engine {

namespace {

constexpr uint32_t kMaxDims = 4;          // GGML_MAX_DIMS
// Counts read from the file are bounded by the bytes left, but a container of them can still
// be several times the file size; reserve at most this many up front and grow as they parse.
constexpr uint64_t kMaxReserve = 1 << 16;

// Bounds-checked little-endian reads from the mapped bytes. `what` names what is being
// read for the error message.
class Cursor {
 public:
  Cursor(const MappedFile& f) : path_(f.path()), data_(f.data()), size_(f.size()) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <class T>
  Result<T> read(std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    auto len = read<uint64_t>(what);
    if (!len) return len.error();
    if (*len > remaining()) return truncated(what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), *len);
    pos_ += *len;
    return s;
  }

  Status skip(uint64_t n, std::string_view what) {
    if (n > remaining()) return truncated(what);
    pos_ += n;
    return {};
  }

  Error truncated(std::string_view what) const {
    return Error{fmt::format("{}: truncated GGUF file (at byte {} of {}, reading {})", path_, pos_,
                             size_, what)};
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::Uint8:
    case GgufValueType::Int8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::Uint16:
    case GgufValueType::Int16: return 2;
    case GgufValueType::Uint32:
    case GgufValueType::Int32:
    case GgufValueType::Float32: return 4;
    case GgufValueType::Uint64:
    case GgufValueType::Int64:
    case GgufValueType::Float64: return 8;
    case GgufValueType::String: return 8;  // at least its length prefix
    case GgufValueType::Array: return 12;  // at least its type and count
  }
  return 0;
}

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::Uint8:
    case GgufValueType::Int8:
    case GgufValueType::Uint16:
    case GgufValueType::Int16:
    case GgufValueType::Uint32:
    case GgufValueType::Int32:
    case GgufValueType::Uint64:
    case GgufValueType::Int64: return true;
    default: return false;
  }
}

// Reads one integer of type t as int64 (uint64 values above INT64_MAX are an error).
Result<int64_t> read_integer(Cursor& c, GgufValueType t, const std::string& key,
                             const std::string& path) {
  auto widen = [](auto r) -> Result<int64_t> {
    if (!r) return r.error();
    return static_cast<int64_t>(*r);
  };
  switch (t) {
    case GgufValueType::Uint8: return widen(c.read<uint8_t>(key));
    case GgufValueType::Int8: return widen(c.read<int8_t>(key));
    case GgufValueType::Uint16: return widen(c.read<uint16_t>(key));
    case GgufValueType::Int16: return widen(c.read<int16_t>(key));
    case GgufValueType::Uint32: return widen(c.read<uint32_t>(key));
    case GgufValueType::Int32: return widen(c.read<int32_t>(key));
    case GgufValueType::Int64: return widen(c.read<int64_t>(key));
    case GgufValueType::Uint64: {
      auto v = c.read<uint64_t>(key);
      if (!v) return v.error();
      if (*v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error{fmt::format("{}: metadata '{}' value {} is out of range", path, key, *v)};
      }
      return static_cast<int64_t>(*v);
    }
    default: break;
  }
  return Error{fmt::format("{}: metadata '{}' is not an integer", path, key)};
}

Result<GgufValueType> read_value_type(Cursor& c, const std::string& key, const std::string& path) {
  auto raw = c.read<uint32_t>(key);
  if (!raw) return raw.error();
  if (*raw > static_cast<uint32_t>(GgufValueType::Float64)) {
    return Error{fmt::format("{}: metadata '{}' has unknown value type {}", path, key, *raw)};
  }
  return static_cast<GgufValueType>(*raw);
}

Result<MetaArray> read_array(Cursor& c, const std::string& key, const std::string& path) {
  auto elem_type = read_value_type(c, key, path);
  if (!elem_type) return elem_type.error();
  auto count = c.read<uint64_t>(key);
  if (!count) return count.error();
  // Every element takes at least scalar_size bytes: rejects absurd counts before allocating.
  if (*count > c.remaining() / scalar_size(*elem_type)) return c.truncated(key);

  MetaArray a;
  const GgufValueType t = *elem_type;
  if (is_integer(t)) {
    a.kind = MetaArray::Kind::Int;
    a.ints.reserve(std::min(*count, kMaxReserve));
    for (uint64_t i = 0; i < *count; ++i) {
      auto v = read_integer(c, t, key, path);
      if (!v) return v.error();
      a.ints.push_back(*v);
    }
  } else if (t == GgufValueType::Float32 || t == GgufValueType::Float64) {
    a.kind = MetaArray::Kind::Float;
    a.floats.reserve(std::min(*count, kMaxReserve));
    for (uint64_t i = 0; i < *count; ++i) {
      if (t == GgufValueType::Float32) {
        auto v = c.read<float>(key);
        if (!v) return v.error();
        a.floats.push_back(*v);
      } else {
        auto v = c.read<double>(key);
        if (!v) return v.error();
        a.floats.push_back(*v);
      }
    }
  } else if (t == GgufValueType::Bool) {
    a.kind = MetaArray::Kind::Bool;
    a.bools.reserve(std::min(*count, kMaxReserve));
    for (uint64_t i = 0; i < *count; ++i) {
      auto v = c.read<uint8_t>(key);
      if (!v) return v.error();
      a.bools.push_back(*v != 0);
    }
  } else if (t == GgufValueType::String) {
    a.kind = MetaArray::Kind::String;
    a.strings.reserve(std::min(*count, kMaxReserve));
    for (uint64_t i = 0; i < *count; ++i) {
      auto v = c.read_string(key);
      if (!v) return v.error();
      a.strings.push_back(std::move(*v));
    }
  } else {
    return Error{fmt::format("{}: metadata '{}' is an array of arrays, which is not supported",
                             path, key)};
  }
  return a;
}

Result<MetaValue> read_value(Cursor& c, GgufValueType t, const std::string& key,
                             const std::string& path) {
  if (is_integer(t)) {
    auto v = read_integer(c, t, key, path);
    if (!v) return v.error();
    return MetaValue(*v);
  }
  switch (t) {
    case GgufValueType::Float32: {
      auto v = c.read<float>(key);
      if (!v) return v.error();
      return MetaValue(static_cast<double>(*v));
    }
    case GgufValueType::Float64: {
      auto v = c.read<double>(key);
      if (!v) return v.error();
      return MetaValue(*v);
    }
    case GgufValueType::Bool: {
      auto v = c.read<uint8_t>(key);
      if (!v) return v.error();
      return MetaValue(*v != 0);
    }
    case GgufValueType::String: {
      auto v = c.read_string(key);
      if (!v) return v.error();
      return MetaValue(std::move(*v));
    }
    case GgufValueType::Array: {
      auto v = read_array(c, key, path);
      if (!v) return v.error();
      return MetaValue(std::move(*v));
    }
    default: break;
  }
  return Error{fmt::format("{}: metadata '{}' has unknown value type", path, key)};
}

Result<TensorInfo> read_tensor_info(Cursor& c, uint64_t index, const std::string& path) {
  const std::string what = fmt::format("tensor info #{}", index);
  auto name = c.read_string(what);
  if (!name) return name.error();
  TensorInfo t;
  t.name = std::move(*name);
  auto n_dims = c.read<uint32_t>(t.name);
  if (!n_dims) return n_dims.error();
  if (*n_dims == 0 || *n_dims > kMaxDims) {
    return Error{fmt::format("{}: tensor '{}' has {} dimensions (1 to {} supported)", path, t.name,
                             *n_dims, kMaxDims)};
  }
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < *n_dims; ++d) {
    auto dim = c.read<uint64_t>(t.name);
    if (!dim) return dim.error();
    if (*dim == 0 || *dim > (uint64_t{1} << 40) ||
        n_elements > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(*dim)) {
      return Error{fmt::format("{}: tensor '{}' has an invalid dimension {}", path, t.name, *dim)};
    }
    t.shape.push_back(static_cast<int64_t>(*dim));
    n_elements *= static_cast<int64_t>(*dim);
  }
  auto type = c.read<uint32_t>(t.name);
  if (!type) return type.error();
  if (!kernels::is_supported(*type)) {
    return Error{fmt::format("{}: tensor '{}' has type {}, which is not supported (supported: "
                             "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
                             "Q5_K, Q6_K)",
                             path, t.name, *type)};
  }
  t.type = static_cast<kernels::DType>(*type);
  const int64_t block = kernels::block_elems(t.type);
  if (t.shape[0] % block != 0) {
    return Error{fmt::format("{}: tensor '{}' rows of {} elements are not a multiple of the {} "
                             "block ({})",
                             path, t.name, t.shape[0], kernels::dtype_name(t.type), block)};
  }
  if (n_elements / block > std::numeric_limits<int64_t>::max() / kernels::block_bytes(t.type)) {
    return Error{fmt::format("{}: tensor '{}' is too large ({} elements of {})", path, t.name,
                             n_elements, kernels::dtype_name(t.type))};
  }
  t.n_bytes = static_cast<uint64_t>(n_elements / block * kernels::block_bytes(t.type));
  auto offset = c.read<uint64_t>(t.name);
  if (!offset) return offset.error();
  t.file_offset = *offset;  // relative to the data section until the caller rebases it
  return t;
}

}  // namespace

Result<std::unique_ptr<ModelSource>> open_gguf(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  ModelSource::Contents src;
  src.path = path;
  src.files = {path};
  std::shared_ptr<const MappedFile> mapping = std::move(*file);
  src.storage = mapping;
  src.metadata.set_source_name(path);
  const MappedFile& f = *mapping;
  Cursor c(f);

  auto magic = c.read<uint32_t>("the magic number");
  if (!magic) return magic.error();
  if (*magic != kGgufMagic) {
    return Error{fmt::format("{}: not a GGUF file (bad magic number 0x{:08x})", path, *magic)};
  }
  auto version = c.read<uint32_t>("the version");
  if (!version) return version.error();
  if (*version != 2 && *version != 3) {
    const bool big_endian = *version == 0x02000000 || *version == 0x03000000;
    return Error{fmt::format("{}: GGUF version {} is not supported (2 and 3 are){}", path,
                             *version, big_endian ? "; this looks like a big-endian GGUF" : "")};
  }
  auto n_tensors = c.read<uint64_t>("the tensor count");
  if (!n_tensors) return n_tensors.error();
  auto n_kv = c.read<uint64_t>("the metadata count");
  if (!n_kv) return n_kv.error();
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at
  // least 8 + 4 + 8 + 4 + 8.
  if (*n_kv > c.remaining() / 13) return c.truncated("the metadata");
  if (*n_tensors > c.remaining() / 32) return c.truncated("the tensor infos");

  for (uint64_t i = 0; i < *n_kv; ++i) {
    auto key = c.read_string(fmt::format("metadata key #{}", i));
    if (!key) return key.error();
    auto type = read_value_type(c, *key, path);
    if (!type) return type.error();
    auto value = read_value(c, *type, *key, path);
    if (!value) return value.error();
    if (src.metadata.contains(*key)) {
      return Error{fmt::format("{}: metadata key '{}' appears twice", path, *key)};
    }
    src.metadata.set(std::move(*key), std::move(*value));
  }

  uint64_t alignment = kGgufDefaultAlignment;
  auto align_key = src.metadata.get_int("general.alignment");
  if (!align_key) return align_key.error();
  if (align_key->has_value()) {
    const int64_t a = **align_key;
    if (a <= 0 || a > static_cast<int64_t>(kGgufMaxAlignment) || (a & (a - 1)) != 0) {
      return Error{fmt::format("{}: metadata 'general.alignment' = {} is not a power of two up "
                               "to {}",
                               path, a, kGgufMaxAlignment)};
    }
    alignment = static_cast<uint64_t>(a);
  }

  src.tensors.reserve(std::min(*n_tensors, kMaxReserve));
  std::unordered_set<std::string> tensor_names;
  for (uint64_t i = 0; i < *n_tensors; ++i) {
    auto t = read_tensor_info(c, i, path);
    if (!t) return t.error();
    if (!tensor_names.insert(t->name).second) {
      return Error{fmt::format("{}: tensor '{}' appears twice", path, t->name)};
    }
    src.tensors.push_back(std::move(*t));
  }

  const uint64_t data_start = (c.offset() + alignment - 1) / alignment * alignment;
  for (TensorInfo& t : src.tensors) {
    if (t.file_offset % alignment != 0) {
      return Error{fmt::format("{}: tensor '{}' data offset {} is not aligned to {}", path, t.name,
                               t.file_offset, alignment)};
    }
    if (data_start > f.size() || t.file_offset > f.size() - data_start ||
        t.n_bytes > f.size() - data_start - t.file_offset) {
      return Error{fmt::format("{}: tensor '{}' data ({} bytes at offset {}) extends past the end "
                               "of the file ({} bytes)",
                               path, t.name, t.n_bytes, data_start + t.file_offset, f.size())};
    }
    t.file_offset += data_start;
    t.data = f.data() + t.file_offset;
    t.file_index = 0;
  }
  return std::make_unique<ModelSource>(std::move(src));
}

}  // namespace spillway::engine
