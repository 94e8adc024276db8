// Safetensors files and Hugging Face folders: folders written here (single file, and sharded
// with an index) load under GGUF names with GGUF-order shapes and the exact bytes; config.json
// keys become GGUF metadata; and every kind of broken file is an Error naming the file and
// the key or tensor (these tests run under ASan/UBSan in CI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/hf_config.h"
#include "engine/format/hf_folder.h"
#include "engine/format/hf_tensor_names.h"
#include "engine/model/model_config.h"
#include "engine/format/model_source.h"
#include "engine/format/safetensors.h"
#include "engine/tokenizer/tokenizer.h"
#include "hf_test_files.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::SafetensorsEntry;
using testing::write_safetensors;
using testing::write_safetensors_raw;

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() /
                       ("spillway-test-hf-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Removes the folder when the test ends, passed or not.
struct TempDir {
  explicit TempDir(const std::string& name) : path(temp_dir(name)) {}
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

template <class R>
void expect_error_naming(const R& r, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok()) << "expected an error naming " << parts.front();
  for (const std::string& p : parts) {
    EXPECT_NE(r.error().message.find(p), std::string::npos)
        << "'" << p << "' not in: " << r.error().message;
  }
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t dtype_bytes(const std::string& dtype) {
  return dtype == "F32" || dtype == "I32" ? 4 : dtype == "I64" ? 8 : 2;
}

// Distinct, deterministic bytes for each tensor.
SafetensorsEntry entry(const std::string& name, const std::string& dtype,
                       std::vector<int64_t> shape) {
  SafetensorsEntry e{name, dtype, std::move(shape), {}};
  e.bytes.resize(static_cast<size_t>(product(e.shape)) * dtype_bytes(dtype));
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  for (size_t i = 0; i < e.bytes.size(); ++i) {
    h = h * 1664525u + 1013904223u;
    e.bytes[i] = static_cast<uint8_t>(h >> 24);
  }
  return e;
}

// A tiny qwen2 (q/k/v biases): 2 layers, hidden 8, 2 heads of 4, 1 KV head, ffn 16,
// vocab 12, in mixed dtypes, plus two tensors the engine ignores.
std::vector<SafetensorsEntry> tiny_qwen2_tensors() {
  std::vector<SafetensorsEntry> t = {
      entry("model.embed_tokens.weight", "BF16", {12, 8}),
      entry("model.norm.weight", "F32", {8}),
      entry("lm_head.weight", "F16", {12, 8}),
      entry("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}),
      entry("training.step", "I64", {1}),
  };
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t.push_back(entry(p + "input_layernorm.weight", "F32", {8}));
    t.push_back(entry(p + "post_attention_layernorm.weight", "F32", {8}));
    t.push_back(entry(p + "self_attn.q_proj.weight", "BF16", {8, 8}));
    t.push_back(entry(p + "self_attn.q_proj.bias", "F32", {8}));
    t.push_back(entry(p + "self_attn.k_proj.weight", "BF16", {4, 8}));
    t.push_back(entry(p + "self_attn.k_proj.bias", "F32", {4}));
    t.push_back(entry(p + "self_attn.v_proj.weight", "F16", {4, 8}));
    t.push_back(entry(p + "self_attn.v_proj.bias", "F32", {4}));
    t.push_back(entry(p + "self_attn.o_proj.weight", "F32", {8, 8}));
    t.push_back(entry(p + "mlp.gate_proj.weight", "BF16", {16, 8}));
    t.push_back(entry(p + "mlp.up_proj.weight", "BF16", {16, 8}));
    t.push_back(entry(p + "mlp.down_proj.weight", "F16", {8, 16}));
  }
  return t;
}

json tiny_config(const std::string& model_type = "qwen2") {
  return {{"architectures", {"Qwen2ForCausalLM"}},
          {"model_type", model_type},
          {"hidden_size", 8},
          {"intermediate_size", 16},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"max_position_embeddings", 128},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"vocab_size", 12},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"bos_token_id", 7},
          {"eos_token_id", 11}};
}

