// MoE models end to end: the qwen3moe binding (model/arch/moe_block.h) and its errors on
// bad files; the fused ffn_gate_up_exps layout gives the same bits as separate tensors; and,
// on the trained qwen3moe evaluation model (models/eval/qwen3moe), a sequence's logits are
// the same bits alone or batched with another sequence, and with every layer streamed from
// disk or resident (layer units hold every routed expert). Parity with the independent
// PyTorch reference is test_eval_model_parity.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/format/gguf_writer.h"
#include "engine/format/hf_tensor_names.h"
#include "engine/hf_test_files.h"
#include "engine/forward/forward.h"
#include "engine/model/arch/architecture.h"
#include "engine/model/model.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
using kernels::DType;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("spillway-moe-" + std::to_string(getpid()) + "-" + name)).string();
}

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

// A tiny qwen3moe, all F32: 2 layers, n_embd 64, 2 heads of 32 (1 KV head), 4 experts top-2
// of hidden size 32, vocab 24. Options break it in one place.
struct TinyMoe {
  bool fused_gate_up = false;
  std::string skip;           // a tensor left out
  std::string reshape;        // a tensor whose last dim is one too long
  int64_t expert_used = 2;
  bool expert_count_key = true;

  static constexpr int64_t kEmbd = 64, kExperts = 4, kFf = 32, kVocab = 24;

  GgufWriter write() const {
    GgufWriter w;
    w.set_string("general.architecture", "qwen3moe");
    w.set_uint32("qwen3moe.block_count", 2);
    w.set_uint32("qwen3moe.embedding_length", kEmbd);
    w.set_uint32("qwen3moe.feed_forward_length", 96);
    w.set_uint32("qwen3moe.attention.head_count", 2);
    w.set_uint32("qwen3moe.attention.head_count_kv", 1);
    w.set_uint32("qwen3moe.attention.key_length", 32);
    w.set_uint32("qwen3moe.context_length", 64);
    if (expert_count_key) w.set_uint32("qwen3moe.expert_count", kExperts);
    w.set_uint32("qwen3moe.expert_used_count", static_cast<uint32_t>(expert_used));
    w.set_uint32("qwen3moe.expert_feed_forward_length", kFf);
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    auto add = [&](const std::string& name, std::vector<int64_t> shape, float stddev, float mean = 0.0f) {
      if (name == skip) return std::vector<float>{};
      if (name == reshape) shape.back() += 1;
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> v(n);
      for (float& x : v) x = mean + stddev * dist(rng);
      w.add_tensor(name, DType::F32, shape, as_bytes(v));
      return v;
    };
    add("token_embd.weight", {kEmbd, kVocab}, 1.0f);
    add("output_norm.weight", {kEmbd}, 0.1f, 1.0f);
    add("output.weight", {kEmbd, kVocab}, 0.3f);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      add(p + "attn_norm.weight", {kEmbd}, 0.1f, 1.0f);
      add(p + "attn_q.weight", {kEmbd, 64}, 0.15f);
      add(p + "attn_k.weight", {kEmbd, 32}, 0.15f);
      add(p + "attn_v.weight", {kEmbd, 32}, 0.15f);
      add(p + "attn_output.weight", {64, kEmbd}, 0.15f);
      add(p + "attn_q_norm.weight", {32}, 0.1f, 1.0f);
      add(p + "attn_k_norm.weight", {32}, 0.1f, 1.0f);
      add(p + "ffn_norm.weight", {kEmbd}, 0.1f, 1.0f);
      add(p + "ffn_gate_inp.weight", {kEmbd, kExperts}, 0.5f);
      // The same random values either way: gate then up per expert, drawn in that order.
      std::vector<float> gate(kEmbd * kFf * kExperts), up(gate.size());
      for (int64_t e = 0; e < kExperts; ++e) {
        for (int64_t i = 0; i < kEmbd * kFf; ++i) gate[e * kEmbd * kFf + i] = 0.15f * dist(rng);
        for (int64_t i = 0; i < kEmbd * kFf; ++i) up[e * kEmbd * kFf + i] = 0.15f * dist(rng);
      }
      if (fused_gate_up) {
        std::vector<float> gu;
        for (int64_t e = 0; e < kExperts; ++e) {
          gu.insert(gu.end(), gate.begin() + e * kEmbd * kFf, gate.begin() + (e + 1) * kEmbd * kFf);
          gu.insert(gu.end(), up.begin() + e * kEmbd * kFf, up.begin() + (e + 1) * kEmbd * kFf);
        }
        w.add_tensor(p + "ffn_gate_up_exps.weight", DType::F32, {kEmbd, 2 * kFf, kExperts}, as_bytes(gu));
      } else {
        for (auto [name, values] : {std::pair{p + "ffn_gate_exps.weight", &gate}, std::pair{p + "ffn_up_exps.weight", &up}}) {
          if (name == skip) continue;
          std::vector<int64_t> shape = {kEmbd, kFf, kExperts};
          if (name == reshape) shape.back() += 1, values->resize(values->size() + kEmbd * kFf, 0.0f);
          w.add_tensor(name, DType::F32, shape, as_bytes(*values));
        }
      }
      add(p + "ffn_down_exps.weight", {kFf, kEmbd, kExperts}, 0.15f);
    }
    return w;
  }
};

