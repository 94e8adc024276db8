// The turbo techniques of issue #17 on their own, each against the reference path:
// - EOS tail-drop: positions after a committed end token become padding and are never
//   sampled; off (or no end ids) = the reference byte for byte;
// - exact hierarchical top-K: VocabTopK = a partial sort of the whole row (ties to the lower
//   id), its softmax normalizer = the plain path's bit for bit, RowSampler's tokens and
//   confidences = the plain path's, and whole canvases on a real model identical;
// - repair: one full forward after the canvas drains re-argmaxes every generated position
//   (checked against a separate full forward), nothing streams before it; off = reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/diffusion/row_sampler.h"
#include "engine/diffusion/vocab_top_k.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "kernels/thread_pool.h"
#include "tools/demo_model.h"
#include "support/paths.h"

namespace spillway::engine::diffusion {
namespace {

constexpr int32_t kVocab = 8, kMask = 7, kEos = 6;

// Rows where position p prefers token want[p] with probability about prob[p] (the rest on
// token 0).
std::vector<float> rows_for(std::span<const int32_t> rows, const std::vector<int32_t>& want,
                            const std::vector<float>& prob) {
  std::vector<float> out(rows.size() * kVocab, -1e9f);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t p = rows[i];
    out[i * kVocab + want[p]] = std::log(prob[p]);
    if (want[p] != 0) out[i * kVocab + 0] = std::log(1.0f - prob[p]);
  }
  return out;
}

struct Trace {
  std::vector<std::vector<int32_t>> rows;  // rows of each step
  std::vector<int32_t> tokens;
  CanvasStats stats;
};

Trace drive(Canvas& c, const std::vector<int32_t>& want, const std::vector<float>& prob) {
  Trace t;
  for (;;) {
    auto rows = c.begin_step();
    if (c.done()) break;
    t.rows.emplace_back(rows.begin(), rows.end());
    auto logits = rows_for(rows, want, prob);
    c.commit(logits.data(), kVocab);
    if (t.rows.size() > 100) break;
  }
  t.tokens = c.tokens();
  t.stats = c.stats();
  return t;
}

// Canvas of 2 prompt + 14: blocks of 7 (reference: 7 steps per block, one commit each).
DiffusionParams block_params() {
  DiffusionParams p;
  p.schedule = Schedule::Block;
  p.block_length = 7;
  p.blocks_over_canvas = false;
  p.steps = 14;
  return p;
}

// Position 5 predicts EOS with the highest confidence of block 0 (positions 2..8).
const std::vector<int32_t> kWant = {0, 0, 1, 2, 3, kEos, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
const std::vector<float> kProb = {1, 1, 0.6f, 0.7f, 0.8f, 0.99f, 0.5f, 0.55f, 0.65f, 0.6f, 0.6f, 0.6f, 0.6f, 0.6f,
                                  0.6f, 0.6f};
const std::vector<int32_t> kPrompt = {1, 2};
const std::vector<int32_t> kEnds = {kEos};

TEST(DiffusionEosTailDrop, PositionsAfterACommittedEosArePaddingAndNeverSampled) {
  DiffusionParams p = block_params();
  p.eos_tail_drop = true;
  Canvas c(kPrompt, 16, kMask, false, p);
  c.set_end_tokens(kEnds);
  Trace t = drive(c, kWant, kProb);
  // Step 0 commits the EOS at 5 (most confident): 6, 7, 8 and block 1 (9..15) become EOS.
  EXPECT_EQ(c.eos_position(), 5);
  EXPECT_EQ(t.stats.eos_tail_dropped, 3 + 7);
  ASSERT_GE(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0], (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(t.rows[1], (std::vector<int32_t>{2, 3, 4}));  // nothing after the EOS is sampled
  for (size_t s = 1; s < t.rows.size(); ++s) EXPECT_LT(t.rows[s].back(), 5);
  // 2, 3, 4 then commit one per step: 4 forwards in all; the canvas ends without block 1.
  EXPECT_EQ(t.stats.forwards, 4);
  EXPECT_EQ(t.stats.committed, 4);
  for (int32_t pos = 6; pos < 16; ++pos) EXPECT_EQ(t.tokens[pos], kEos) << pos;
  EXPECT_EQ((std::vector<int32_t>(t.tokens.begin() + 2, t.tokens.begin() + 6)), (std::vector<int32_t>{1, 2, 3, kEos}));
  EXPECT_EQ(c.committed_prefix_end(), 16);
  EXPECT_EQ(t.stats.blocks_finished, 1);
  EXPECT_EQ(t.stats.block_forwards, 4);
}

TEST(DiffusionEosTailDrop, OffOrWithoutEndIdsIsTheReferenceByteForByte) {
  const DiffusionParams ref = block_params();
  Canvas a(kPrompt, 16, kMask, false, ref);
  const Trace reference = drive(a, kWant, kProb);
  EXPECT_EQ(reference.stats.forwards, 14);  // the reference denoises every position
  DiffusionParams off = ref;
  off.eos_tail_drop = false;
  Canvas b(kPrompt, 16, kMask, false, off);
  b.set_end_tokens(kEnds);
  DiffusionParams on = ref;
  on.eos_tail_drop = true;
  Canvas c(kPrompt, 16, kMask, false, on);  // no end ids: nothing to drop
  for (Canvas* x : {&b, &c}) {
    const Trace t = drive(*x, kWant, kProb);
    EXPECT_EQ(t.rows, reference.rows);
    EXPECT_EQ(t.tokens, reference.tokens);
    EXPECT_EQ(t.stats.forwards, reference.stats.forwards);
    EXPECT_EQ(t.stats.eos_tail_dropped, 0);
  }
}

TEST(DiffusionEosTailDrop, TurboStopsAtTheEosAndTheRepeatGuardIgnoresThePadding) {
  DiffusionParams p = block_params();
  p.threshold = 0.9f;
  p.eos_tail_drop = true;
  p.repeat_guard = 3;
  Canvas c(kPrompt, 16, kMask, false, p);
  c.set_end_tokens(kEnds);
  const Trace t = drive(c, kWant, kProb);
  EXPECT_EQ(t.stats.forwards, 4);  // EOS (>= 0.9), then the top-1 of 2, 3, 4, one per step
  EXPECT_EQ(t.stats.repeat_guard_trips, 0);
  EXPECT_EQ(c.repeat_stop(), -1);
  EXPECT_EQ(t.stats.forced_top1, 3);
}

// --- exact hierarchical top-K --------------------------------------------------------------

std::vector<float> random_row(std::mt19937& rng, int32_t n, bool ties) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = ties ? std::round(d(rng)) : d(rng);
  return x;
}

TEST(DiffusionExactTopK, EqualsAPartialSortOfTheWholeRow) {
  std::mt19937 rng(5);
  VocabTopK h;
  for (int32_t n : {1, 7, 64, 65, 1000, 32001}) {
    for (bool ties : {false, true}) {
      const auto x = random_row(rng, n, ties);
      std::vector<std::pair<float, int32_t>> all;
      for (int32_t i = 0; i < n; ++i) all.emplace_back(x[i], i);
      std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      for (int32_t k : {1, 2, 40, 200}) {
        std::vector<std::pair<float, int32_t>> got;
        h.top_k(x.data(), n, k, got);
        const int32_t kk = std::min(k, n);
        const std::vector<std::pair<float, int32_t>> want(all.begin(), all.begin() + kk);
        ASSERT_EQ(got, want) << n << " " << k;
        if (n > 1000 && k <= 2 && !ties) {
          EXPECT_LT(h.chunks_scanned(), 8) << "the refine scans a few chunks";
        }
        // The normalizer: the plain path's order and arithmetic, bit for bit.
        const int32_t best = all[0].second;
        std::vector<float> order(x);
        std::swap(order[0], order[best]);
        double plain = 0;
        for (float v : order) plain += std::exp(v - all[0].first);
        ASSERT_EQ(h.softmax_sum(x.data(), n, all[0].first, best), plain) << n;
      }
    }
  }
  // Chunks far below the max (terms exactly 0) are skipped without changing the sum.
  std::vector<float> peaked(4096, -500.0f);
  peaked[3000] = 10.0f;
  peaked[17] = 9.0f;
  std::vector<std::pair<float, int32_t>> got;
  h.top_k(peaked.data(), 4096, 1, got);
  EXPECT_EQ(got[0].second, 3000);
  EXPECT_EQ(h.softmax_sum(peaked.data(), 4096, 10.0f, 3000), 1.0 + double(std::exp(-1.0f)));
}

TEST(DiffusionExactTopK, RowSamplerMatchesThePlainPath) {
  std::mt19937 gen(9);
  for (Algorithm alg : {Algorithm::Confidence, Algorithm::Margin, Algorithm::Random, Algorithm::Entropy}) {
    for (int32_t top_k : {0, 40}) {
      for (float temp : {0.0f, 0.7f}) {
        DiffusionParams plain;
        plain.algorithm = alg;
        plain.top_k = top_k;
        plain.temperature = temp;
        plain.threshold = 0.9f;  // turbo: p_token too
        DiffusionParams fast = plain;
        fast.exact_top_k = true;
        RowSampler a(plain), b(fast);
        std::mt19937 ra(3), rb(3);
        for (int row = 0; row < 20; ++row) {
          const auto x = random_row(gen, 5000, row % 2 == 1);
          const RowChoice ca = a.choose(x.data(), 5000, ra);
          const RowChoice cb = b.choose(x.data(), 5000, rb);
          const std::string where = std::string(algorithm_name(alg)) + " top_k " + std::to_string(top_k) +
                                    " temp " + std::to_string(temp) + " row " + std::to_string(row);
          ASSERT_EQ(ca.token, cb.token) << where;
          if (alg == Algorithm::Confidence || alg == Algorithm::Random || top_k > 0) {
            ASSERT_EQ(ca.confidence, cb.confidence) << where;  // bit for bit
          } else {
            ASSERT_NEAR(ca.confidence, cb.confidence, 1e-6f * std::max(1.0f, std::fabs(ca.confidence))) << where;
          }
          ASSERT_NEAR(ca.p_token, cb.p_token, 1e-6f) << where;
        }
        EXPECT_EQ(ra(), rb()) << "the same RNG draws";
      }
    }
  }
}

using spillway::test_paths::testdata;

struct TinyLlada {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<ForwardPass> forward;
  std::vector<int32_t> table = {0, 1, 2, 3};
  TinyLlada() {
    auto m = Model::open(testdata("models/llada-tiny-peaked-f16.gguf"));
    EXPECT_TRUE(m.ok()) << m.error().message;
    model = std::move(*m);
    kv = std::make_unique<KvCache>(model->config(), 16, 4, kernels::DType::F32);
    pool = std::make_unique<kernels::ThreadPool>(2);
    forward = std::make_unique<ForwardPass>(*model, *kv, *pool, 64, 64);
  }
  Canvas run(const DiffusionParams& p, std::vector<std::vector<int32_t>>* commits = nullptr) {
    const std::vector<int32_t> prompt = {1, 9038, 2501, 263, 931};
    Canvas c(prompt, 40, model->config().mask_token_id, model->config().shift_logits, p);
    Status st = run_canvas(*forward, c, table, [&](const Canvas& x) {
      if (commits) commits->push_back(x.last_positions());
    });
    EXPECT_TRUE(st.ok());
    return c;
  }
};

TEST(DiffusionExactTopK, WholeCanvasesOnARealModelAreIdentical) {
  TinyLlada m;
  for (Algorithm alg : {Algorithm::Confidence, Algorithm::Margin, Algorithm::Random}) {
    for (float threshold : {0.0f, 0.5f}) {
      DiffusionParams p;
      p.block_length = 8;
      p.steps = 20;
      p.top_k = 0;
      p.algorithm = alg;
      p.threshold = threshold;
      std::vector<std::vector<int32_t>> ca, cb;
      const Canvas a = m.run(p, &ca);
      p.exact_top_k = true;
      const Canvas b = m.run(p, &cb);
      EXPECT_EQ(a.tokens(), b.tokens()) << algorithm_name(alg) << " " << threshold;
      EXPECT_EQ(ca, cb) << algorithm_name(alg) << " " << threshold;
    }
  }
}

// --- repair --------------------------------------------------------------------------------

TEST(DiffusionRepair, ReArgmaxesEveryGeneratedPositionAfterTheCanvasDrains) {
  DiffusionParams p = block_params();
  p.repair = true;
  Canvas c(kPrompt, 16, kMask, false, p);
  int32_t steps = 0;
  for (;;) {
    auto rows = c.begin_step();
    ASSERT_FALSE(c.done());
    if (c.repairing()) break;
    EXPECT_EQ(c.committed_prefix_end(), 2) << "nothing is final before the repair";
    auto logits = rows_for(rows, kWant, kProb);
    c.commit(logits.data(), kVocab);
    ++steps;
  }
  EXPECT_EQ(steps, 14);
  const auto before = c.tokens();
  auto rows = c.pending_rows();
  ASSERT_EQ(rows.size(), 14u);
  EXPECT_EQ(rows.front(), 2);
  EXPECT_EQ(rows.back(), 15);
  EXPECT_EQ(c.forward_range().begin, 0);
  EXPECT_EQ(c.forward_range().end, 16);
  std::vector<int32_t> want = kWant;
  want[3] = 4;  // the repair forward now prefers other tokens at 3 and 12
  want[12] = 2;
  auto logits = rows_for(rows, want, kProb);
  c.commit(logits.data(), kVocab);
  EXPECT_TRUE(c.begin_step().empty());
  EXPECT_TRUE(c.done());
  EXPECT_EQ(c.stats().repair_changes, 2);
  EXPECT_EQ(c.stats().repair_forwards, 1);
  EXPECT_EQ(c.stats().forwards, 15);
  EXPECT_EQ(c.stats().committed, 14);
  EXPECT_EQ(c.last_positions(), (std::vector<int32_t>{3, 12}));
  auto expect = before;
  expect[3] = 4;
  expect[12] = 2;
  EXPECT_EQ(c.tokens(), expect);
  EXPECT_EQ(c.committed_prefix_end(), 16);
}

TEST(DiffusionRepair, OnARealModelTheRepairIsTheArgmaxOfAFullForwardAndOffIsTheReference) {
  TinyLlada m;
  DiffusionParams p;
  p.block_length = 8;
  p.steps = 10;  // 5 blocks, 2 steps each: many commits per step, so the repair has work
  p.top_k = 1;
  const Canvas ref = m.run(p);
  DiffusionParams off = p;
  off.repair = false;
  off.eos_tail_drop = false;
  off.exact_top_k = false;
  const Canvas same = m.run(off);
  EXPECT_EQ(same.tokens(), ref.tokens());
  EXPECT_EQ(same.stats().forwards, ref.stats().forwards);
  EXPECT_EQ(same.stats().rows_evaluated, ref.stats().rows_evaluated);

  // The independent check: one full forward over the reference's final canvas, argmax of
  // each generated position's logits row.
  const int32_t V = m.model->config().n_vocab;
  ForwardBatch b;
  const int s = b.add_sequence(ref.tokens().data(), ref.length(), 0, m.table);
  b.sequences[s].mode = AttentionMode::Canvas;
  b.sequences[s].canvas_begin = 0;
  b.sequences[s].canvas_end = ref.length();
  for (int32_t pos = ref.n_prompt(); pos < ref.length(); ++pos) b.logit_rows.push_back(ref.logit_row(pos));
  auto logits = m.forward->execute(b);
  ASSERT_TRUE(logits.ok());
  std::vector<int32_t> expect = ref.tokens();
  int32_t changes = 0;
  for (int32_t pos = ref.n_prompt(); pos < ref.length(); ++pos) {
    const float* row = logits->data() + size_t(pos - ref.n_prompt()) * V;
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + V) - row);
    changes += expect[pos] != best;
    expect[pos] = best;
  }
  p.repair = true;
  const Canvas repaired = m.run(p);
  EXPECT_EQ(repaired.tokens(), expect);
  EXPECT_EQ(repaired.stats().repair_changes, changes);
  EXPECT_EQ(repaired.stats().forwards, ref.stats().forwards + 1);
  EXPECT_EQ(repaired.stats().committed, ref.stats().committed);
}