void write_config(const fs::path& dir, const json& config) {
  std::ofstream(dir / "config.json") << config.dump(2);
}

// config.json + tokenizer.json; the weights are up to the test.
void write_folder_files(const fs::path& dir, const json& config) {
  write_config(dir, config);
  testing::write_byte_level_tokenizer_json(dir);
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Checks every mapped tensor against the entries it came from: GGUF name, reversed shape,
// type, bytes (through the mapping and at file_offset in the file on disk).
void expect_tensors_match(const ModelSource& src, const std::vector<SafetensorsEntry>& entries) {
  size_t mapped = 0;
  for (const SafetensorsEntry& e : entries) {
    const std::string name = gguf_tensor_name(e.name);
    if (name.empty()) continue;
    ++mapped;
    const TensorInfo* t = src.find_tensor(name);
    ASSERT_NE(t, nullptr) << name << " (from " << e.name << ")";
    const std::vector<int64_t> reversed(e.shape.rbegin(), e.shape.rend());
    EXPECT_EQ(t->shape, reversed) << name;
    const kernels::DType type = e.dtype == "F32"   ? kernels::DType::F32
                                : e.dtype == "F16" ? kernels::DType::F16
                                                   : kernels::DType::BF16;
    EXPECT_EQ(t->type, type) << name;
    ASSERT_EQ(t->n_bytes, e.bytes.size()) << name;
    EXPECT_EQ(std::memcmp(t->data, e.bytes.data(), e.bytes.size()), 0) << name;
    ASSERT_GE(t->file_index, 0);
    ASSERT_LT(static_cast<size_t>(t->file_index), src.files().size());
    const std::vector<uint8_t> file = read_file(src.files()[t->file_index]);
    ASSERT_LE(t->file_offset + t->n_bytes, file.size()) << name;
    EXPECT_EQ(std::memcmp(file.data() + t->file_offset, e.bytes.data(), e.bytes.size()), 0)
        << name;
  }
  EXPECT_EQ(src.tensors().size(), mapped);
}

// ---- tensor names ----------------------------------------------------------------------

TEST(HfTensorNames, MapsTheLlamaFamilyLayout) {
  const std::map<std::string, std::string> cases = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.17.post_attention_layernorm.weight", "blk.17.ffn_norm.weight"},
      {"model.layers.3.self_attn.q_proj.weight", "blk.3.attn_q.weight"},
      {"model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias"},
      {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
      {"model.layers.3.self_attn.v_proj.weight", "blk.3.attn_v.weight"},
      {"model.layers.120.self_attn.o_proj.weight", "blk.120.attn_output.weight"},
      {"model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight"},
      {"model.layers.2.self_attn.k_norm.weight", "blk.2.attn_k_norm.weight"},
      {"model.layers.9.mlp.gate_proj.weight", "blk.9.ffn_gate.weight"},
      {"model.layers.9.mlp.up_proj.weight", "blk.9.ffn_up.weight"},
      {"model.layers.9.mlp.down_proj.weight", "blk.9.ffn_down.weight"},
  };
  for (const auto& [hf, gguf] : cases) EXPECT_EQ(gguf_tensor_name(hf), gguf) << hf;
  for (const char* ignored :
       {"model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.01.mlp.up_proj.weight",
        "model.layers.x.mlp.up_proj.weight", "model.layers..mlp.up_proj.weight",
        "model.layers.1", "model.layers.1.", "model.layers.1.mlp.up_proj", "lm_head.bias",
        "model.embed_tokens.weight.extra", "", "model.layers.9999999.mlp.up_proj.weight"}) {
    EXPECT_EQ(gguf_tensor_name(ignored), "") << ignored;
  }
}

// ---- folders that load ------------------------------------------------------------------

TEST(HfFolder, SingleFileLoadsUnderGgufNames) {
  TempDir dir("single");
  const auto entries = tiny_qwen2_tensors();
  write_folder_files(dir.path, tiny_config());
  write_safetensors(dir.path / "model.safetensors", entries);
  auto src = open_model_source(dir.path.string());
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ((*src)->path(), dir.path.string());
  EXPECT_EQ((*src)->files(), std::vector<std::string>{(dir.path / "model.safetensors").string()});
  expect_tensors_match(**src, entries);
  EXPECT_EQ((*src)->find_tensor("blk.0.rotary_emb.inv_freq"), nullptr);

  const Metadata& m = (*src)->metadata();
  EXPECT_EQ(m.get_string("general.architecture").value(), "qwen2");
  EXPECT_EQ(m.get_string("spillway.source_format").value(), "huggingface");
  EXPECT_EQ(m.get_int("qwen2.embedding_length").value(), 8);
  EXPECT_EQ(m.get_int("qwen2.block_count").value(), 2);
  EXPECT_EQ(m.get_int("qwen2.feed_forward_length").value(), 16);
  EXPECT_EQ(m.get_int("qwen2.attention.head_count").value(), 2);
  EXPECT_EQ(m.get_int("qwen2.attention.head_count_kv").value(), 1);
  EXPECT_EQ(m.get_int("qwen2.attention.key_length").value(), 4);
  EXPECT_EQ(m.get_int("qwen2.attention.value_length").value(), 4);
  EXPECT_EQ(m.get_int("qwen2.context_length").value(), 128);
  EXPECT_EQ(m.get_int("qwen2.vocab_size").value(), 12);
  EXPECT_EQ(m.get_float("qwen2.attention.layer_norm_rms_epsilon").value(), 1e-5);
  EXPECT_EQ(m.get_float("qwen2.rope.freq_base").value(), 500000.0);
  EXPECT_FALSE(m.contains("qwen2.rope.scaling.type"));
  // The tokenizer was imported from tokenizer.json: 256 byte symbols, 3 merges, 1 special.
  EXPECT_EQ(m.get_string("tokenizer.ggml.model").value(), "gpt2");
  ASSERT_NE(m.get_array("tokenizer.ggml.tokens").value(), nullptr);
  EXPECT_EQ(m.get_array("tokenizer.ggml.tokens").value()->size(), 260u);
  auto tokenizer = Tokenizer::from_metadata(m, (*src)->path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ((*tokenizer)->encode(" the", false, false), std::vector<int32_t>{258});
  EXPECT_EQ((*tokenizer)->encode("<|endoftext|>", false, true), std::vector<int32_t>{259});
  // config.json's ids fill in what the tokenizer files leave open.
  EXPECT_EQ(m.get_int("tokenizer.ggml.bos_token_id").value(), 7);
  EXPECT_EQ(m.get_int("tokenizer.ggml.eos_token_id").value(), 11);

  auto config = read_model_config(**src);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->architecture, "qwen2");
  EXPECT_TRUE(config->traits.qkv_bias);
  EXPECT_EQ(config->n_layers, 2);
  EXPECT_EQ(config->n_embd, 8);
  EXPECT_EQ(config->n_ff, 16);
  EXPECT_EQ(config->n_heads, 2);
  EXPECT_EQ(config->n_kv_heads, 1);
  EXPECT_EQ(config->head_dim, 4);
  EXPECT_EQ(config->n_ctx_train, 128);
  EXPECT_FLOAT_EQ(config->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(config->rope_freq_base, 500000.0f);
  EXPECT_EQ(config->rope_style, kernels::RopeStyle::HalfSplit);
  EXPECT_TRUE(config->rope_freq_factors.empty());
}

TEST(HfFolder, ShardedFolderLoadsEveryShard) {
  TempDir dir("sharded");
  const auto entries = tiny_qwen2_tensors();
  std::vector<SafetensorsEntry> first, second;
  json weight_map = json::object();
  for (size_t i = 0; i < entries.size(); ++i) {
    const bool in_first = i < entries.size() / 2;
    (in_first ? first : second).push_back(entries[i]);
    weight_map[entries[i].name] = in_first ? "model-00001-of-00002.safetensors"
                                           : "model-00002-of-00002.safetensors";
  }
  write_folder_files(dir.path, tiny_config());
  write_safetensors(dir.path / "model-00001-of-00002.safetensors", first);
  write_safetensors(dir.path / "model-00002-of-00002.safetensors", second);
  std::ofstream(dir.path / "model.safetensors.index.json")
      << json{{"metadata", {{"total_size", 1234}}}, {"weight_map", weight_map}}.dump(2);

  auto src = open_model_source(dir.path.string());
  ASSERT_TRUE(src.ok()) << src.error().message;
  ASSERT_EQ((*src)->files().size(), 2u);
  EXPECT_EQ((*src)->files()[0], (dir.path / "model-00001-of-00002.safetensors").string());
  EXPECT_EQ((*src)->files()[1], (dir.path / "model-00002-of-00002.safetensors").string());
  expect_tensors_match(**src, entries);
  EXPECT_EQ((*src)->find_tensor("token_embd.weight")->file_index, 0);
  EXPECT_EQ((*src)->find_tensor("blk.1.ffn_down.weight")->file_index, 1);
}

TEST(HfFolder, AFileOfTheFolderOpensTheFolder) {
  TempDir dir("by-file");
  write_folder_files(dir.path, tiny_config());
  write_safetensors(dir.path / "model.safetensors", tiny_qwen2_tensors());
  for (const char* file : {"model.safetensors", "config.json"}) {
    auto src = open_model_source((dir.path / file).string());
    ASSERT_TRUE(src.ok()) << src.error().message;
    EXPECT_EQ((*src)->path(), dir.path.string());
    EXPECT_NE((*src)->find_tensor("blk.1.attn_v.bias"), nullptr);
  }
}

TEST(HfFolder, TrailingSlashAndTiedEmbeddings) {
  TempDir dir("tied");
  auto entries = tiny_qwen2_tensors();
  std::erase_if(entries, [](const SafetensorsEntry& e) { return e.name == "lm_head.weight"; });
  json config = tiny_config();
  config["tie_word_embeddings"] = true;
  write_folder_files(dir.path, config);
  write_safetensors(dir.path / "model.safetensors", entries);
  auto src = open_hf_folder(dir.path.string() + "/");
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ((*src)->find_tensor("output.weight"), nullptr);
  EXPECT_NE((*src)->find_tensor("token_embd.weight"), nullptr);
  EXPECT_EQ((*src)->metadata().get_string("general.name").value(), dir.path.filename().string());
}

TEST(HfConfig, DefaultsDerivedValuesAndLlama3RopeScaling) {
  TempDir dir("llama3");
  json config = {{"model_type", "llama"},
                 {"hidden_size", 64},
                 {"intermediate_size", 128},
                 {"num_hidden_layers", 3},
                 {"num_attention_heads", 4},
                 {"head_dim", nullptr},
                 {"rope_theta", 500000.0},
                 {"rope_scaling",
                  {{"rope_type", "llama3"},
                   {"factor", 8.0},
                   {"low_freq_factor", 1.0},
                   {"high_freq_factor", 4.0},
                   {"original_max_position_embeddings", 8192}}}};
  write_config(dir.path, config);
  Metadata m;
  auto hf = import_hf_config((dir.path / "config.json").string(), m);
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ(hf->model_type, "llama");
  EXPECT_FALSE(hf->tie_word_embeddings);
  EXPECT_EQ(m.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(m.get_int("llama.attention.head_count_kv").value(), 4);  // = heads
  EXPECT_EQ(m.get_int("llama.attention.key_length").value(), 16);    // = 64 / 4
  EXPECT_EQ(m.get_int("llama.context_length").value(), 2048);        // transformers' default
  EXPECT_EQ(m.get_float("llama.attention.layer_norm_rms_epsilon").value(), 1e-6);
  EXPECT_FALSE(m.contains("llama.vocab_size"));
  EXPECT_EQ(m.get_string("llama.rope.scaling.type").value(), "llama3");
  EXPECT_EQ(m.get_float("llama.rope.scaling.factor").value(), 8.0);
  EXPECT_EQ(m.get_float("llama.rope.scaling.low_freq_factor").value(), 1.0);
  EXPECT_EQ(m.get_float("llama.rope.scaling.high_freq_factor").value(), 4.0);
  EXPECT_EQ(m.get_int("llama.rope.scaling.original_context_length").value(), 8192);
}

TEST(HfConfig, LinearRopeScalingUnderTheOldKeyAndRopeParameters) {
  TempDir dir("linear");
  json config = tiny_config("llama");
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  write_config(dir.path, config);
  Metadata m;
  ASSERT_TRUE(import_hf_config((dir.path / "config.json").string(), m).ok());
  EXPECT_EQ(m.get_string("llama.rope.scaling.type").value(), "linear");
  EXPECT_EQ(m.get_float("llama.rope.scaling.factor").value(), 4.0);
  EXPECT_EQ(m.get_float("llama.rope.freq_base").value(), 500000.0);

  // transformers 5 keeps theta and the scaling in rope_parameters.
  config.erase("rope_scaling");
  config.erase("rope_theta");
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  write_config(dir.path, config);
  Metadata m2;
  ASSERT_TRUE(import_hf_config((dir.path / "config.json").string(), m2).ok());
  EXPECT_EQ(m2.get_float("llama.rope.freq_base").value(), 1000000.0);
  EXPECT_FALSE(m2.contains("llama.rope.scaling.type"));
}

TEST(HfConfig, Qwen3HeadDimIsExplicit) {
  TempDir dir("qwen3");
  json config = tiny_config("qwen3");
  config["head_dim"] = 16;  // qwen3 heads are wider than hidden / heads
  write_config(dir.path, config);
  Metadata m;
  ASSERT_TRUE(import_hf_config((dir.path / "config.json").string(), m).ok());
  EXPECT_EQ(m.get_int("qwen3.attention.key_length").value(), 16);
  EXPECT_EQ(m.get_int("qwen3.attention.value_length").value(), 16);
}

// ---- config.json errors -------------------------------------------------------------------

Result<HfConfig> import_config_text(const fs::path& dir, const std::string& text) {
  std::ofstream(dir / "config.json") << text;
  Metadata m;
  return import_hf_config((dir / "config.json").string(), m);
}

TEST(HfConfigErrors, MissingOrMistypedKeysAreNamed) {
  TempDir dir("config-errors");
  const std::string path = (dir.path / "config.json").string();
  for (const char* key : {"hidden_size", "num_hidden_layers", "intermediate_size",
                          "num_attention_heads", "model_type"}) {
    json config = tiny_config();
    config.erase(key);
    expect_error_naming(import_config_text(dir.path, config.dump()), {path, key});
  }
  const std::vector<std::pair<const char*, json>> bad_values = {
      {"hidden_size", "8"},
      {"hidden_size", 0},
      {"num_attention_heads", -2},
      {"intermediate_size", 1.5},
      {"num_key_value_heads", 1e12},
      {"rms_norm_eps", "tiny"},
      {"rms_norm_eps", -1.0},
      {"rope_theta", 0},
      {"tie_word_embeddings", "yes"},
      {"hidden_act", "gelu"},
      {"use_sliding_window", true},
      {"attention_bias", true},
      {"mlp_bias", true},
      {"mlp_bias", 1},
      {"rope_scaling", "linear"},
      {"head_dim", 8.5},
  };
  for (const auto& [key, value] : bad_values) {
    json config = tiny_config();
    config[key] = value;
    expect_error_naming(import_config_text(dir.path, config.dump()), {path, key});
  }
}

TEST(HfConfigErrors, UnknownModelTypeListsTheSupportedOnes) {
  TempDir dir("model-type");
  auto r = import_config_text(dir.path, tiny_config("gpt2").dump());
  expect_error_naming(r, {(dir.path / "config.json").string(), "gpt2", "llama, qwen2, qwen3"});
}

TEST(HfConfigErrors, UnsupportedRopeScalingIsNamed) {
  TempDir dir("rope-errors");
  const std::string path = (dir.path / "config.json").string();
  json yarn = tiny_config();
  yarn["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_error_naming(import_config_text(dir.path, yarn.dump()), {path, "rope_scaling", "yarn"});
  json no_factor = tiny_config();
  no_factor["rope_scaling"] = {{"type", "linear"}};
  expect_error_naming(import_config_text(dir.path, no_factor.dump()),
                      {path, "rope_scaling.factor"});
  json llama3 = tiny_config();
  llama3["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}};
  expect_error_naming(import_config_text(dir.path, llama3.dump()),
                      {path, "original_max_position_embeddings"});
}

TEST(HfConfigErrors, NotJsonOrNotAnObject) {
  TempDir dir("config-json");
  const std::string path = (dir.path / "config.json").string();
  expect_error_naming(import_config_text(dir.path, "{\"model_type\": "), {path, "JSON"});
  expect_error_naming(import_config_text(dir.path, "[1, 2]"), {path, "object"});
  expect_error_naming(import_config_text(dir.path, ""), {path});
  fs::remove(dir.path / "config.json");
  Metadata m;
  expect_error_naming(import_hf_config(path, m), {path});
}

// ---- safetensors errors -----------------------------------------------------------------

// A file with this header text (spaces-padded to 8) and 32 bytes of data.
Result<std::unique_ptr<SafetensorsFile>> open_with_header(const fs::path& path,
                                                          const std::string& header,
                                                          size_t data_bytes = 32) {
  write_safetensors_raw(path, header, std::vector<uint8_t>(data_bytes, 0x3c));
  return SafetensorsFile::open(path.string());
}

TEST(SafetensorsFile, WellFormedFileParses) {
  TempDir dir("st-ok");
  const fs::path path = dir.path / "x.safetensors";
  auto r = open_with_header(
      path,
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 32]},
          "a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
          "empty": {"dtype": "F16", "shape": [0, 4], "data_offsets": [16, 16]},
          "scalar": {"dtype": "U8", "shape": [], "data_offsets": [0, 1]}})");
  // "scalar" shares a byte with "a": overlapping data is an error.
  expect_error_naming(r, {path.string(), "overlap"});

  r = open_with_header(
      path,
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 32]},
          "a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]},
          "empty": {"dtype": "F16", "shape": [0, 4], "data_offsets": [16, 16]}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)->tensors().size(), 3u);
  const SafetensorsTensor* b = (*r)->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, "F32");
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b->n_bytes, 16u);
  const uint64_t header_len = fs::file_size(path) - 32 - 8;
  EXPECT_EQ(b->file_offset, 8 + header_len + 16);
  EXPECT_EQ(b->data[0], 0x3c);
  EXPECT_EQ((*r)->find("empty")->n_bytes, 0u);
  EXPECT_EQ((*r)->find("__metadata__"), nullptr);
  EXPECT_EQ((*r)->find("zzz"), nullptr);
}