template <class Fn>
TinyMoe tiny(Fn&& change) {
  TinyMoe t;
  change(t);
  return t;
}

Result<std::unique_ptr<Model>> load(const TinyMoe& spec, const std::string& path) {
  EXPECT_TRUE(spec.write().write(path).ok());
  auto model = Model::open(path);
  fs::remove(path);
  return model;
}

void expect_error_naming(const Result<std::unique_ptr<Model>>& model, const std::string& path,
                         const std::string& what) {
  ASSERT_FALSE(model.ok()) << what;
  EXPECT_NE(model.error().message.find(path), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find(what), std::string::npos) << model.error().message;
}

TEST(MoeModelFile, Qwen3moeIsRegisteredAndDescribesMoeLayers) {
  const Architecture* a = find_architecture("qwen3moe");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(supported_architectures().find("qwen3moe"), std::string::npos);
  auto model = load(TinyMoe{}, temp_path("specs.gguf"));
  ASSERT_TRUE(model.ok()) << model.error().message;
  for (const LayerSpec& s : (*model)->config().layers) {
    EXPECT_EQ(s.ffn, FfnKind::Moe);
    EXPECT_EQ(s.n_expert, 4);
    EXPECT_EQ(s.n_expert_used, 2);
    EXPECT_EQ(s.n_ff_expert, 32);
    EXPECT_EQ(s.n_ff_shared, 0);
    EXPECT_TRUE(s.moe_renormalize);
  }
}

TEST(MoeModelFile, BadFilesAreErrorsNamingTheFileAndTheTensorOrKey) {
  const std::string path = temp_path("bad.gguf");
  ASSERT_TRUE(load(TinyMoe{}, path).ok()) << load(TinyMoe{}, path).error().message;
  for (const char* name : {"blk.1.ffn_down_exps.weight", "blk.0.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight",
                           "blk.0.ffn_gate_inp.weight"}) {
    expect_error_naming(load(tiny([&](TinyMoe& t) { t.skip = name; }), path), path, name);
    expect_error_naming(load(tiny([&](TinyMoe& t) { t.reshape = name; }), path), path, name);
  }
  expect_error_naming(load(tiny([](TinyMoe& t) { t.expert_used = 5; }), path), path, "qwen3moe.expert_used_count");
  expect_error_naming(load(tiny([](TinyMoe& t) { t.expert_count_key = false; }), path), path, "qwen3moe.expert_count");
}

