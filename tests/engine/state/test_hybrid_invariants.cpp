// Invariants of the hybrid (gated delta net) forward on qwen35-tiny-peaked-f16 (F16 weights,
// F32 KV, so the comparison is about the recurrence and its state, not KV rounding):
// - token-by-token decode = one-shot prefill = any chunk split = batched with other sequences
//   (logits within 1e-5 of the largest |logit|);
// - rollback of one step kept for undo restores the state bit-exactly (and the next step then
//   gives what it gives without the rolled-back step); in-place steps (the default) give the
//   same bits as steps kept for undo and cannot be rolled back;
// - snapshot -> restore (into another slot) -> continue = uninterrupted; copy likewise;
// - errors as values: no state pool, a bad slot, a legacy `ssm_in` layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/recurrent_state.h"
#include "kernels/thread_pool.h"
#include "tools/demo_model.h"
#include "support/paths.h"
#include <filesystem>

namespace spillway::engine {
namespace {

std::string model_path() { return spillway::test_paths::testdata() + "/models/qwen35-tiny-peaked-f16.gguf"; }

// "Lily and Tom went to the park. They" and llama.cpp's greedy continuation's first tokens.
const std::vector<int32_t> kTokens = {43, 813, 290, 4186, 1816, 284, 262, 3952, 13, 1119, 22973, 31497, 43388,
                                      48931, 35009, 7130, 30846, 13432, 24539, 31446, 2945, 13503, 6515, 30369,
                                      3441, 31149, 6584, 34310, 49519, 1920, 16902, 23083, 6389, 40932, 14702};
const std::vector<int32_t> kOther = {464, 2068, 7586, 21831, 16412, 34068, 25050, 4066, 22377, 29037, 6600,
                                     14020, 1539, 28002, 42808, 12296, 17071, 36993, 27030, 35099};

class HybridInvariants : public ::testing::Test {
 protected:
  static constexpr int32_t kBlock = 16, kBlocksPerSeq = 8, kSlots = 4;

  void SetUp() override {
    auto model = Model::open(model_path());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    n_vocab_ = model_->config().n_vocab;
    kv_ = std::make_unique<KvCache>(model_->config(), kBlock, kBlocksPerSeq * kSlots, kernels::DType::F32);
    state_ = std::make_unique<RecurrentState>(model_->config(), kSlots);
    forward_ = std::make_unique<ForwardPass>(*model_, *kv_, pool_, 128, kBlock * kBlocksPerSeq);
    forward_->set_recurrent_state(state_.get());
  }

  std::vector<int32_t> blocks(int32_t seq) const {
    std::vector<int32_t> b;
    for (int32_t i = 0; i < kBlocksPerSeq; ++i) b.push_back(i * kSlots + seq);  // interleaved
    return b;
  }

  // Runs tokens[start, start + n) of sequence `seq` (slot seq) alone; returns the logits of
  // every one of them.
  // kv_seq: whose KV blocks to use (default: the slot's own).
  std::vector<float> step(int32_t seq, const std::vector<int32_t>& tokens, int64_t start, int32_t n,
                          int32_t kv_seq = -1) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + start, n, start, blocks(kv_seq < 0 ? seq : kv_seq));
    batch.sequences[0].state_slot = seq;
    for (int32_t i = 0; i < n; ++i) batch.logit_rows.push_back(i);
    auto r = forward_->execute(batch);
    EXPECT_TRUE(r.ok()) << r.error().message;
    if (!r.ok()) return {};
    return std::vector<float>(r->begin(), r->end());
  }

  // Runs `tokens` in chunks of the given sizes (the last repeated); logits of every position.
  std::vector<float> run_chunked(int32_t seq, const std::vector<int32_t>& tokens, std::vector<int32_t> chunks) {
    std::vector<float> all;
    int64_t pos = 0;
    size_t ci = 0;
    while (pos < static_cast<int64_t>(tokens.size())) {
      const int32_t n = std::min<int32_t>(chunks[std::min(ci++, chunks.size() - 1)], tokens.size() - pos);
      std::vector<float> l = step(seq, tokens, pos, n);
      all.insert(all.end(), l.begin(), l.end());
      pos += n;
    }
    return all;
  }

  static void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    float scale = 1e-30f;
    for (float x : b) scale = std::max(scale, std::abs(x));
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    EXPECT_LE(worst, 1e-5f * scale) << what << ": max |diff| " << worst << " of max |logit| " << scale;
  }

  std::unique_ptr<Model> model_;
  int32_t n_vocab_ = 0;
  kernels::ThreadPool pool_{2};
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<RecurrentState> state_;
  std::unique_ptr<ForwardPass> forward_;
};