TEST(SafetensorsFile, BrokenHeadersAreErrorsNamingFileAndTensor) {
  TempDir dir("st-bad");
  const fs::path path = dir.path / "bad.safetensors";
  const std::string p = path.string();
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"{not json", {p, "JSON"}},
      {"[1, 2, 3]", {p, "object"}},
      {R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 400]}})", {p, "'t'", "400"}},
      {R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [20, 16]}})", {p, "'t'"}},
      {R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [16, 33]}})", {p, "'t'"}},
      {R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0]}})", {p, "'t'", "data_offsets"}},
      {R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}})", {p, "'t'"}},
      {R"({"t": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 16]}})", {p, "'t'", "Q4"}},
      {R"({"t": {"shape": [4], "data_offsets": [0, 16]}})", {p, "'t'", "dtype"}},
      {R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", {p, "'t'", "12"}},
      {R"({"t": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}})", {p, "'t'", "shape"}},
      {R"({"t": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", {p, "'t'", "shape"}},
      {R"({"t": {"dtype": "F32", "data_offsets": [0, 16]}})", {p, "'t'", "shape"}},
      {R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 16]}})",
       {p, "'t'"}},
      {R"({"t": [1, 2]})", {p, "'t'"}},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
       {p, "'a'", "'b'", "overlap"}},
      {R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
       {p, "'t'", "twice"}},
  };
  for (const auto& [header, parts] : cases) {
    SCOPED_TRACE(header);
    expect_error_naming(open_with_header(path, header), parts);
  }
}

