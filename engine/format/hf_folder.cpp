#include "engine/format/hf_folder.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/format/hf_config.h"
#include "engine/format/hf_tensor_names.h"
#include "engine/format/safetensors.h"
#include "engine/tokenizer/tokenizer.h"

namespace spillway::engine {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kTokenizerFile = "tokenizer.json";
constexpr int kMaxDims = 4;

using Shards = std::vector<std::unique_ptr<SafetensorsFile>>;

// The shard file names of the index's weight_map (tensor name -> shard file name).
struct ShardIndex {
  std::map<std::string, std::string> weight_map;
  std::set<std::string> shards;
};

Result<ShardIndex> read_shard_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot open", path)};
  std::stringstream text;
  text << in.rdbuf();
  json index;
  try {
    index = json::parse(text.str());
  } catch (const json::exception& e) {
    return Error{fmt::format("{}: not valid JSON ({})", path, e.what())};
  }
  auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || weight_map == index.end() || !weight_map->is_object()) {
    return Error{fmt::format("{}: missing key 'weight_map' (an object of tensor name -> file)",
                             path)};
  }
  ShardIndex out;
  for (const auto& [tensor, file] : weight_map->items()) {
    if (!file.is_string()) {
      return Error{fmt::format("{}: weight_map entry '{}' is {}, expected a file name", path,
                               tensor, file.dump())};
    }
    const std::string name = file.get<std::string>();
    // Shards live beside the index: a bare file name, never a path out of the folder.
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of("/\\") != std::string::npos) {
      return Error{fmt::format("{}: weight_map entry '{}' names '{}', which is not a file name in "
                               "the model folder",
                               path, tensor, name)};
    }
    out.weight_map[tensor] = name;
    out.shards.insert(name);
  }
  if (out.shards.empty()) return Error{fmt::format("{}: weight_map is empty", path)};
  return out;
}

std::optional<kernels::DType> engine_dtype(std::string_view safetensors_dtype) {
  if (safetensors_dtype == "F32") return kernels::DType::F32;
  if (safetensors_dtype == "F16") return kernels::DType::F16;
  if (safetensors_dtype == "BF16") return kernels::DType::BF16;
  return std::nullopt;
}

