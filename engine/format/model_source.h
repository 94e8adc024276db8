// What the engine sees of a model on disk, whatever its format.
//
// A GGUF file and a Hugging Face folder both load into a ModelSource: metadata under
// GGUF's key names (general.architecture, llama.block_count, tokenizer.ggml.tokens, ...)
// and tensors under GGUF's canonical names (token_embd.weight, blk.N.attn_q.weight, ...),
// so architectures and the tokenizer are written once. The HF loader synthesizes the
// GGUF keys from config.json and maps HF tensor names.
//
// Ownership: a ModelSource owns its file mappings; TensorInfo::data points into them and
// lives as long as the ModelSource. Immutable after load: safe to read from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/result.h"
#include "kernels/dtype.h"

namespace spillway::engine {

// A metadata array keeps its elements in the vector matching its element kind.
struct MetaArray {
  enum class Kind { Int, Float, Bool, String } kind = Kind::Int;
  std::vector<int64_t> ints;        // every integer GGUF type (uint64 above INT64_MAX is rejected)
  std::vector<double> floats;       // f32 / f64
  std::vector<uint8_t> bools;
  std::vector<std::string> strings;
  size_t size() const;
};

using MetaValue = std::variant<int64_t, double, bool, std::string, MetaArray>;

class Metadata {
 public:
  // The model path, prefixed to error messages of the typed look-ups.
  void set_source_name(std::string name) { source_name_ = std::move(name); }
  void set(std::string key, MetaValue value) { values_[std::move(key)] = std::move(value); }
  const MetaValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Typed look-ups: nullopt when the key is absent; an Error when present with the
  // wrong type (the message names the model and the key). get_int accepts any integer type,
  // get_float any integer or float type.
  Result<std::optional<int64_t>> get_int(std::string_view key) const;
  Result<std::optional<double>> get_float(std::string_view key) const;
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<std::string>> get_string(std::string_view key) const;
  Result<const MetaArray*> get_array(std::string_view key) const;  // nullptr when absent

  const std::map<std::string, MetaValue, std::less<>>& all() const { return values_; }

 private:
  Error wrong_type(std::string_view key, const MetaValue& v, std::string_view wanted) const;

  std::string source_name_;
  std::map<std::string, MetaValue, std::less<>> values_;
};

// How a loader's stored values become the GGUF values the engine expects, for 1-D tensors that
// WeightBinder::vector_f32 copies to f32 anyway (a Hugging Face folder of a hybrid model stores
// zero-centred RMSNorm weights and A_log where the GGUF stores w + 1 and -exp(A_log)).
// Matrices are never transformed (WeightBinder::matrix rejects a tensor that asks for it).
enum class ValueTransform { None, AddOne, NegExp };

struct TensorInfo {
  std::string name;                // canonical (GGUF) name
  ValueTransform transform = ValueTransform::None;  // applied after dequantisation
  kernels::DType type = kernels::DType::F32;
  std::vector<int64_t> shape;      // GGUF order: shape[0] is the contiguous (row) length
  const void* data = nullptr;      // mapped bytes, n_bytes long
  uint64_t n_bytes = 0;
  int file_index = 0;              // index into ModelSource::files()
  uint64_t file_offset = 0;        // absolute byte offset of data in that file

  int64_t n_elements() const;
  int64_t rows() const;            // product of shape[1..]
};

class ModelSource {
 public:
  // What a loader (format/gguf_reader.cpp, format/hf_folder.cpp) hands over.
  struct Contents {
    std::string path;                 // the path the user gave (GGUF file or HF folder)
    std::vector<std::string> files;   // the files tensors live in (one GGUF, or each shard)
    Metadata metadata;
    std::vector<TensorInfo> tensors;  // names unique (the loaders check)
    std::shared_ptr<const void> storage;  // keeps the tensors' bytes mapped
  };
  explicit ModelSource(Contents contents);
  ModelSource(const ModelSource&) = delete;
  ModelSource& operator=(const ModelSource&) = delete;

  // The path the user gave; used in error messages.
  const std::string& path() const { return c_.path; }
  const std::vector<std::string>& files() const { return c_.files; }
  const Metadata& metadata() const { return c_.metadata; }
  const std::vector<TensorInfo>& tensors() const { return c_.tensors; }
  // By canonical name, in constant time (HF MoE checkpoints hold ~18k tensors); null when absent.
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  Contents c_;
  std::unordered_map<std::string_view, const TensorInfo*> by_name_;  // views of c_.tensors' names
};

// Opens a GGUF file, or a Hugging Face folder (config.json + *.safetensors [+ index] +
// tokenizer.json), chosen by what `path` is; a path to config.json, a *.safetensors file or
// the index opens the folder holding it. Errors name the file and the tensor or key.
Result<std::unique_ptr<ModelSource>> open_model_source(const std::string& path);

}  // namespace spillway::engine