TEST(SafetensorsFile, HeaderLengthPastTheEndOrCoveringTheData) {
  TempDir dir("st-length");
  const fs::path path = dir.path / "len.safetensors";
  const std::string header = R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})";
  write_safetensors_raw(path, header, std::vector<uint8_t>(16, 1));
  ASSERT_TRUE(SafetensorsFile::open(path.string()).ok());

  std::vector<uint8_t> bytes = read_file(path);
  const uint64_t real_len = bytes.size() - 8 - 16;
  for (uint64_t len : {real_len + 16 + 1, uint64_t{1} << 40, ~uint64_t{0}, real_len + 16}) {
    std::memcpy(bytes.data(), &len, 8);
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    // Past the end, or (real_len + 16) swallowing the data into a header that is no
    // longer JSON.
    expect_error_naming(SafetensorsFile::open(path.string()), {path.string()});
  }
  for (size_t size : {0, 3, 7}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
    expect_error_naming(SafetensorsFile::open(path.string()), {path.string(), "truncated"});
  }
}

TEST(SafetensorsFile, TruncatedAtEveryByteIsAnError) {
  TempDir dir("st-truncated");
  const fs::path path = dir.path / "t.safetensors";
  write_safetensors(path, {entry("a", "F32", {2, 2}), entry("b", "BF16", {3})});
  const std::vector<uint8_t> bytes = read_file(path);
  ASSERT_TRUE(SafetensorsFile::open(path.string()).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
    auto r = SafetensorsFile::open(path.string());
    ASSERT_FALSE(r.ok()) << "truncated to " << size << " of " << bytes.size() << " bytes";
    EXPECT_NE(r.error().message.find(path.string()), std::string::npos) << r.error().message;
  }
}

