// The seams of the per-layer model description: every architecture declares one LayerSpec
// per layer, BlockWeights visits its matrices in the order residency relies on, and the KV
// cache holds K/V only for attention layers (so a hybrid model pays for those alone).
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "engine/model/arch/architecture.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

std::string stories_path() { return spillway::test_paths::testdata() + "/models/stories260K.gguf"; }

TEST(LayerSpecs, TheClassicBlockIsCausalAttentionAndADenseFfnOnEveryLayer) {
  auto model = Model::open(stories_path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(static_cast<int32_t>(c.layers.size()), c.n_layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const LayerSpec& s = c.layers[i];
    EXPECT_EQ(s.mixer, MixerKind::Attention);
    EXPECT_EQ(s.attention, AttentionKind::Causal);
    EXPECT_EQ(s.ffn, FfnKind::Dense);
    EXPECT_EQ(s.attention_ordinal, i);
    EXPECT_EQ(s.q_dim(), c.q_dim());
    EXPECT_EQ(s.kv_dim(), c.kv_dim());
    EXPECT_EQ(s.n_ff, c.n_ff);
  }
  EXPECT_EQ(c.n_attention_layers(), c.n_layers);
}

TEST(LayerSpecs, ForEachMatrixVisitsTheMixerThenTheFfnInAFixedOrder) {
  auto model = Model::open(stories_path());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& c = (*model)->config();
  const BlockWeights& block = (*model)->layers()[1];
  const auto& a = std::get<AttentionWeights>(block.mixer);
  const auto& f = std::get<DenseFfnWeights>(block.ffn);
  std::vector<const void*> visited;
  std::vector<int64_t> rows;
  block.for_each_matrix([&](const kernels::WeightMatrix& w) {
    visited.push_back(w.data);
    rows.push_back(w.rows);
  });
  EXPECT_EQ(visited, (std::vector<const void*>{a.wq.data, a.wk.data, a.wv.data, a.wo.data, f.w_gate.data,
                                               f.w_up.data, f.w_down.data}));
  EXPECT_EQ(rows, (std::vector<int64_t>{c.q_dim(), c.kv_dim(), c.kv_dim(), c.n_embd, c.n_ff, c.n_ff, c.n_embd}));
  // Each view is the file's tensor of that name.
  const TensorInfo* wk = (*model)->source().find_tensor("blk.1.attn_k.weight");
  ASSERT_NE(wk, nullptr);
  EXPECT_EQ(a.wk.data, wk->data);
}

TEST(LayerSpecs, TheKvCacheHoldsOnlyTheAttentionLayers) {
  ModelConfig c;
  c.n_layers = 4;
  c.layers.assign(4, LayerSpec{.n_heads = 4, .n_kv_heads = 2, .head_dim = 8});
  for (int32_t i = 0; i < 4; ++i) c.layers[i].attention_ordinal = i;
  const int64_t all_attention = KvCache::bytes_per_token(c, kernels::DType::F16);
  EXPECT_EQ(all_attention, 2 * 4 * 2 * 8 * 2);
  // A hybrid: layers 0-2 recurrent, layer 3 attention (ordinal 0).
  for (int32_t i = 0; i < 3; ++i) {
    c.layers[i].mixer = MixerKind::GatedDeltaNet;
    c.layers[i].attention_ordinal = -1;
  }
  c.layers[3].attention_ordinal = 0;
  EXPECT_EQ(c.n_attention_layers(), 1);
  EXPECT_EQ(KvCache::bytes_per_token(c, kernels::DType::F16), all_attention / 4);
  KvCache kv(c, 16, 3);
  EXPECT_EQ(kv.bytes(), all_attention / 4 * 16 * 3);
}

TEST(LayerSpecs, TheRegistryNamesEveryFamilyAndRejectsOthers) {
  for (const char* name : {"llama", "qwen2", "qwen3", "qwen35", "llada", "dream"}) {
    const Architecture* a = find_architecture(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->name, name);
    EXPECT_NE(a->describe_layers, nullptr);
    EXPECT_NE(a->bind_layer, nullptr);
  }
  EXPECT_EQ(find_architecture("gpt-j"), nullptr);
  // The wave-1 families first, then the others in registry order.
  EXPECT_EQ(supported_architectures().rfind("llama, qwen2, qwen3", 0), 0u) << supported_architectures();
  for (const char* name : {"qwen35", "qwen35moe", "qwen3next", "llada", "dream", "llada-moe"}) {
    EXPECT_NE(supported_architectures().find(name), std::string::npos) << supported_architectures();
  }
}

}  // namespace
}  // namespace spillway::engine