// --- make-demo-model --arch llada|dream ----------------------------------------------------

TEST(DiffusionDemoModel, LladaAndDreamLoadWithAMaskTokenAndDenoiseACanvas) {
  for (const char* arch : {"llada", "dream"}) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              (std::string("spillway-demo-") + arch + "-" + std::to_string(::getpid()) + ".gguf")).string();
    tools::DemoModelOptions o;
    o.architecture = arch;
    o.layers = 2;
    o.dim = 128;
    o.vocab = 600;
    ASSERT_TRUE(tools::write_demo_model(path, o).ok()) << arch;
    auto m = Model::open(path);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const ModelConfig& cfg = (*m)->config();
    EXPECT_TRUE(cfg.is_diffusion()) << arch;
    EXPECT_EQ(cfg.mask_token_id, 599) << arch;
    EXPECT_EQ(cfg.shift_logits, std::string(arch) == "dream") << arch;
    kernels::ThreadPool pool(2);
    KvCache kv(cfg, 16, 4, kernels::DType::F32);
    ForwardPass forward(**m, kv, pool, 64, 64);
    DiffusionParams p;
    p.block_length = 8;
    p.steps = 32;
    p.blocks_over_canvas = false;
    p.top_k = 0;
    const std::vector<int32_t> prompt = {1, 300, 301, 302};
    Canvas c(prompt, 36, cfg.mask_token_id, cfg.shift_logits, p);
    ASSERT_TRUE(run_canvas(forward, c, {0, 1, 2}).ok());
    EXPECT_TRUE(c.done());
    EXPECT_EQ(c.stats().committed, 32);
    for (int32_t pos = 4; pos < 36; ++pos) {
      EXPECT_NE(c.tokens()[pos], cfg.mask_token_id) << arch << " " << pos;
      EXPECT_GE(c.tokens()[pos], 259) << "the demo vocabulary's text tokens only";
    }
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace spillway::engine::diffusion