// ---- folder errors ----------------------------------------------------------------------

TEST(HfFolderErrors, UnsupportedDtypeOfAMappedTensorNamesFileTensorAndDtype) {
  TempDir dir("dtype");
  auto entries = tiny_qwen2_tensors();
  for (auto& e : entries) {
    if (e.name == "model.layers.1.self_attn.k_proj.weight") e = entry(e.name, "I32", e.shape);
  }
  write_folder_files(dir.path, tiny_config());
  write_safetensors(dir.path / "model.safetensors", entries);
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {(dir.path / "model.safetensors").string(),
                       "model.layers.1.self_attn.k_proj.weight", "I32"});
}

TEST(HfFolderErrors, ScalarOrMisalignedMappedTensor) {
  TempDir dir("shape");
  write_folder_files(dir.path, tiny_config());
  const fs::path file = dir.path / "model.safetensors";
  write_safetensors_raw(
      file, R"({"model.norm.weight": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}})",
      std::vector<uint8_t>(4));
  expect_error_naming(open_hf_folder(dir.path.string()), {file.string(), "model.norm.weight"});
  // A header of odd length puts the F32 data at an odd file offset.
  write_safetensors_raw(
      file, R"({"model.norm.weight": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}} )",
      std::vector<uint8_t>(4), 1);
  ASSERT_NE((fs::file_size(file) - 4) % 4, 0u);
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {file.string(), "model.norm.weight", "aligned"});
}

