// A Hugging Face folder written by this test from the weights of a GGUF model must give
// the same logits as the GGUF. For llama, GGUF converters permute the rows of attn_q / attn_k
// (rotate-half -> interleaved pairs); the test undoes that permutation when writing the
// HF checkpoint, exactly as a real HF llama is laid out, so the engine's HF path must use
// the rotate-half rope to agree.
//
// A model folder must hold a tokenizer.json (the loader imports it into tokenizer.*
// metadata); the logits do not depend on it, so a small byte-level BPE one is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tools/demo_model.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "hf_test_files.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

using namespace tools;  // the demo model and generator the tests run

namespace fs = std::filesystem;

// GGUF name -> HF name, or "" when the tensor has no HF counterpart.
std::string hf_name(const std::string& gguf) {
  static const std::map<std::string, std::string> kWhole = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  // blk.<layer>.<suffix> -> model.layers.<layer>.<HF suffix>
  static const std::map<std::string, std::string> kPerLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  if (auto it = kWhole.find(gguf); it != kWhole.end()) return it->second;
  constexpr std::string_view kBlock = "blk.";
  if (gguf.rfind(kBlock, 0) != 0) return "";
  const size_t dot = gguf.find('.', kBlock.size());
  if (dot == std::string::npos || dot == kBlock.size()) return "";
  const std::string layer = gguf.substr(kBlock.size(), dot - kBlock.size());
  if (!std::all_of(layer.begin(), layer.end(), [](char c) { return c >= '0' && c <= '9'; })) return "";
  auto it = kPerLayer.find(gguf.substr(dot + 1));
  return it == kPerLayer.end() ? "" : "model.layers." + layer + "." + it->second;
}

// Inverse of the GGUF converter's permute(): within each head, GGUF row 2j+i holds HF row
// i*(head_dim/2)+j.
std::vector<uint8_t> unpermute_rows(const uint8_t* data, int64_t rows, int64_t row_bytes,
                                    int64_t n_heads) {
  const int64_t head_dim = rows / n_heads, half = head_dim / 2;
  std::vector<uint8_t> out(rows * row_bytes);
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const int64_t hf_row = h * head_dim + i * half + j;
        const int64_t gguf_row = h * head_dim + 2 * j + i;
        std::memcpy(out.data() + hf_row * row_bytes, data + gguf_row * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

const char* safetensors_dtype(kernels::DType t) {
  switch (t) {
    case kernels::DType::F32: return "F32";
    case kernels::DType::F16: return "F16";
    case kernels::DType::BF16: return "BF16";
    default: return nullptr;
  }
}

// Writes config.json + model.safetensors for `model` into dir.
void write_hf_folder(const Model& model, const fs::path& dir) {
  const ModelConfig& c = model.config();
  fs::create_directories(dir);
  nlohmann::json config = {
      {"model_type", c.architecture},
      {"architectures", {c.architecture == "llama" ? "LlamaForCausalLM" : "Qwen3ForCausalLM"}},
      {"hidden_size", c.n_embd},
      {"intermediate_size", c.n_ff},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.n_ctx_train},
      {"rms_norm_eps", c.rms_eps},
      {"rope_theta", c.rope_freq_base},
      {"vocab_size", c.n_vocab},
      {"tie_word_embeddings", model.source().find_tensor("output.weight") == nullptr},
      {"torch_dtype", "float32"},
  };
  std::ofstream(dir / "config.json") << config.dump(2);
  testing::write_byte_level_tokenizer_json(dir);

  nlohmann::ordered_json header;
  std::vector<std::vector<uint8_t>> blobs;
  uint64_t offset = 0;
  for (const TensorInfo& t : model.source().tensors()) {
    const std::string name = hf_name(t.name);
    if (name.empty()) continue;
    ASSERT_NE(safetensors_dtype(t.type), nullptr) << t.name;
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    std::vector<uint8_t> blob(bytes, bytes + t.n_bytes);
    const bool is_q = t.name.find("attn_q.weight") != std::string::npos;
    const bool is_k = t.name.find("attn_k.weight") != std::string::npos;
    if (c.architecture == "llama" && (is_q || is_k)) {
      blob = unpermute_rows(bytes, t.rows(), t.n_bytes / t.rows(), is_q ? c.n_heads : c.n_kv_heads);
    }
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());  // HF: [out, in]
    header[name] = {{"dtype", safetensors_dtype(t.type)},
                    {"shape", shape},
                    {"data_offsets", {offset, offset + blob.size()}}};
    offset += blob.size();
    blobs.push_back(std::move(blob));
  }
  std::string header_text = header.dump();
  while (header_text.size() % 8 != 0) header_text += ' ';
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  const uint64_t header_len = header_text.size();
  out.write(reinterpret_cast<const char*>(&header_len), 8);
  out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
  for (const auto& b : blobs) out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("spillway-hf-" + std::to_string(::getpid()) + "-" + name);
}

std::vector<float> all_logits(const Model& model, const std::vector<int32_t>& tokens) {
  kernels::ThreadPool pool(2);
  // F32 KV: the two layouts rotate K in a different element order (interleaved vs half-split
  // RoPE), so K can differ in the last float bit, and an F16 cache would round such a pair
  // to neighbouring halves now and then (~1e-3 relative), which five layers amplify past any
  // tolerance that still catches a wrong permutation. In F32 they agree to ~1e-5.
  KvCache kv(model.config().n_layers, model.config().n_kv_heads, model.config().head_dim, 16, 4,
             kernels::DType::F32);
  ForwardPass forward(model, kv, pool, 64, 64);
  ForwardBatch batch;
  batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), 0, {0, 1, 2, 3});
  for (size_t i = 0; i < tokens.size(); ++i) batch.logit_rows.push_back(static_cast<int32_t>(i));
  auto logits = forward.execute(batch);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  if (!logits.ok()) return {};
  return {logits->begin(), logits->end()};
}

void expect_same_logits(const std::string& gguf_path, const fs::path& hf_dir) {
  auto gguf = Model::open(gguf_path);
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  write_hf_folder(**gguf, hf_dir);
  auto hf = Model::open(hf_dir.string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ((*hf)->config().n_vocab, (*gguf)->config().n_vocab);
  EXPECT_EQ((*hf)->config().rope_style, kernels::RopeStyle::HalfSplit);

  std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421};
  for (int32_t& t : tokens) t %= (*gguf)->config().n_vocab;
  const auto a = all_logits(**gguf, tokens);
  const auto b = all_logits(**hf, tokens);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  EXPECT_LE(worst, 1e-4) << "max |logit difference| between GGUF and HF";
  fs::remove_all(hf_dir);
}

TEST(HuggingFaceEquivalence, LlamaFromGoldenGguf) {
  expect_same_logits(spillway::test_paths::testdata() + "/models/stories260K.gguf",
                     temp_path("stories260K"));
}

TEST(HuggingFaceEquivalence, Qwen3FromDemoGguf) {
  DemoModelOptions o;
  o.architecture = "qwen3";
  o.layers = 2;
  o.dim = 128;
  o.heads = 4;
  o.kv_heads = 2;
  o.vocab = 600;
  o.type = kernels::DType::BF16;
  const fs::path path = temp_path("qwen3.gguf");
  ASSERT_TRUE(write_demo_model(path.string(), o).ok());
  expect_same_logits(path.string(), temp_path("qwen3"));
  fs::remove(path);
}

}  // namespace
}  // namespace spillway::engine