TEST_F(HybridInvariants, DecodeEqualsPrefillEqualsAnyChunkSplit) {
  const std::vector<float> prefill = run_chunked(0, kTokens, {static_cast<int32_t>(kTokens.size())});
  expect_close(run_chunked(0, kTokens, {1}), prefill, "token by token");
  expect_close(run_chunked(0, kTokens, {5, 1, 13, 2, 7}), prefill, "chunks 5,1,13,2,7,7..");
  expect_close(run_chunked(0, kTokens, {16}), prefill, "chunks of 16");
  expect_close(run_chunked(0, kTokens, {3, 30}), prefill, "chunks 3,30");
}

TEST_F(HybridInvariants, BatchedWithOtherSequencesEqualsAlone) {
  const std::vector<float> alone0 = run_chunked(0, kTokens, {1000});
  const std::vector<float> alone1 = run_chunked(1, kOther, {1000});
  // Both together: sequence 0 in chunks of 4, sequence 1 in chunks of 3, in one batch per
  // step, in alternating order, each with its own slot.
  std::vector<float> got0, got1;
  int64_t p0 = 0, p1 = 0;
  for (int step = 0; p0 < int64_t(kTokens.size()) || p1 < int64_t(kOther.size()); ++step) {
    ForwardBatch batch;
    const int32_t n0 = std::min<int64_t>(4, kTokens.size() - p0), n1 = std::min<int64_t>(3, kOther.size() - p1);
    auto add = [&](int32_t seq, const std::vector<int32_t>& toks, int64_t pos, int32_t n) {
      if (n <= 0) return;
      const int32_t first = static_cast<int32_t>(batch.tokens.size());
      batch.add_sequence(toks.data() + pos, n, pos, blocks(seq));
      batch.sequences.back().state_slot = seq;
      for (int32_t i = 0; i < n; ++i) batch.logit_rows.push_back(first + i);
    };
    if (step % 2 == 0) add(0, kTokens, p0, n0), add(1, kOther, p1, n1);
    else add(1, kOther, p1, n1), add(0, kTokens, p0, n0);
    auto r = forward_->execute(batch);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const size_t rows0 = std::max(n0, 0) * size_t(n_vocab_), rows1 = std::max(n1, 0) * size_t(n_vocab_);
    const float* base = r->data();
    if (step % 2 == 0) {
      got0.insert(got0.end(), base, base + rows0);
      got1.insert(got1.end(), base + rows0, base + rows0 + rows1);
    } else {
      got1.insert(got1.end(), base, base + rows1);
      got0.insert(got0.end(), base + rows1, base + rows1 + rows0);
    }
    p0 += std::max(n0, 0);
    p1 += std::max(n1, 0);
  }
  expect_close(got0, alone0, "sequence 0 batched");
  expect_close(got1, alone1, "sequence 1 batched");
}

TEST_F(HybridInvariants, RollbackOfOneStepRestoresTheStateBitExactly) {
  const int32_t n = 12;
  step(0, kTokens, 0, n);
  const RecurrentState::Snapshot before = state_->snapshot(0);
  std::vector<int32_t> wrong = kTokens;
  wrong[n] = 777;
  state_->set_keep_undo(true);
  step(0, wrong, n, 1);  // a step we then drop
  state_->set_keep_undo(false);
  EXPECT_NE(state_->snapshot(0).values, before.values);
  ASSERT_TRUE(state_->rollback(0));
  EXPECT_EQ(state_->snapshot(0).values, before.values);
  EXPECT_FALSE(state_->rollback(0)) << "only one step can be undone";
  // Continuing after the rollback gives what the uninterrupted run gives.
  std::vector<float> continued = step(0, kTokens, n, 5);
  const std::vector<float> reference =
      run_chunked(1, std::vector<int32_t>(kTokens.begin(), kTokens.begin() + n + 5), {n, 5});
  expect_close(continued, std::vector<float>(reference.begin() + size_t(n) * n_vocab_, reference.end()),
               "continued after rollback");
}