TEST(HfFolderErrors, UntiedModelWithoutLmHead) {
  TempDir dir("no-lm-head");
  auto entries = tiny_qwen2_tensors();
  std::erase_if(entries, [](const SafetensorsEntry& e) { return e.name == "lm_head.weight"; });
  write_folder_files(dir.path, tiny_config());
  write_safetensors(dir.path / "model.safetensors", entries);
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {dir.path.string(), "lm_head.weight", "tie_word_embeddings"});
}

class ShardedFolderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    write_folder_files(dir.path, tiny_config());
    write_safetensors(dir.path / "a.safetensors", {entries[0], entries[1]});
    write_safetensors(dir.path / "b.safetensors", {entries[2]});
  }
  void write_index(const json& weight_map) {
    std::ofstream(dir.path / "model.safetensors.index.json")
        << json{{"weight_map", weight_map}}.dump();
  }
  std::string index_path() const { return (dir.path / "model.safetensors.index.json").string(); }

  TempDir dir{"sharded-errors"};
  std::vector<SafetensorsEntry> entries = {entry("model.embed_tokens.weight", "F32", {12, 8}),
                                           entry("model.norm.weight", "F32", {8}),
                                           entry("lm_head.weight", "F32", {12, 8})};
};

TEST_F(ShardedFolderErrors, ValidIndexLoads) {
  write_index({{"model.embed_tokens.weight", "a.safetensors"},
               {"model.norm.weight", "a.safetensors"},
               {"lm_head.weight", "b.safetensors"}});
  auto src = open_hf_folder(dir.path.string());
  ASSERT_TRUE(src.ok()) << src.error().message;
  expect_tensors_match(**src, entries);
}

