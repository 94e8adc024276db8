// MoBiLE's big-little decoding (tools/mobile_decode.h) on the trained qwen3moe model:
// gamma = 1 (always fall back) is the full-k run and gamma = 0 (never) the little-k run, bit
// for bit, the latter checked against a plain loop written here; in between, every decode
// step is either accepted or recomputed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/recurrent_state.h"
#include "kernels/thread_pool.h"
#include "tools/mobile_decode.h"
#include "support/paths.h"

namespace spillway::tools {
namespace {

std::unique_ptr<engine::Model> eval_model() {
  auto model = engine::Model::open(spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf");
  EXPECT_TRUE(model.ok()) << model.error().message;
  return model.ok() ? std::move(*model) : nullptr;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// Greedy decoding with the full k for the prompt and `experts` for every decode step.
std::vector<std::vector<float>> plain_run(const engine::Model& model, const std::vector<int32_t>& prompt,
                                          int32_t experts, int32_t n_new) {
  kernels::ThreadPool pool(2);
  const engine::ModelConfig& c = model.config();
  engine::KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 16, 4);
  engine::ForwardPass forward(model, kv, pool, 64, 64);
  engine::RecurrentState state(c, 1);  // hybrid models
  forward.set_recurrent_state(&state);
  std::vector<std::vector<float>> out;
  std::vector<int32_t> tokens = prompt;
  size_t fed = 0;
  for (int32_t n = 0; n < n_new; ++n) {
    forward.moe_ffn().set_experts_used_override(n == 0 ? 0 : experts);
    engine::ForwardBatch batch;
    const auto count = static_cast<int32_t>(tokens.size() - fed);
    batch.add_sequence(tokens.data() + fed, count, static_cast<int64_t>(fed), {0, 1, 2, 3});
    batch.sequences[0].state_slot = 0;
    batch.logit_rows.push_back(count - 1);
    auto logits = forward.execute(batch);
    EXPECT_TRUE(logits.ok());
    if (!logits.ok()) return out;
    out.emplace_back(logits->begin(), logits->end());
    fed = tokens.size();
    tokens.push_back(static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin()));
  }
  return out;
}

TEST(MobileDecode, GammaZeroIsTheLittleRunAndGammaOneTheFullRun) {
  auto model = eval_model();
  ASSERT_NE(model, nullptr);
  kernels::ThreadPool pool(2);
  // "6657+9707=" in the character vocabulary (<unk> <s> </s> ( ) + , 0-9 ...).
  const std::vector<int32_t> prompt = {1, 13, 13, 12, 14, 5, 16, 14, 7, 14, 18};
  const int32_t n_new = 10;
  MobileOptions o;
  o.max_new_tokens = n_new;
  o.gamma = 0.0;
  auto little = mobile_generate(*model, pool, prompt, o);
  ASSERT_TRUE(little.ok()) << little.error().message;
  EXPECT_EQ(little->fallback_tokens, 0);
  EXPECT_EQ(little->little_tokens, n_new - 1);
  EXPECT_TRUE(same_bits(little->logits, plain_run(*model, prompt, 2, n_new)));

  o.gamma = 1.0;
  auto full = mobile_generate(*model, pool, prompt, o);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->little_tokens, 0);
  EXPECT_EQ(full->fallback_tokens, n_new - 1);
  EXPECT_TRUE(same_bits(full->logits, plain_run(*model, prompt, 0, n_new)));
  EXPECT_FALSE(same_bits(full->logits, little->logits));  // the little model is another model

  o.gamma = 0.7;
  auto mixed = mobile_generate(*model, pool, prompt, o);
  ASSERT_TRUE(mixed.ok()) << mixed.error().message;
  EXPECT_EQ(mixed->little_tokens + mixed->fallback_tokens, static_cast<int32_t>(mixed->tokens.size()) - 1);
}

// A hybrid MoE model (Gated DeltaNet layers): a fallback must also roll the recurrent state
// back one step, or gamma = 1 would not be the full-k run.
TEST(MobileDecode, HybridFallbackRollsTheRecurrentStateBack) {
  auto model = engine::Model::open(spillway::test_paths::testdata() + "/models/qwen35moe-tiny-peaked-q8_0.gguf");
  ASSERT_TRUE(model.ok()) << model.error().message;
  kernels::ThreadPool pool(2);
  const std::vector<int32_t> prompt = {7454, 2402, 257, 640};  // "Once upon a time"
  const int32_t n_new = 10;
  MobileOptions o;
  o.max_new_tokens = n_new;
  o.gamma = 1.0;
  auto full = mobile_generate(**model, pool, prompt, o);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(full->fallback_tokens, n_new - 1);
  EXPECT_TRUE(same_bits(full->logits, plain_run(**model, prompt, 0, n_new)));
  o.gamma = 0.0;
  auto little = mobile_generate(**model, pool, prompt, o);
  ASSERT_TRUE(little.ok()) << little.error().message;
  EXPECT_TRUE(same_bits(little->logits, plain_run(**model, prompt, 1, n_new)));
}

}  // namespace
}  // namespace spillway::tools