TEST_F(HybridInvariants, InPlaceStepsGiveTheBitsOfStepsKeptForUndo) {
  // Slot 0 in place, slot 1 double-buffered, the same tokens in the same chunks (prefill
  // chunks, with and without the mixer's whole-row conv pass, and single decode tokens): the
  // same logits and states, bit for bit.
  const std::vector<int32_t> chunks = {9, 1, 1, 5, 1, 12, 2, 1};
  int64_t pos = 0;
  for (int32_t n : chunks) {
    state_->set_keep_undo(false);
    const std::vector<float> in_place = step(0, kTokens, pos, n);
    state_->set_keep_undo(true);
    const std::vector<float> kept = step(1, kTokens, pos, n);
    state_->set_keep_undo(false);
    ASSERT_EQ(in_place, kept) << "chunk of " << n << " at " << pos;
    ASSERT_EQ(state_->snapshot(0).values, state_->snapshot(1).values) << "chunk of " << n << " at " << pos;
    EXPECT_FALSE(state_->rollback(0)) << "an in-place step cannot be undone";
    pos += n;
  }
}

TEST_F(HybridInvariants, SnapshotRestoreContinueEqualsUninterrupted) {
  const int32_t n = 17;
  const std::vector<float> uninterrupted = run_chunked(0, kTokens, {n, 1000});
  step(0, kTokens, 0, n);  // slot 0 and blocks(0) hold the prefix
  const RecurrentState::Snapshot snap = state_->snapshot(0);
  EXPECT_EQ(snap.bytes(), RecurrentState::state_bytes(model_->config()));
  step(0, kOther, 0, 9, /*kv_seq=*/3);  // the slot moves on to another sequence
  // Restore into another slot, reuse blocks(0)'s KV (a prefix-cache hit) and continue.
  step(2, kOther, 0, 5);  // slot 2 held something else before
  state_->restore(2, snap);
  EXPECT_FALSE(state_->rollback(2)) << "a restore cannot be rolled back";
  const std::vector<float> continued = step(2, kTokens, n, static_cast<int32_t>(kTokens.size()) - n, /*kv_seq=*/0);
  expect_close(continued, std::vector<float>(uninterrupted.begin() + size_t(n) * n_vocab_, uninterrupted.end()),
               "restored and continued");
  // copy (n > 1): a forked slot continues the same way.
  step(0, kTokens, 0, n);
  state_->copy(0, 3);
  EXPECT_EQ(state_->snapshot(3).values, state_->snapshot(0).values);
  const std::vector<float> forked = step(3, kTokens, n, 4, /*kv_seq=*/0);
  expect_close(forked, std::vector<float>(uninterrupted.begin() + size_t(n) * n_vocab_,
                                          uninterrupted.begin() + size_t(n + 4) * n_vocab_), "forked slot");
}

TEST_F(HybridInvariants, StateSizeAndResetAndZeroStartAtPositionZero) {
  // 3 delta-net layers x ((K-1) * conv_dim + value heads * S * S) floats.
  EXPECT_EQ(RecurrentState::state_bytes(model_->config()), 3 * ((4 - 1) * 512 + 4 * 64 * 64) * 4);
  step(0, kOther, 0, 7);
  state_->reset(0);
  for (float v : state_->snapshot(0).values) ASSERT_EQ(v, 0.0f);
  // A sequence at position 0 starts from zero whatever its slot held.
  const std::vector<float> fresh = step(1, kTokens, 0, 6);
  step(2, kOther, 0, 9);
  expect_close(step(2, kTokens, 0, 6), fresh, "position 0 ignores the slot's old state");
}

TEST_F(HybridInvariants, StateBuffersStartOnCacheLinesAndPrefaultZeroesBoth) {
  // Every layer's conv window and delta-rule state (so every head: 64 x 64 floats) of both
  // buffers of every slot start on a 64-byte line: the kernels' vector rows never split one.
  state_->set_keep_undo(true);  // steps that swap the two buffers
  for (int32_t slot = 0; slot < state_->n_slots(); ++slot) {
    for (int pass = 0; pass < 2; ++pass) {  // the step's input and output buffers, then swapped
      state_->begin_step(slot);
      for (int32_t l = 0; l < state_->n_layers(); ++l) {
        for (const float* p : {state_->step_input(slot, l), static_cast<const float*>(state_->step_output(slot, l))}) {
          EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "slot " << slot << " layer " << l;
          EXPECT_EQ(reinterpret_cast<uintptr_t>(p + state_->conv_floats(l)) % 64, 0u) << "slot " << slot << " layer " << l;
        }
      }
    }
  }
  // prefault: both buffers zero, nothing to roll back.
  step(0, kOther, 0, 7);
  step(0, kOther, 7, 1);  // both buffers of slot 0 hold states now
  state_->prefault(0);
  EXPECT_FALSE(state_->rollback(0));
  for (float v : state_->snapshot(0).values) ASSERT_EQ(v, 0.0f);
  state_->begin_step(0);  // the other buffer is the current one now
  for (float v : state_->snapshot(0).values) ASSERT_EQ(v, 0.0f) << "the other buffer is zero too";
}