std::vector<float> run_logits(const Model& model, const std::vector<int32_t>& tokens,
                              LayerWeightSource* weights = nullptr) {
  kernels::ThreadPool pool(2);
  const ModelConfig& c = model.config();
  const auto n = static_cast<int32_t>(tokens.size());
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, (n + 15) / 16);
  ForwardPass forward(model, kv, pool, n, n, weights);
  std::vector<int32_t> blocks(kv.n_blocks());
  for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;
  ForwardBatch batch;
  batch.add_sequence(tokens.data(), n, 0, blocks);
  for (int32_t i = 0; i < n; ++i) batch.logit_rows.push_back(i);
  auto logits = forward.execute(batch);
  EXPECT_TRUE(logits.ok()) << logits.error().message;
  if (!logits.ok()) return {};
  return std::vector<float>(logits->begin(), logits->end());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(MoeModelFile, FusedGateUpExpertsGiveTheSameBitsAsSeparateTensors) {
  auto separate = load(TinyMoe{}, temp_path("separate.gguf"));
  auto fused = load(tiny([](TinyMoe& t) { t.fused_gate_up = true; }), temp_path("fused.gguf"));
  ASSERT_TRUE(separate.ok()) << separate.error().message;
  ASSERT_TRUE(fused.ok()) << fused.error().message;
  const std::vector<int32_t> tokens = {1, 5, 9, 2, 17, 23, 4, 4, 11, 0, 8};
  const std::vector<float> a = run_logits(**separate, tokens), b = run_logits(**fused, tokens);
  EXPECT_TRUE(same_bits(a, b));
  // And the experts do matter: a different top-k changes the logits.
  auto top1 = load(tiny([](TinyMoe& t) { t.expert_used = 1; }), temp_path("top1.gguf"));
  ASSERT_TRUE(top1.ok());
  EXPECT_FALSE(same_bits(a, run_logits(**top1, tokens)));
}

// ---- the trained evaluation model ---------------------------------------------------------

std::string eval_model_path() {
  return spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf";
}

std::vector<int32_t> task_tokens(int salt, int n) {
  std::vector<int32_t> t = {1};  // BOS
  for (int i = 1; i < n; ++i) t.push_back(3 + (i * 7 + salt * 13) % 40);
  return t;
}

TEST(MoeEvalModel, ASequenceAloneAndBatchedWithAnotherIsBitIdentical) {
  auto model = Model::open(eval_model_path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  const std::vector<int32_t> a = task_tokens(1, 13), b = task_tokens(2, 9);
  const std::vector<float> alone = run_logits(**model, a);

  kernels::ThreadPool pool(2);
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 2);
  ForwardPass forward(**model, kv, pool, 32, 32);
  ForwardBatch batch;
  batch.add_sequence(b.data(), static_cast<int32_t>(b.size()), 0, {1});
  batch.add_sequence(a.data(), static_cast<int32_t>(a.size()), 0, {0});
  for (size_t i = 0; i < a.size(); ++i) batch.logit_rows.push_back(static_cast<int32_t>(b.size() + i));
  auto logits = forward.execute(batch);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  EXPECT_TRUE(same_bits(alone, std::vector<float>(logits->begin(), logits->end())));
}

TEST(MoeEvalModel, StreamedAndResidentLayersGiveTheSameBitsAsTheMapping) {
  auto model = Model::open(eval_model_path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::vector<int32_t> tokens = task_tokens(3, 20);
  const std::vector<float> mapped = run_logits(**model, tokens);
  const int32_t n_layers = (*model)->config().n_layers;
  for (const std::vector<bool>& resident :
       {std::vector<bool>(n_layers, false), std::vector<bool>(n_layers, true), std::vector<bool>{true, false, true, false}}) {
    if (static_cast<int32_t>(resident.size()) != n_layers) continue;
    auto weights = WeightResidency::create(**model, resident, WeightResidencyOptions{});
    ASSERT_TRUE(weights.ok()) << weights.error().message;
    EXPECT_TRUE(same_bits(mapped, run_logits(**model, tokens, weights->get())));
  }
}

TEST(MoeModelFile, HuggingFaceExpertAndRouterNames) {
  EXPECT_EQ(gguf_tensor_name("model.layers.3.mlp.experts.12.down_proj.weight"), "blk.3.ffn_down_exps.12.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.experts.0.gate_proj.weight"), "blk.0.ffn_gate_exps.0.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.gate.weight"), "blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.experts.012.up_proj.weight"), "");  // not canonical
  EXPECT_EQ(gguf_tensor_name("model.layers.0.mlp.experts.1.bias"), "");
}

