#include "engine/format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace spillway::engine {

namespace {

using nlohmann::json;

struct DTypeSize {
  std::string_view name;
  uint64_t bytes;
};

// The byte-sized dtypes of the safetensors specification.
constexpr DTypeSize kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};

// Parses the header JSON; a key appearing twice at the top level is an error (the JSON
// library would silently keep the last one).
Result<json> parse_header(const std::string& path, const char* text, uint64_t size) {
  std::string duplicate;
  std::set<std::string> keys;
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + size, on_event);
  } catch (const json::exception& e) {
    return Error{fmt::format("{}: safetensors header is not valid JSON ({})", path, e.what())};
  }
  if (!header.is_object()) {
    return Error{fmt::format("{}: safetensors header is not a JSON object", path)};
  }
  if (!duplicate.empty()) {
    return Error{fmt::format("{}: safetensors header names tensor '{}' twice", path, duplicate)};
  }
  return header;
}

// Reads a JSON array of non-negative integers (shape or data_offsets).
Result<std::vector<uint64_t>> read_uints(const std::string& path, const std::string& tensor,
                                         const json& entry, const char* field) {
  auto it = entry.find(field);
  if (it == entry.end() || !it->is_array()) {
    return Error{fmt::format("{}: tensor '{}' has no '{}' array", path, tensor, field)};
  }
  std::vector<uint64_t> out;
  for (const json& v : *it) {
    if (!v.is_number_unsigned()) {
      return Error{fmt::format("{}: tensor '{}' field '{}' holds {}, expected non-negative "
                               "integers",
                               path, tensor, field, v.dump())};
    }
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

Result<SafetensorsTensor> read_entry(const std::string& path, const std::string& name,
                                     const json& entry, uint64_t buffer_size) {
  if (!entry.is_object()) {
    return Error{fmt::format("{}: tensor '{}' header entry is not an object", path, name)};
  }
  SafetensorsTensor t;
  t.name = name;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return Error{fmt::format("{}: tensor '{}' has no 'dtype' string", path, name)};
  }
  t.dtype = dtype->get<std::string>();
  const std::optional<uint64_t> elem_size = safetensors_dtype_size(t.dtype);
  if (!elem_size) {
    return Error{fmt::format("{}: tensor '{}' has unknown dtype '{}'", path, name, t.dtype)};
  }

  auto shape = read_uints(path, name, entry, "shape");
  if (!shape) return shape.error();
  uint64_t n_elements = 1;
  for (uint64_t d : *shape) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && n_elements > std::numeric_limits<uint64_t>::max() / d)) {
      return Error{fmt::format("{}: tensor '{}' has an overflowing shape", path, name)};
    }
    n_elements *= d;
    t.shape.push_back(static_cast<int64_t>(d));
  }
  if (n_elements > std::numeric_limits<uint64_t>::max() / *elem_size) {
    return Error{fmt::format("{}: tensor '{}' has an overflowing shape", path, name)};
  }

  auto offsets = read_uints(path, name, entry, "data_offsets");
  if (!offsets) return offsets.error();
  if (offsets->size() != 2) {
    return Error{fmt::format("{}: tensor '{}' data_offsets must hold 2 values, not {}", path, name,
                             offsets->size())};
  }
  const uint64_t begin = (*offsets)[0], end = (*offsets)[1];
  if (begin > end || end > buffer_size) {
    return Error{fmt::format("{}: tensor '{}' data_offsets [{}, {}] are outside the data buffer "
                             "({} bytes)",
                             path, name, begin, end, buffer_size)};
  }
  if (end - begin != n_elements * *elem_size) {
    return Error{fmt::format("{}: tensor '{}' holds {} bytes, but its shape and dtype {} need {}",
                             path, name, end - begin, t.dtype, n_elements * *elem_size)};
  }
  t.n_bytes = end - begin;
  t.file_offset = begin;  // relative to the buffer until the caller rebases it
  return t;
}

}  // namespace

std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype) {
  for (const DTypeSize& d : kDTypes) {
    if (d.name == dtype) return d.bytes;
  }
  return std::nullopt;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->file_ = std::move(*mapped);
  const MappedFile& f = *file->file_;

  if (f.size() < 8) {
    return Error{fmt::format("{}: truncated safetensors file ({} bytes, no header length)", path,
                             f.size())};
  }
  uint64_t header_size = 0;
  std::memcpy(&header_size, f.data(), 8);
  if (header_size > f.size() - 8) {
    return Error{fmt::format("{}: safetensors header length {} runs past the end of the file "
                             "({} bytes)",
                             path, header_size, f.size())};
  }
  if (header_size > kMaxHeaderBytes) {
    return Error{fmt::format("{}: safetensors header length {} is larger than {} bytes", path,
                             header_size, kMaxHeaderBytes)};
  }
  auto header =
      parse_header(path, reinterpret_cast<const char*>(f.data()) + 8, header_size);
  if (!header) return header.error();

  const uint64_t buffer_start = 8 + header_size;
  const uint64_t buffer_size = f.size() - buffer_start;
  for (const auto& [name, entry] : header->items()) {
    if (name == "__metadata__") continue;
    auto t = read_entry(path, name, entry, buffer_size);
    if (!t) return t.error();
    file->tensors_.push_back(std::move(*t));
  }

  // No two tensors may share bytes (empty tensors share nothing).
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : file->tensors_) {
    if (t.n_bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->file_offset < b->file_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensor& prev = *by_offset[i - 1];
    if (by_offset[i]->file_offset < prev.file_offset + prev.n_bytes) {
      return Error{fmt::format("{}: tensors '{}' and '{}' overlap in the data buffer", path,
                               prev.name, by_offset[i]->name)};
    }
  }

  for (SafetensorsTensor& t : file->tensors_) {
    t.file_offset += buffer_start;
    t.data = f.data() + t.file_offset;
  }
  std::sort(file->tensors_.begin(), file->tensors_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace spillway::engine