// What the server makes for a dense hybrid (nothing rolls its steps back): one buffer a slot,
// half the memory, the same logits bit for bit as the double-buffered pool (in-place steps
// both). A MoE hybrid's slots keep two (MoBiLE's little pass may be undone).
TEST_F(HybridInvariants, ADenseHybridsSlotsHoldOneBufferAndGiveTheSameLogits) {
  const ModelConfig& c = model_->config();
  ASSERT_EQ(RecurrentState::undo_for(c), RecurrentState::Undo::kNone);
  EXPECT_EQ(RecurrentState::slot_bytes(c), RecurrentState::state_bytes(c));
  const std::vector<float> double_buffered = run_chunked(0, kTokens, {5, 1});

  RecurrentState single(c, kSlots, RecurrentState::undo_for(c));
  EXPECT_EQ(single.undo(), RecurrentState::Undo::kNone);
  for (int32_t slot = 1; slot < kSlots; ++slot) {
    EXPECT_EQ(single.current(slot, 0) - single.current(slot - 1, 0), single.state_floats()) << "slot " << slot;
  }
  forward_->set_recurrent_state(&single);
  const std::vector<float> one_buffer = run_chunked(0, kTokens, {5, 1});
  single.begin_step(0);
  EXPECT_EQ(single.step_input(0, 0), single.step_output(0, 0)) << "a step updates the state in place";
  EXPECT_FALSE(single.rollback(0));
  forward_->set_recurrent_state(state_.get());
  EXPECT_EQ(one_buffer, double_buffered);

  auto moe = Model::open(spillway::test_paths::testdata() + "/models/qwen35moe-tiny-peaked-q8_0.gguf");
  ASSERT_TRUE(moe.ok()) << moe.error().message;
  const ModelConfig& mc = (*moe)->config();
  EXPECT_EQ(RecurrentState::undo_for(mc), RecurrentState::Undo::kOneStep);
  EXPECT_EQ(RecurrentState::slot_bytes(mc), 2 * RecurrentState::state_bytes(mc));
  EXPECT_GT(RecurrentState::state_bytes(mc), 0);
}

TEST_F(HybridInvariants, ForwardErrorsAreValues) {
  ForwardBatch batch;
  batch.add_sequence(kTokens.data(), 3, 0, blocks(0));
  batch.logit_rows.push_back(2);
  auto no_slot = forward_->execute(batch);
  ASSERT_FALSE(no_slot.ok());
  EXPECT_NE(no_slot.error().message.find("slot"), std::string::npos) << no_slot.error().message;
  batch.sequences[0].state_slot = kSlots;
  EXPECT_FALSE(forward_->execute(batch).ok());
  batch.sequences[0].state_slot = 0;
  batch.add_sequence(kOther.data(), 2, 0, blocks(1));
  batch.sequences[1].state_slot = 0;
  auto shared = forward_->execute(batch);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().message.find("share"), std::string::npos) << shared.error().message;

  ForwardPass no_pool(*model_, *kv_, pool_, 8, 64);
  ForwardBatch one;
  one.add_sequence(kTokens.data(), 1, 0, blocks(0));
  one.sequences[0].state_slot = 0;
  EXPECT_FALSE(no_pool.execute(one).ok());
}

TEST(HybridModelFile, LegacySsmInLayoutIsALoadErrorNamingTheTensor) {
  auto source = open_model_source(model_path());
  ASSERT_TRUE(source.ok()) << source.error().message;
  ModelSource::Contents c;
  c.path = (*source)->path();
  c.files = (*source)->files();
  c.metadata = (*source)->metadata();
  c.tensors = (*source)->tensors();
  for (TensorInfo& t : c.tensors) {
    if (t.name == "blk.1.attn_qkv.weight") t.name = "blk.1.ssm_in.weight";
  }
  auto model = Model::load(std::make_unique<ModelSource>(std::move(c)));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("blk.1.ssm_in.weight"), std::string::npos) << model.error().message;
  EXPECT_NE(model.error().message.find("qwen35-tiny-peaked-f16.gguf"), std::string::npos) << model.error().message;
}

