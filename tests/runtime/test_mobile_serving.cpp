// MoBiLE big-little decoding through the serving path (runtime/mobile_step.h): the
// EngineLoop with the real runner, several concurrent sequences, against references that
// do not go through it:
// - gamma = 0 is the little-k run and gamma = 1 the full-k run, bit for bit (tokens and the
//   logprobs the sampler reports from the logits it saw), greedy and seeded sampling with
//   penalties: a plain ForwardPass loop with the experts override and its own Sampler with
//   the same seed. So the sampler never sees a discarded pass (its RNG and penalties would
//   otherwise drift from the reference's);
// - in between, greedy tokens equal tools/mobile_decode (the offline single-sequence
//   MoBiLE) and do not depend on batch-mates (concurrent = one at a time); every decode token
//   is counted either little or fallback;
// - the per-request override (GenerationParams::moe) beats the runner's settings and is
//   checked at submit;
// - the hybrid MoE golden model (qwen35moe: recurrent state rolled back on fallback) keeps
//   these invariants.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/residency/weight_residency.h"
#include "engine/sampling/sampling.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "runtime/engine_runner.h"
#include "update_collector.h"
#include "tools/mobile_decode.h"
#include "support/paths.h"

namespace spillway::scheduler {
namespace {

using namespace runtime;  // the engine loop and runner under test
using testing::submit_and_wait;
using testing::UpdateCollector;

const std::string kEvalModel = spillway::test_paths::source() + "/models/eval/qwen3moe/qwen3moe-tasks-f16.gguf";
const std::string kHybridModel = spillway::test_paths::testdata() + "/models/qwen35moe-tiny-peaked-q8_0.gguf";

struct Generated {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool operator==(const Generated& o) const {
    return tokens == o.tokens && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};

std::ostream& operator<<(std::ostream& os, const Generated& g) {
  for (int32_t t : g.tokens) os << t << ' ';
  return os;
}

GenerationParams request(const std::vector<int32_t>& prompt, int32_t max_tokens, bool seeded, uint64_t seed = 7) {
  GenerationParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.sampling.logprobs = true;
  if (seeded) {
    p.sampling.temperature = 1.3f;  // a flat distribution: many tokens are not the argmax
    p.sampling.top_k = 0;
    p.sampling.top_p = 1.0f;
    p.sampling.min_p = 0.0f;
    p.sampling.repetition_penalty = 1.2f;
    p.sampling.presence_penalty = 0.3f;
    p.sampling.seed = seed;
  } else {
    p.sampling.temperature = 0.0f;
  }
  return p;
}

// The reference: one sequence, a plain ForwardPass loop, the prompt with the full k and every
// decode step with `decode_experts` (0: the full k), sampled by its own Sampler.
Generated reference(const engine::Model& model, const GenerationParams& p, int32_t decode_experts) {
  kernels::ThreadPool pool(2);
  const engine::ModelConfig& c = model.config();
  const int32_t context = static_cast<int32_t>(p.prompt.size()) + p.max_tokens;
  const int32_t n_blocks = (context + 15) / 16;
  engine::KvCache kv(c, 16, n_blocks);
  engine::ForwardPass forward(model, kv, pool, context, context);
  engine::RecurrentState state(c, 1);
  forward.set_recurrent_state(&state);
  std::vector<int32_t> blocks(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) blocks[i] = i;
  engine::Sampler sampler(p.sampling, 0);
  std::vector<int32_t> history = p.prompt;
  size_t fed = 0;
  Generated g;
  for (int32_t n = 0; n < p.max_tokens; ++n) {
    forward.moe_ffn().set_experts_used_override(n == 0 ? 0 : decode_experts);
    engine::ForwardBatch batch;
    const auto count = static_cast<int32_t>(history.size() - fed);
    batch.add_sequence(history.data() + fed, count, static_cast<int64_t>(fed), blocks);
    batch.sequences[0].state_slot = 0;
    batch.logit_rows.push_back(count - 1);
    auto logits = forward.execute(batch);
    EXPECT_TRUE(logits.ok());
    if (!logits.ok()) return g;
    std::vector<float> row(logits->begin(), logits->end());
    const engine::SampledToken t = sampler.sample(row.data(), c.n_vocab, history, p.prompt.size());
    fed = history.size();
    history.push_back(t.token);
    g.tokens.push_back(t.token);
    g.logprobs.push_back(t.logprob);
  }
  return g;
}

class MobileServing : public ::testing::Test {
 protected:
  void open(const std::string& path) {
    auto model = engine::Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    auto tokenizer = engine::Tokenizer::from_metadata(model_->source().metadata(), path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    tokenizer_ = std::move(*tokenizer);
    for (const engine::LayerSpec& s : model_->config().layers) top_k_ = std::max(top_k_, s.n_expert_used);
  }

  SchedulerConfig config() const {
    SchedulerConfig c;
    c.max_batch_tokens = 24;  // prompts are chunked among the other sequences' decodes
    c.max_running = 4;
    c.max_context = 128;
    c.block_size = 16;
    c.moe_experts_used = top_k_;
    if (engine::RecurrentState::slot_bytes(model_->config()) > 0) {
      c.n_state_slots = 4;
      c.n_state_snapshots = 8;
    }
    return c;
  }

  // Submits every request (all at once, or each after the previous finished) and returns
  // their outputs in order.
  std::vector<Generated> serve(const std::vector<GenerationParams>& requests, engine::MobileSettings mobile,
                               bool one_at_a_time = false, MobileStats* stats = nullptr,
                               engine::LayerWeightSource* weights = nullptr) {
    kernels::ThreadPool pool(2);
    const SchedulerConfig c = config();
    EngineRunnerOptions options;
    options.mobile = mobile;
    options.weights = weights;
    UpdateCollector collector;  // outlives the loop, whose engine thread calls its sink
    EngineLoop loop(make_engine_runner(*model_, pool, c, options), *tokenizer_, c);
    loop.start();
    const std::vector<RequestId> ids = submit_and_wait(loop, collector, requests, one_at_a_time);
    if (ids.size() != requests.size()) return {};
    loop.stop();
    if (stats) *stats = loop.snapshot().mobile_stats;
    EXPECT_TRUE(collector.errors().empty()) << collector.errors().front();
    std::vector<Generated> out;
    for (RequestId id : ids) out.push_back(Generated{collector.tokens(id), collector.logprobs(id)});
    return out;
  }

  int64_t decode_tokens(const std::vector<GenerationParams>& requests) const {
    int64_t n = 0;
    for (const GenerationParams& p : requests) n += p.max_tokens - 1;  // the first comes from the prefill
    return n;
  }

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Tokenizer> tokenizer_;
  int32_t top_k_ = 0;
};

// Items of the eval model's tasks, in its character vocabulary: "6657+9707=", and others.
const std::vector<std::vector<int32_t>> kEvalPrompts = {
    {1, 13, 13, 12, 14, 5, 16, 14, 7, 14, 18},
    {1, 9, 12, 5, 10, 11, 18},
    {1, 3, 8, 4, 3, 3, 4, 4, 18},
    {1, 15, 14, 13, 12, 11, 10, 9, 8, 18},
};

std::vector<GenerationParams> eval_requests(bool seeded) {
  std::vector<GenerationParams> out;
  for (size_t i = 0; i < kEvalPrompts.size(); ++i) {
    out.push_back(request(kEvalPrompts[i], 12 + int32_t(i) * 3, seeded, 7 + i));
  }
  return out;
}

TEST_F(MobileServing, GammaZeroIsTheLittleRunAndGammaOneTheFullRun) {
  open(kEvalModel);
  ASSERT_EQ(top_k_, 4);
  for (bool seeded : {false, true}) {
    SCOPED_TRACE(seeded ? "seeded sampling with penalties" : "greedy");
    const std::vector<GenerationParams> reqs = eval_requests(seeded);
    MobileStats stats;
    const auto little = serve(reqs, {engine::kMobileAuto, 0.0}, false, &stats);
    ASSERT_EQ(little.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(little[i], reference(*model_, reqs[i], 2)) << "request " << i;
    EXPECT_EQ(stats.little_tokens_total, decode_tokens(reqs));
    EXPECT_EQ(stats.fallback_tokens_total, 0);

    const auto full = serve(reqs, {engine::kMobileAuto, 1.0}, false, &stats);
    ASSERT_EQ(full.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(full[i], reference(*model_, reqs[i], 0)) << "request " << i;
    EXPECT_EQ(stats.little_tokens_total, 0);
    EXPECT_EQ(stats.fallback_tokens_total, decode_tokens(reqs));
    // And the same as MoBiLE off (the little pass never tried).
    EXPECT_EQ(full, serve(reqs, {engine::kMobileOff, 0.7}, false, &stats));
    EXPECT_EQ(stats.little_tokens_total + stats.fallback_tokens_total, 0);
    // The little run differs from the full one somewhere (else the test could not fail).
    if (seeded) {
      EXPECT_NE(little, full);
    }
  }
}

TEST_F(MobileServing, FallbackDecidesPerRowAndMatchesTheOfflineDecoder) {
  open(kEvalModel);
  const std::vector<GenerationParams> reqs = eval_requests(false);
  // A gamma that makes some rows fall back and accepts others.
  const double gamma = 0.99;
  MobileStats together_stats, alone_stats;
  const auto together = serve(reqs, {engine::kMobileAuto, gamma}, false, &together_stats);
  const auto alone = serve(reqs, {engine::kMobileAuto, gamma}, true, &alone_stats);
  ASSERT_EQ(together.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "request " << i;
  EXPECT_EQ(together_stats.little_tokens_total + together_stats.fallback_tokens_total, decode_tokens(reqs));
  EXPECT_GT(together_stats.little_tokens_total, 0);
  EXPECT_GT(together_stats.fallback_tokens_total, 0);
  EXPECT_EQ(together_stats.fallback_tokens_total, alone_stats.fallback_tokens_total);

  kernels::ThreadPool pool(2);
  int32_t offline_fallbacks = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    tools::MobileOptions o{.little_experts = 0, .gamma = gamma, .max_new_tokens = reqs[i].max_tokens};
    auto offline = tools::mobile_generate(*model_, pool, reqs[i].prompt, o);
    ASSERT_TRUE(offline.ok()) << offline.error().message;
    EXPECT_EQ(together[i].tokens, offline->tokens) << "request " << i;
    offline_fallbacks += offline->fallback_tokens;
  }
  EXPECT_EQ(together_stats.fallback_tokens_total, offline_fallbacks);
}

TEST_F(MobileServing, RequestOverrideBeatsTheServerSettings) {
  open(kEvalModel);
  std::vector<GenerationParams> reqs = eval_requests(true);
  // Server off; request 0 asks for little with gamma 0, request 1 for off, request 2 names
  // only the confidence (auto little experts), request 3 nothing (the server's: off).
  reqs[0].moe = engine::MobileRequest{.little_experts = 2, .fallback_confidence = 0.0};
  reqs[1].moe = engine::MobileRequest{.little_experts = engine::kMobileOff, .fallback_confidence = std::nullopt};
  reqs[2].moe = engine::MobileRequest{.little_experts = std::nullopt, .fallback_confidence = 0.0};
  MobileStats stats;
  const auto out = serve(reqs, {engine::kMobileOff, 0.7}, false, &stats);
  ASSERT_EQ(out.size(), reqs.size());
  EXPECT_EQ(out[0], reference(*model_, reqs[0], 2));
  EXPECT_EQ(out[1], reference(*model_, reqs[1], 0));
  EXPECT_EQ(out[2], reference(*model_, reqs[2], 2));
  EXPECT_EQ(out[3], reference(*model_, reqs[3], 0));
  EXPECT_EQ(stats.little_tokens_total, reqs[0].max_tokens - 1 + reqs[2].max_tokens - 1);

  // Server on with gamma 0; a request asking for gamma 1 runs the full k.
  reqs[0].moe = engine::MobileRequest{.little_experts = std::nullopt, .fallback_confidence = 1.0};
  const auto on = serve({reqs[0], reqs[3]}, {engine::kMobileAuto, 0.0}, false, &stats);
  ASSERT_EQ(on.size(), 2u);
  EXPECT_EQ(on[0], reference(*model_, reqs[0], 0));
  EXPECT_EQ(on[1], reference(*model_, reqs[3], 2));
}

// The model's mapping, recording what the forward acquires and what MoBiLE prefetches.
class RecordingSource final : public engine::LayerWeightSource {
 public:
  explicit RecordingSource(const engine::Model& model) : mapped_(model) {}
  Result<const engine::BlockWeights*> acquire_layer(int32_t layer) override { return mapped_.acquire_layer(layer); }
  Result<std::vector<const engine::ExpertWeights*>> acquire_experts(int32_t layer,
                                                                   std::span<const int32_t> experts) override {
    if (layer == 0) layer0_.emplace_back(false, std::vector<int32_t>(experts.begin(), experts.end()));
    return mapped_.acquire_experts(layer, experts);
  }
  Status prefetch_experts(int32_t layer, std::span<const int32_t> experts) override {
    ++prefetches_;
    if (layer == 0) layer0_.emplace_back(true, std::vector<int32_t>(experts.begin(), experts.end()));
    return {};
  }
  void release_layer(int32_t) override {}
  const kernels::WeightMatrix& token_embedding() const override { return mapped_.token_embedding(); }
  const kernels::WeightMatrix& output() const override { return mapped_.output(); }

  // Layer 0's expert requests in order: (prefetch?, ids).
  std::vector<std::pair<bool, std::vector<int32_t>>> layer0_;
  int prefetches_ = 0;

 private:
  engine::MappedWeights mapped_;
};

TEST_F(MobileServing, FallbackPrefetchesTheExpertsTheRecomputeUses) {
  open(kEvalModel);
  const std::vector<GenerationParams> reqs = {request(kEvalPrompts[0], 10, false)};
  RecordingSource source(*model_);
  MobileStats stats;
  const auto out = serve(reqs, {engine::kMobileAuto, 1.0}, false, &stats, &source);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], reference(*model_, reqs[0], 0));
  ASSERT_EQ(stats.fallback_tokens_total, 9);
  // Every fallback prefetches its first MoE layer's experts, and the recompute asks for
  // exactly those there (its input is the little pass's: nothing before layer 0's FFN
  // depends on the experts); later layers' requests are predictions.
  int prefetched = 0;
  for (size_t i = 0; i < source.layer0_.size(); ++i) {
    if (!source.layer0_[i].first) continue;
    ++prefetched;
    ASSERT_LT(i + 1, source.layer0_.size());
    EXPECT_FALSE(source.layer0_[i + 1].first);
    EXPECT_EQ(source.layer0_[i + 1].second, source.layer0_[i].second) << "fallback " << prefetched;
    EXPECT_EQ(source.layer0_[i].second.size(), 4u);  // one token's top-4
  }
  EXPECT_EQ(prefetched, 9);
  EXPECT_GE(source.prefetches_, 9 * 4);  // every MoE layer

  // Through a real expert cache smaller than a step's experts, at a gamma in between: the
  // tokens of the model's mapping (and with a cache holding every expert).
  const auto mapped = serve(eval_requests(false), {engine::kMobileAuto, 0.99}, false, &stats);
  engine::WeightResidencyOptions o;
  o.expert_cache_bytes = 1;  // the fewest slots: the top-k
  o.read_mode_probe_bytes = 0;
  auto weights = engine::WeightResidency::create(*model_, std::vector<bool>(model_->config().n_layers, true), o);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  ASSERT_TRUE((*weights)->expert_tier());
  MobileStats cached_stats;
  EXPECT_EQ(serve(eval_requests(false), {engine::kMobileAuto, 0.99}, false, &cached_stats, weights->get()), mapped);
  EXPECT_EQ(cached_stats.fallback_tokens_total, stats.fallback_tokens_total);
  o.expert_cache_bytes = 64 * (*weights)->expert_cache_stats().cache_bytes / 4;  // every expert
  auto big = engine::WeightResidency::create(*model_, std::vector<bool>(model_->config().n_layers, true), o);
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_EQ(serve(eval_requests(false), {engine::kMobileAuto, 0.99}, false, &cached_stats, big->get()), mapped);
}

TEST_F(MobileServing, InvalidOverridesAreRefusedAtSubmit) {
  open(kEvalModel);
  kernels::ThreadPool pool(1);
  SchedulerConfig c = config();
  EngineLoop loop(make_engine_runner(*model_, pool, c), *tokenizer_, c);
  auto refused = [&](engine::MobileRequest m, const std::string& field) {
    GenerationParams p = request(kEvalPrompts[0], 4, false);
    p.moe = m;
    const auto r = loop.submit(p, [](RequestUpdate&&) {});
    ASSERT_TRUE(std::holds_alternative<SubmitRejection>(r)) << field;
    EXPECT_EQ(std::get<SubmitRejection>(r).kind, SubmitError::Invalid);
    EXPECT_NE(std::get<SubmitRejection>(r).message.find(field), std::string::npos) << std::get<SubmitRejection>(r).message;
  };
  refused({.little_experts = 5, .fallback_confidence = std::nullopt}, "moe.little_experts");
  refused({.little_experts = -2, .fallback_confidence = std::nullopt}, "moe.little_experts");
  refused({.little_experts = std::nullopt, .fallback_confidence = 1.5}, "moe.fallback_confidence");
  loop.stop();

  // A model without MoE layers refuses the field.
  c.moe_experts_used = 0;
  EngineLoop dense(make_engine_runner(*model_, pool, c), *tokenizer_, c);
  GenerationParams p = request(kEvalPrompts[0], 4, false);
  p.moe = engine::MobileRequest{.little_experts = 2, .fallback_confidence = std::nullopt};
  const auto r = dense.submit(p, [](RequestUpdate&&) {});
  ASSERT_TRUE(std::holds_alternative<SubmitRejection>(r));
  EXPECT_NE(std::get<SubmitRejection>(r).message.find("no MoE layers"), std::string::npos);
  dense.stop();
}

TEST_F(MobileServing, HybridMoeRollsTheRecurrentStateBack) {
  open(kHybridModel);
  ASSERT_GT(top_k_, 1);
  ASSERT_GT(engine::RecurrentState::slot_bytes(model_->config()), 0);
  std::vector<GenerationParams> reqs;
  const std::vector<std::vector<int32_t>> prompts = {{7454, 2402, 257, 640}, {464, 2068, 7586, 21831}, {16, 11, 362, 11, 513, 11, 604, 11}};
  for (size_t i = 0; i < prompts.size(); ++i) reqs.push_back(request(prompts[i], 10, i == 2, 11));

  // gamma = 1: every decode token is recomputed after a rollback; the full-k run.
  MobileStats stats;
  const auto full = serve(reqs, {engine::kMobileAuto, 1.0}, false, &stats);
  ASSERT_EQ(full.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(full[i], reference(*model_, reqs[i], 0)) << "request " << i;
  EXPECT_EQ(stats.fallback_tokens_total, decode_tokens(reqs));
  const auto little = serve(reqs, {engine::kMobileAuto, 0.0}, false, &stats);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(little[i], reference(*model_, reqs[i], std::max(1, top_k_ / 2))) << "request " << i;
  }

  // In between: the offline decoder's greedy tokens, concurrent = alone.
  const double gamma = 0.9;
  MobileStats together_stats;
  const auto together = serve(reqs, {engine::kMobileAuto, gamma}, false, &together_stats);
  const auto alone = serve(reqs, {engine::kMobileAuto, gamma}, true, &stats);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "request " << i;
  EXPECT_EQ(together_stats.little_tokens_total + together_stats.fallback_tokens_total, decode_tokens(reqs));
  kernels::ThreadPool pool(2);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].sampling.temperature > 0.0f) continue;
    tools::MobileOptions o{.little_experts = 0, .gamma = gamma, .max_new_tokens = reqs[i].max_tokens};
    auto offline = tools::mobile_generate(*model_, pool, reqs[i].prompt, o);
    ASSERT_TRUE(offline.ok()) << offline.error().message;
    EXPECT_EQ(together[i].tokens, offline->tokens) << "request " << i;
  }
}

}  // namespace
}  // namespace spillway::scheduler
