// make-demo-model --shape qwen3-30b-a3b (tools/demo_model.h): the named shape carries
// Qwen3-30B-A3B's published config (Qwen/Qwen3-30B-A3B config.json: hidden_size 2048,
// num_attention_heads 32, num_key_value_heads 4, head_dim 128, num_experts 128,
// num_experts_per_tok 8, moe_intermediate_size 768, vocab_size 151936, 48 layers), and a
// file written with those proportions (scaled down: q wider than the hidden size, top-8 of
// more experts) loads as a qwen3moe whose tensors have the layout the real model's GGUF has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "engine/model/model.h"
#include "tools/demo_model.h"

namespace spillway::engine {
namespace {

TEST(MoeDemoShape, Qwen3_30bA3bShapeIsThePublishedConfig) {
  tools::DemoModelOptions o;
  ASSERT_TRUE(tools::apply_demo_shape("qwen3-30b-a3b", o).ok());
  EXPECT_EQ(o.architecture, "qwen3moe");
  EXPECT_EQ(o.layers, 48);
  EXPECT_EQ(o.dim, 2048);
  EXPECT_EQ(o.heads, 32);
  EXPECT_EQ(o.kv_heads, 4);
  EXPECT_EQ(o.head_dim, 128);
  EXPECT_EQ(o.experts, 128);
  EXPECT_EQ(o.experts_used, 8);
  EXPECT_EQ(o.expert_ff, 768);
  EXPECT_EQ(o.vocab, 151936);
  o.type = kernels::DType::Q4_K;
  EXPECT_TRUE(tools::resolve_demo_model_options(o).ok());
  o.type = kernels::DType::Q8_0;
  EXPECT_TRUE(tools::resolve_demo_model_options(o).ok());
  // --head-dim is for the architectures whose loader reads attention.key_length.
  tools::DemoModelOptions llama;
  llama.head_dim = 128;
  EXPECT_FALSE(tools::resolve_demo_model_options(llama).ok());
  EXPECT_FALSE(tools::apply_demo_shape("qwen3-235b-a22b", o).ok());
}

TEST(MoeDemoShape, ScaledDownQwen3_30bA3bLoadsWithTheRealTensorLayout) {
  tools::DemoModelOptions o;
  ASSERT_TRUE(tools::apply_demo_shape("qwen3-30b-a3b", o).ok());
  // The same proportions, small: q (8 x 64 = 512) twice the hidden size, as 32 x 128 vs 2048.
  o.layers = 2;
  o.dim = 256;
  o.heads = 8;
  o.kv_heads = 1;
  o.head_dim = 64;
  o.experts = 16;
  o.expert_ff = 96;
  o.vocab = 600;
  o.type = kernels::DType::Q8_0;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("spillway-moe-shape-" + std::to_string(::getpid()) + ".gguf")).string();
  ASSERT_TRUE(tools::write_demo_model(path, o).ok());
  auto model = Model::open(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 1);
  for (const LayerSpec& s : c.layers) {
    EXPECT_EQ(s.ffn, FfnKind::Moe);
    EXPECT_EQ(s.n_expert, 16);
    EXPECT_EQ(s.n_expert_used, 8);
    EXPECT_EQ(s.n_ff_expert, 96);
    EXPECT_TRUE(s.moe_renormalize);
  }
  // GGUF order (row length first), as llama.cpp's convert writes Qwen3-30B-A3B:
  // attn_q {2048, 4096}, ffn_gate_exps {2048, 768, 128}, ffn_down_exps {768, 2048, 128}.
  const ModelSource& src = (*model)->source();
  const auto shape = [&](const char* name) {
    const TensorInfo* t = src.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->shape : std::vector<int64_t>{};
  };
  EXPECT_EQ(shape("blk.0.attn_q.weight"), (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(shape("blk.0.attn_k.weight"), (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(shape("blk.0.attn_output.weight"), (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(shape("blk.0.attn_q_norm.weight"), (std::vector<int64_t>{64}));
  EXPECT_EQ(shape("blk.1.ffn_gate_inp.weight"), (std::vector<int64_t>{256, 16}));
  EXPECT_EQ(shape("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{256, 96, 16}));
  EXPECT_EQ(shape("blk.1.ffn_up_exps.weight"), (std::vector<int64_t>{256, 96, 16}));
  EXPECT_EQ(shape("blk.1.ffn_down_exps.weight"), (std::vector<int64_t>{96, 256, 16}));
  EXPECT_EQ(src.find_tensor("blk.0.ffn_gate.weight"), nullptr);  // no dense FFN
}

}  // namespace
}  // namespace spillway::engine