TEST_F(ShardedFolderErrors, IndexNamingAMissingShard) {
  write_index({{"model.embed_tokens.weight", "a.safetensors"},
               {"lm_head.weight", "model-00003-of-00003.safetensors"}});
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {"model-00003-of-00003.safetensors", index_path()});
}

TEST_F(ShardedFolderErrors, IndexNamingATensorItsShardLacks) {
  write_index({{"model.embed_tokens.weight", "b.safetensors"}, {"lm_head.weight", "b.safetensors"}});
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {index_path(), "model.embed_tokens.weight", "b.safetensors"});
}

TEST_F(ShardedFolderErrors, IndexNamingAPathOutsideTheFolder) {
  write_index({{"lm_head.weight", "../b.safetensors"}});
  expect_error_naming(open_hf_folder(dir.path.string()), {index_path(), "../b.safetensors"});
}

TEST_F(ShardedFolderErrors, IndexWithoutWeightMapOrNotJson) {
  std::ofstream(dir.path / "model.safetensors.index.json") << R"({"metadata": {}})";
  expect_error_naming(open_hf_folder(dir.path.string()), {index_path(), "weight_map"});
  std::ofstream(dir.path / "model.safetensors.index.json") << "{";
  expect_error_naming(open_hf_folder(dir.path.string()), {index_path(), "JSON"});
  write_index({{"lm_head.weight", 3}});
  expect_error_naming(open_hf_folder(dir.path.string()), {index_path(), "lm_head.weight"});
}