// The trained qwen3moe model as a Hugging Face folder (model_type qwen3_moe, one tensor per
// expert, as transformers saves it) gives the same logits as its GGUF, bit for bit.
TEST(MoeEvalModel, AHuggingFaceFolderGivesTheGgufsBits) {
  auto gguf = Model::open(eval_model_path());
  ASSERT_TRUE(gguf.ok()) << gguf.error().message;
  const ModelConfig& c = (*gguf)->config();
  const LayerSpec& spec = c.layers[0];
  const fs::path dir = fs::path(temp_path("hf-qwen3moe"));
  fs::create_directories(dir);
  const bool tied = (*gguf)->source().find_tensor("output.weight") == nullptr;
  nlohmann::json config = {
      {"model_type", "qwen3_moe"}, {"architectures", {"Qwen3MoeForCausalLM"}},
      {"hidden_size", c.n_embd}, {"intermediate_size", c.n_ff}, {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
      {"max_position_embeddings", c.n_ctx_train}, {"rms_norm_eps", c.rms_eps}, {"rope_theta", c.rope_freq_base},
      {"vocab_size", c.n_vocab}, {"tie_word_embeddings", tied}, {"num_experts", spec.n_expert},
      {"num_experts_per_tok", spec.n_expert_used}, {"moe_intermediate_size", spec.n_ff_expert},
      {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", nlohmann::json::array()},
  };
  std::ofstream(dir / "config.json") << config.dump(2);
  testing::write_byte_level_tokenizer_json(dir);
  const std::map<std::string, std::string> per_layer = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"}, {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate_inp.weight", "mlp.gate.weight"}};
  const std::map<std::string, std::string> experts = {
      {"ffn_gate_exps.weight", "gate_proj"}, {"ffn_up_exps.weight", "up_proj"}, {"ffn_down_exps.weight", "down_proj"}};
  std::vector<testing::SafetensorsEntry> entries;
  for (const TensorInfo& t : (*gguf)->source().tensors()) {
    const char* dtype = t.type == DType::F32 ? "F32" : t.type == DType::F16 ? "F16" : nullptr;
    ASSERT_NE(dtype, nullptr) << t.name;
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    std::vector<int64_t> shape(t.shape.rbegin(), t.shape.rend());  // HF: [.., out, in]
    if (t.name == "token_embd.weight") {
      entries.push_back({"model.embed_tokens.weight", dtype, shape, {bytes, bytes + t.n_bytes}});
    } else if (t.name == "output_norm.weight") {
      entries.push_back({"model.norm.weight", dtype, shape, {bytes, bytes + t.n_bytes}});
    } else if (t.name == "output.weight") {
      entries.push_back({"lm_head.weight", dtype, shape, {bytes, bytes + t.n_bytes}});
    } else {
      int layer = -1;
      char rest[64] = {};
      ASSERT_EQ(std::sscanf(t.name.c_str(), "blk.%d.%63s", &layer, rest), 2) << t.name;
      const std::string prefix = "model.layers." + std::to_string(layer) + ".";
      if (auto it = per_layer.find(rest); it != per_layer.end()) {
        entries.push_back({prefix + it->second, dtype, shape, {bytes, bytes + t.n_bytes}});
      } else {
        auto ex = experts.find(rest);
        ASSERT_NE(ex, experts.end()) << t.name;
        const uint64_t slice = t.n_bytes / shape[0];
        for (int64_t e = 0; e < shape[0]; ++e) {
          entries.push_back({prefix + "mlp.experts." + std::to_string(e) + "." + ex->second + ".weight", dtype,
                             {shape[1], shape[2]}, {bytes + e * slice, bytes + (e + 1) * slice}});
        }
      }
    }
  }
  testing::write_safetensors(dir / "model.safetensors", entries);
  auto hf = Model::open(dir.string());
  ASSERT_TRUE(hf.ok()) << hf.error().message;
  EXPECT_EQ((*hf)->config().architecture, "qwen3moe");
  EXPECT_EQ((*hf)->config().layers[0].n_expert, spec.n_expert);
  EXPECT_TRUE((*hf)->config().layers[0].moe_renormalize);
  const std::vector<int32_t> tokens = task_tokens(4, 15);
  EXPECT_TRUE(same_bits(run_logits(**gguf, tokens), run_logits(**hf, tokens)));
  // And under the expert tier (per-expert tensors are whole tensors there).
  WeightResidencyOptions o;
  o.expert_cache_bytes = 0;
  auto weights = WeightResidency::create(**hf, std::vector<bool>(c.n_layers, true), o);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  EXPECT_TRUE(same_bits(run_logits(**gguf, tokens), run_logits(**hf, tokens, weights->get())));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spillway::engine