// make-demo-model's qwen35 layout loads, and its streamed-in-chunks prefill equals its
// token-by-token decode. Returns the config for the caller's shape checks.
std::unique_ptr<Model> check_demo_model(const tools::DemoModelOptions& o) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("spillway-qwen35-demo-" + std::to_string(::getpid()) + ".gguf")).string();
  EXPECT_TRUE(tools::write_demo_model(path, o).ok());
  auto model = Model::open(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return nullptr;
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_layers, o.layers);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    EXPECT_EQ(c.layers[i].mixer, (i + 1) % 4 == 0 ? MixerKind::Attention : MixerKind::GatedDeltaNet) << i;
  }
  kernels::ThreadPool pool(2);
  KvCache kv(c, 16, 4, kernels::DType::F32);
  RecurrentState state(c, 1);
  ForwardPass forward(**model, kv, pool, 64, 64);
  forward.set_recurrent_state(&state);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back(300 + (i * 37) % 250);
  const std::vector<int32_t> blocks = {0, 1, 2, 3};
  auto run = [&](int32_t chunk) {
    std::vector<float> all;
    for (int32_t pos = 0; pos < 40; pos += chunk) {
      ForwardBatch b;
      const int32_t n = std::min(chunk, 40 - pos);
      b.add_sequence(tokens.data() + pos, n, pos, blocks);
      b.sequences[0].state_slot = 0;
      for (int32_t i = 0; i < n; ++i) b.logit_rows.push_back(i);
      auto r = forward.execute(b);
      EXPECT_TRUE(r.ok());
      if (r.ok()) all.insert(all.end(), r->begin(), r->end());
    }
    return all;
  };
  const std::vector<float> prefill = run(40), decode = run(1);
  EXPECT_EQ(prefill.size(), decode.size());
  float scale = 1e-30f, worst = 0;
  for (size_t i = 0; i < std::min(prefill.size(), decode.size()); ++i) {
    scale = std::max(scale, std::abs(prefill[i]));
    worst = std::max(worst, std::abs(prefill[i] - decode[i]));
  }
  EXPECT_LE(worst, 1e-5f * scale);
  return std::move(*model);
}

// The default layout: 3 of 4 layers delta nets (head size 128, the AVX-512 64-column
// blocks), every 4th gated attention.
TEST(HybridDemoModel, Qwen35LayoutLoadsAndDecodeEqualsPrefill) {
  tools::DemoModelOptions o;
  o.architecture = "qwen35";
  o.layers = 8;
  o.dim = 256;
  o.vocab = 600;
  o.type = kernels::DType::Q8_0;
  auto model = check_demo_model(o);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().layers[0].ssm_state, 128);
  EXPECT_EQ(model->config().n_attention_layers(), 2);
}

// Qwen3.5's proportions (--shape qwen35-0.8b, scaled down): attention heads wider than
// dim / heads (key_length), as many delta-net value heads as key heads.
TEST(HybridDemoModel, Qwen35ShapeOverridesLoadAndDecodeEqualsPrefill) {
  tools::DemoModelOptions shaped;
  ASSERT_TRUE(tools::apply_demo_shape("qwen35-0.8b", shaped).ok());
  EXPECT_EQ(shaped.dim, 1024);
  EXPECT_EQ(shaped.layers, 24);
  EXPECT_EQ(shaped.head_dim, 256);
  EXPECT_EQ(shaped.ssm_value_heads, 16);
  EXPECT_TRUE(tools::resolve_demo_model_options(shaped).ok());
  EXPECT_FALSE(tools::apply_demo_shape("qwen35-9b", shaped).ok());
  tools::DemoModelOptions o = shaped;  // the same proportions, small
  o.layers = 4;
  o.dim = 256;
  o.ff = 512;
  o.heads = 2;
  o.kv_heads = 1;
  o.head_dim = 192;
  o.ssm_key_heads = 4;
  o.ssm_value_heads = 4;
  o.ssm_head_dim = 64;
  o.vocab = 600;
  o.type = kernels::DType::Q8_0;
  auto model = check_demo_model(o);
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.head_dim, 192);
  EXPECT_EQ(c.rope_dim, 48);
  EXPECT_EQ(c.layers[0].ssm_key_heads, 4);
  EXPECT_EQ(c.layers[0].ssm_value_heads, 4);
  EXPECT_EQ(c.layers[0].ssm_state, 64);
  // Bad combinations are errors, not files.
  o.ssm_value_heads = 6;
  EXPECT_FALSE(tools::resolve_demo_model_options(o).ok());
  o.ssm_value_heads = 4;
  o.architecture = "llama";
  EXPECT_FALSE(tools::resolve_demo_model_options(o).ok());
}

}  // namespace
}  // namespace spillway::engine
