#include "engine/format/model_source.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "engine/format/gguf.h"
#include "engine/format/hf_folder.h"

namespace spillway::engine {

size_t MetaArray::size() const {
  switch (kind) {
    case Kind::Int: return ints.size();
    case Kind::Float: return floats.size();
    case Kind::Bool: return bools.size();
    case Kind::String: return strings.size();
  }
  return 0;
}

const MetaValue* Metadata::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {

std::string_view kind_name(const MetaValue& v) {
  switch (v.index()) {
    case 0: return "an integer";
    case 1: return "a float";
    case 2: return "a bool";
    case 3: return "a string";
    default: return "an array";
  }
}

}  // namespace

Error Metadata::wrong_type(std::string_view key, const MetaValue& v,
                           std::string_view wanted) const {
  return Error{fmt::format("{}: metadata '{}' is {}, expected {}", source_name_, key, kind_name(v),
                           wanted)};
}

Result<std::optional<int64_t>> Metadata::get_int(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::optional<int64_t>();
  if (const auto* i = std::get_if<int64_t>(v)) return std::optional<int64_t>(*i);
  return wrong_type(key, *v, "an integer");
}

Result<std::optional<double>> Metadata::get_float(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::optional<double>();
  if (const auto* d = std::get_if<double>(v)) return std::optional<double>(*d);
  if (const auto* i = std::get_if<int64_t>(v)) return std::optional<double>(static_cast<double>(*i));
  return wrong_type(key, *v, "a number");
}

Result<std::optional<bool>> Metadata::get_bool(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::optional<bool>();
  if (const auto* b = std::get_if<bool>(v)) return std::optional<bool>(*b);
  return wrong_type(key, *v, "a bool");
}

Result<std::optional<std::string>> Metadata::get_string(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return std::optional<std::string>();
  if (const auto* s = std::get_if<std::string>(v)) return std::optional<std::string>(*s);
  return wrong_type(key, *v, "a string");
}

Result<const MetaArray*> Metadata::get_array(std::string_view key) const {
  const MetaValue* v = find(key);
  if (!v) return static_cast<const MetaArray*>(nullptr);
  if (const auto* a = std::get_if<MetaArray>(v)) return a;
  return wrong_type(key, *v, "an array");
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

ModelSource::ModelSource(Contents contents) : c_(std::move(contents)) {
  by_name_.reserve(c_.tensors.size());
  for (const TensorInfo& t : c_.tensors) by_name_.emplace(t.name, &t);
}

const TensorInfo* ModelSource::find_tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<ModelSource>> open_model_source(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return open_hf_folder(path);
  // A file of a Hugging Face folder stands for its folder.
  const fs::path file(path);
  const std::string name = file.filename().string();
  if (name == "config.json" || file.extension() == ".safetensors" ||
      name.ends_with(".safetensors.index.json")) {
    return open_hf_folder(file.has_parent_path() ? file.parent_path().string() : ".");
  }
  return open_gguf(path);
}

}  // namespace spillway::engine