TEST_F(ShardedFolderErrors, TensorInTwoShards) {
  write_safetensors(dir.path / "b.safetensors", {entries[2], entries[1]});
  write_index({{"model.embed_tokens.weight", "a.safetensors"},
               {"model.norm.weight", "a.safetensors"},
               {"lm_head.weight", "b.safetensors"}});
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {"model.norm.weight", "a.safetensors", "b.safetensors"});
}

TEST_F(ShardedFolderErrors, BrokenShardIsNamed) {
  write_index({{"model.embed_tokens.weight", "a.safetensors"}, {"lm_head.weight", "b.safetensors"}});
  write_safetensors_raw(dir.path / "b.safetensors", "{oops", {});
  expect_error_naming(open_hf_folder(dir.path.string()),
                      {(dir.path / "b.safetensors").string(), "JSON"});
}

TEST(HfFolderErrors, MissingFilesAreNamed) {
  TempDir dir("missing");
  const std::string d = dir.path.string();
  expect_error_naming(open_model_source(d), {d, "config.json"});

  write_config(dir.path, tiny_config());
  expect_error_naming(open_hf_folder(d), {d, "model.safetensors"});
  std::ofstream(dir.path / "pytorch_model.bin") << "x";
  expect_error_naming(open_hf_folder(d), {d, "model.safetensors", "PyTorch"});

  write_safetensors(dir.path / "model.safetensors", tiny_qwen2_tensors());
  expect_error_naming(open_hf_folder(d), {d, "tokenizer.json"});

  write_config(dir.path, tiny_config("mistral"));
  expect_error_naming(open_hf_folder(d), {"config.json", "mistral", "llama, qwen2, qwen3"});
}

}  // namespace
}  // namespace spillway::engine