Result<TensorInfo> to_tensor_info(const SafetensorsFile& shard, int file_index,
                                  const SafetensorsTensor& t, std::string gguf_name) {
  const auto type = engine_dtype(t.dtype);
  if (!type) {
    return Error{fmt::format("{}: tensor '{}' has dtype {}, which is not supported (F32, F16, "
                             "BF16)",
                             shard.path(), t.name, t.dtype)};
  }
  bool shape_ok = !t.shape.empty() && t.shape.size() <= kMaxDims;
  for (int64_t d : t.shape) shape_ok = shape_ok && d > 0;
  if (!shape_ok) {
    return Error{fmt::format("{}: tensor '{}' has shape [{}] (1 to {} non-zero dimensions "
                             "supported)",
                             shard.path(), t.name, fmt::join(t.shape, ", "), kMaxDims)};
  }
  // Kernels read elements in place; the mapping is page-aligned, so the file offset decides.
  const int64_t elem_bytes = kernels::block_bytes(*type);
  if (t.file_offset % elem_bytes != 0) {
    return Error{fmt::format("{}: tensor '{}' data at byte {} is not aligned to its {}-byte "
                             "elements (re-save the file with a current safetensors)",
                             shard.path(), t.name, t.file_offset, elem_bytes)};
  }
  TensorInfo info;
  info.name = std::move(gguf_name);
  info.type = *type;
  info.shape.assign(t.shape.rbegin(), t.shape.rend());  // GGUF order: row length first
  info.data = t.data;
  info.n_bytes = t.n_bytes;
  info.file_index = file_index;
  info.file_offset = t.file_offset;
  return info;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A hybrid checkpoint (qwen3_next, qwen3_5) in the engine's GGUF terms, as llama.cpp's
// converter writes it: post_attention_layernorm is the pre-FFN "post_attention_norm"; every
// RMSNorm weight but linear_attn.norm is stored zero-centred (GGUF: w + 1); A_log becomes
// -exp(A_log); conv1d [C, 1, K] loses its middle axis. The value-head order stays HF's
// (spillway.ssm_value_heads_grouped), and the fused qwen3_next in_proj_qkvz is split by the
// delta-net mixer at run time, so no matrix is copied.
Status adapt_hybrid_tensor(const SafetensorsFile& shard, const SafetensorsTensor& t, TensorInfo& info) {
  for (std::string_view norm : {".attn_norm.weight", ".post_attention_norm.weight", ".attn_q_norm.weight",
                                ".attn_k_norm.weight"}) {
    if (ends_with(info.name, norm)) info.transform = ValueTransform::AddOne;
  }
  if (info.name == "output_norm.weight") info.transform = ValueTransform::AddOne;
  if (ends_with(info.name, ".ssm_a")) info.transform = ValueTransform::NegExp;
  if (ends_with(info.name, ".ssm_conv1d.weight")) {
    if (info.shape.size() != 3 || info.shape[1] != 1) {
      return Error{fmt::format("{}: tensor '{}' has shape [{}], expected [channels, 1, kernel]", shard.path(),
                               t.name, fmt::join(t.shape, ", "))};
    }
    info.shape = {info.shape[0], info.shape[2]};
  }
  return {};
}

// Opens the weight files: model.safetensors, or every shard the index names.
Status open_weights(const fs::path& dir, ModelSource::Contents& src, Shards& shards) {
  const fs::path single = dir / kSingleFile;
  const fs::path index_path = dir / kIndexFile;
  std::error_code ec;
  if (fs::exists(single, ec)) {
    auto file = SafetensorsFile::open(single.string());
    if (!file) return file.error();
    src.files.push_back(single.string());
    shards.push_back(std::move(*file));
    return {};
  }
  if (!fs::exists(index_path, ec)) {
    const bool has_bin = fs::exists(dir / "pytorch_model.bin", ec) ||
                         fs::exists(dir / "pytorch_model.bin.index.json", ec);
    return Error{fmt::format("{}: no {} or {}{}", dir.string(), kSingleFile, kIndexFile,
                             has_bin ? " (PyTorch .bin checkpoints are not supported; convert "
                                       "them to safetensors)"
                                     : "")};
  }
  auto index = read_shard_index(index_path.string());
  if (!index) return index.error();
  std::map<std::string, size_t> shard_number;
  for (const std::string& name : index->shards) {
    auto file = SafetensorsFile::open((dir / name).string());
    if (!file) {
      return Error{fmt::format("{} (named by {})", file.error().message, index_path.string())};
    }
    shard_number[name] = shards.size();
    src.files.push_back((dir / name).string());
    shards.push_back(std::move(*file));
  }
  for (const auto& [tensor, shard] : index->weight_map) {
    if (!shards[shard_number.at(shard)]->find(tensor)) {
      return Error{fmt::format("{}: weight_map puts tensor '{}' in {}, which does not contain it",
                               index_path.string(), tensor, shard)};
    }
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<ModelSource>> open_hf_folder(const std::string& dir_name) {
  const fs::path dir(dir_name);
  ModelSource::Contents src;
  auto shards = std::make_shared<Shards>();
  src.storage = shards;
  src.path = dir_name;
  src.metadata.set_source_name(dir_name);

  const fs::path config_path = dir / kConfigFile;
  std::error_code ec;
  if (!fs::exists(config_path, ec)) {
    return Error{fmt::format("{}: missing {} (a Hugging Face model folder holds config.json, "
                             "model.safetensors or its shards, and tokenizer.json)",
                             dir_name, kConfigFile)};
  }
  auto config = import_hf_config(config_path.string(), src.metadata);
  if (!config) return config.error();
  src.metadata.set("spillway.source_format", std::string("huggingface"));
  src.metadata.set("general.name", dir.filename().empty() ? dir.parent_path().filename().string()
                                                            : dir.filename().string());

  SPILLWAY_TRY(open_weights(dir, src, *shards));
  std::map<std::string, const SafetensorsFile*, std::less<>> seen;  // GGUF name -> its file
  for (size_t i = 0; i < shards->size(); ++i) {
    const SafetensorsFile& shard = *(*shards)[i];
    for (const SafetensorsTensor& t : shard.tensors()) {
      std::string name = gguf_tensor_name(t.name);
      if (name.empty()) continue;
      if (config->hybrid && ends_with(name, ".ffn_norm.weight")) {  // the pre-FFN norm's GGUF name
        name.replace(name.size() - std::string_view("ffn_norm.weight").size(), std::string::npos,
                     "post_attention_norm.weight");
      }
      if (auto it = seen.find(name); it != seen.end()) {
        return Error{fmt::format("{}: tensor '{}' appears in both {} and {}", dir_name, t.name,
                                 it->second->path(), shard.path())};
      }
      auto info = to_tensor_info(shard, static_cast<int>(i), t, std::move(name));
      if (!info) return info.error();
      if (config->hybrid) SPILLWAY_TRY(adapt_hybrid_tensor(shard, t, *info));
      seen.emplace(info->name, &shard);
      src.tensors.push_back(std::move(*info));
    }
  }
  if (!config->tie_word_embeddings && !seen.count("output.weight")) {
    return Error{fmt::format("{}: missing tensor 'lm_head.weight' ({} says tie_word_embeddings "
                             "is false)",
                             dir_name, config_path.string())};
  }

  const fs::path tokenizer_path = dir / kTokenizerFile;
  if (!fs::exists(tokenizer_path, ec)) {
    return Error{fmt::format("{}: missing {}", dir_name, kTokenizerFile)};
  }
  SPILLWAY_TRY(import_tokenizer_json(tokenizer_path.string(), src.metadata));
  // config.json's ids fill in what the tokenizer files leave open.
  if (config->bos_token_id && !src.metadata.contains("tokenizer.ggml.bos_token_id")) {
    src.metadata.set("tokenizer.ggml.bos_token_id", *config->bos_token_id);
  }
  if (config->eos_token_id && !src.metadata.contains("tokenizer.ggml.eos_token_id")) {
    src.metadata.set("tokenizer.ggml.eos_token_id", *config->eos_token_id);
  }
  return std::make_unique<ModelSource>(std::move(src));
}

}  // namespace spillway::engine
