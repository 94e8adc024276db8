// Masked-diffusion golden records from llama.cpp (../shared/testdata/golden-wave2/diffusion,
// README there: the algorithm, the record format and the tolerances):
// - teacher-forced: rebuild the canvas before each recorded step, one forward, and the
//   argmax at each committed position must be the recorded token wherever llama.cpp's
//   top1 - top2 logit gap exceeds 0.3;
// - the whole reference sampler from the prompt: the final canvas equals llama.cpp's in at
//   least as many records as the README's independent numpy forward got (llada and dream
//   18/20, llada-moe 17/20), and where
//   it differs the first differing commit is at a recorded near-tie (gap < 0.3);
// - the commit schedule (positions per step) matches the record exactly.
// The ISA is whatever SPILLWAY_ISA selects; tests/CMakeLists.txt runs this file once per ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/kv_cache.h"
#include "kernels/cpu_features.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

using diffusion::Canvas;
using diffusion::DiffusionParams;

struct GoldenStep {
  std::vector<int32_t> positions, tokens;
  std::vector<double> gap;  // top1_logit - top2_logit per position
};

struct DiffusionRecord {
  std::string label;
  std::vector<int32_t> prompt_tokens;
  int32_t max_length = 0;
  int32_t mask_token = 0;
  bool shift_logits = false;
  DiffusionParams params;
  std::vector<int32_t> canvas;
  std::vector<GoldenStep> steps;
  int32_t n_steps_run = 0;
};

using spillway::test_paths::testdata;

std::vector<DiffusionRecord> read_records(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<DiffusionRecord> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    DiffusionRecord r;
    r.label = std::string(j["case"]) + " '" + std::string(j["prompt"]).substr(0, 20) + "'";
    r.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    r.max_length = j["max_length"];
    r.mask_token = j["mask_token_id"];
    r.shift_logits = j["shift_logits"];
    const auto& p = j["params"];
    r.params.algorithm = static_cast<diffusion::Algorithm>(p["algorithm"].get<int>());
    r.params.schedule = static_cast<diffusion::Schedule>(p["schedule"].get<int>());
    r.params.steps = p["steps_param"];
    r.params.block_length = p["block_length"];
    r.params.eps = p["eps"];
    r.params.seed = p["seed"];
    r.params.temperature = p["temperature"];
    r.params.top_k = p["top_k"];
    r.params.top_p = p["top_p"];
    r.canvas = j["canvas"].get<std::vector<int32_t>>();
    r.n_steps_run = j["n_steps_run"];
    for (const auto& s : j["steps"]) {
      GoldenStep g;
      g.positions = s["positions"].get<std::vector<int32_t>>();
      g.tokens = s["tokens"].get<std::vector<int32_t>>();
      const auto t1 = s["top1_logit"].get<std::vector<double>>();
      const auto t2 = s["top2_logit"].get<std::vector<double>>();
      for (size_t i = 0; i < t1.size(); ++i) g.gap.push_back(t1[i] - t2[i]);
      r.steps.push_back(std::move(g));
    }
    out.push_back(std::move(r));
  }
  return out;
}

struct DiffusionGoldenModel {
  const char* model_file;
  const char* golden_file;
  int min_exact_canvases;  // the README's numpy reference
};

constexpr double kNearTie = 0.3;

class DiffusionGolden : public ::testing::TestWithParam<DiffusionGoldenModel> {};

// A forward with F32 K/V (llama.cpp's no-cache diffusion graph keeps K/V in F32) sized for
// the longest canvas of the file.
struct Engine {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  std::unique_ptr<ForwardPass> forward;
  std::vector<int32_t> blocks;
};

Engine make_engine(const std::string& path, int32_t max_length, kernels::ThreadPool& pool) {
  Engine e;
  auto m = Model::open(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return e;
  e.model = std::move(*m);
  const ModelConfig& cfg = e.model->config();
  const int32_t block = 16, n_blocks = (max_length + block - 1) / block;
  e.kv = std::make_unique<KvCache>(cfg, block, n_blocks, kernels::DType::F32);
  e.forward = std::make_unique<ForwardPass>(*e.model, *e.kv, pool, max_length, max_length);
  for (int32_t i = 0; i < n_blocks; ++i) e.blocks.push_back(i);
  return e;
}

TEST_P(DiffusionGolden, ModelKeys) {
  const DiffusionGoldenModel& gm = GetParam();
  auto records = read_records(testdata(std::string("golden-wave2/diffusion/") + gm.golden_file));
  ASSERT_FALSE(records.empty());
  auto m = Model::open(testdata(std::string("models/") + gm.model_file));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& cfg = (*m)->config();
  EXPECT_TRUE(cfg.is_diffusion());
  EXPECT_EQ(cfg.mask_token_id, records[0].mask_token);
  EXPECT_EQ(cfg.shift_logits, records[0].shift_logits);
  for (const LayerSpec& s : cfg.layers) EXPECT_EQ(s.attention, AttentionKind::Bidirectional);
}

TEST_P(DiffusionGolden, TeacherForcedArgmax) {
  const DiffusionGoldenModel& gm = GetParam();
  auto records = read_records(testdata(std::string("golden-wave2/diffusion/") + gm.golden_file));
  ASSERT_FALSE(records.empty());
  int32_t max_length = 0;
  for (const auto& r : records) max_length = std::max(max_length, r.max_length);
  kernels::ThreadPool pool(2);
  Engine e = make_engine(testdata(std::string("models/") + gm.model_file), max_length, pool);
  ASSERT_TRUE(e.forward);
  const int32_t n_vocab = e.model->config().n_vocab;

  int checked = 0, mismatches_near_tie = 0;
  for (const DiffusionRecord& r : records) {
    std::vector<int32_t> canvas = r.prompt_tokens;
    canvas.resize(r.max_length, r.mask_token);
    for (size_t n = 0; n < r.steps.size(); ++n) {
      const GoldenStep& st = r.steps[n];
      if (!st.positions.empty()) {
        ForwardBatch batch;
        const int s = batch.add_sequence(canvas.data(), r.max_length, 0, e.blocks);
        batch.sequences[s].mode = AttentionMode::Canvas;
        batch.sequences[s].canvas_begin = 0;
        batch.sequences[s].canvas_end = r.max_length;
        for (int32_t p : st.positions) batch.logit_rows.push_back(r.shift_logits ? std::max(p - 1, 0) : p);
        auto logits = e.forward->execute(batch);
        ASSERT_TRUE(logits.ok()) << logits.error().message;
        for (size_t i = 0; i < st.positions.size(); ++i) {
          const float* row = logits->data() + i * n_vocab;
          const auto got = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
          ++checked;
          if (got == st.tokens[i]) continue;
          if (st.gap[i] <= kNearTie) {
            ++mismatches_near_tie;
            continue;
          }
          ADD_FAILURE() << gm.model_file << " " << r.label << " step " << n << " position " << st.positions[i]
                        << ": argmax " << got << ", llama.cpp " << st.tokens[i] << " (gap " << st.gap[i] << ")";
        }
      }
      for (size_t i = 0; i < st.positions.size(); ++i) canvas[st.positions[i]] = st.tokens[i];
    }
    EXPECT_EQ(canvas, r.canvas) << r.label << ": the recorded steps rebuild the recorded canvas";
  }
  EXPECT_EQ(checked, 704);
  std::printf("[ %s, isa %s ] teacher-forced: %d committed tokens, %d near-tie mismatches\n", gm.model_file,
              std::string(kernels::isa_name(kernels::active_isa())).c_str(), checked, mismatches_near_tie);
}

TEST_P(DiffusionGolden, WholeAlgorithmFromPrompt) {
  const DiffusionGoldenModel& gm = GetParam();
  auto records = read_records(testdata(std::string("golden-wave2/diffusion/") + gm.golden_file));
  ASSERT_FALSE(records.empty());
  int32_t max_length = 0;
  for (const auto& r : records) max_length = std::max(max_length, r.max_length);
  kernels::ThreadPool pool(2);
  Engine e = make_engine(testdata(std::string("models/") + gm.model_file), max_length, pool);
  ASSERT_TRUE(e.forward);

  int exact = 0;
  for (const DiffusionRecord& r : records) {
    ASSERT_TRUE(diffusion::validate(r.params, static_cast<int32_t>(r.prompt_tokens.size()), r.max_length).ok());
    Canvas canvas(r.prompt_tokens, r.max_length, r.mask_token, r.shift_logits, r.params);
    // Compare every committed step with the record until the first difference.
    size_t step = 0;
    bool diverged = false;
    auto observer = [&](const Canvas& c) {
      // Empty-block steps are in the record but produce no commit here.
      while (step < r.steps.size() && r.steps[step].positions.empty()) ++step;
      if (diverged) return;
      ASSERT_LT(step, r.steps.size()) << r.label << ": more committed steps than llama.cpp";
      const GoldenStep& g = r.steps[step];
      EXPECT_EQ(c.last_positions(), g.positions) << r.label << " step " << step << ": commit schedule";
      if (c.last_tokens() != g.tokens) {
        diverged = true;
        for (size_t i = 0; i < g.tokens.size() && i < c.last_tokens().size(); ++i) {
          if (c.last_tokens()[i] == g.tokens[i]) continue;
          EXPECT_LT(g.gap[i], kNearTie) << r.label << " step " << step << " position " << g.positions[i]
                                        << ": first difference (" << c.last_tokens()[i] << " vs llama.cpp "
                                        << g.tokens[i] << ") is not at a near-tie";
          break;
        }
      }
      ++step;
    };
    Status st = diffusion::run_canvas(*e.forward, canvas, e.blocks, observer);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(canvas.stats().steps_run, r.n_steps_run) << r.label;
    EXPECT_EQ(canvas.stats().forwards + canvas.stats().empty_steps, r.n_steps_run) << r.label;
    EXPECT_EQ(canvas.stats().committed, r.max_length - static_cast<int32_t>(r.prompt_tokens.size())) << r.label;
    if (canvas.tokens() == r.canvas) {
      ++exact;
    } else {
      EXPECT_TRUE(diverged) << r.label << ": canvas differs without a differing step";
    }
  }
  std::printf("[ %s, isa %s ] whole algorithm: %d/%zu canvases equal llama.cpp's\n", gm.model_file,
              std::string(kernels::isa_name(kernels::active_isa())).c_str(), exact, records.size());
  EXPECT_GE(exact, gm.min_exact_canvases);
}

// The approximate block cache (DiffusionParams::block_cache): with one step per block every
// step forwards the whole canvas, so the canvases are bit-identical to the reference ("all
// rows live = full recompute"); with several steps per block, the later steps forward only
// the block's rows, fewer rows in all, and every position still gets committed.
TEST_P(DiffusionGolden, BlockCacheWithAllRowsLiveEqualsTheReference) {
  const DiffusionGoldenModel& gm = GetParam();
  auto records = read_records(testdata(std::string("golden-wave2/diffusion/") + gm.golden_file));
  ASSERT_FALSE(records.empty());
  int32_t max_length = 0;
  for (const auto& r : records) max_length = std::max(max_length, r.max_length);
  kernels::ThreadPool pool(2);
  Engine e = make_engine(testdata(std::string("models/") + gm.model_file), max_length, pool);
  ASSERT_TRUE(e.forward);
  int compared = 0;
  for (const DiffusionRecord& r : records) {
    if (r.params.schedule != diffusion::Schedule::Block || r.params.block_length != 8) continue;
    const auto n_prompt = static_cast<int32_t>(r.prompt_tokens.size());
    DiffusionParams one = r.params;
    one.steps = r.max_length / 8;  // one step per block
    auto run = [&](const DiffusionParams& p) {
      Canvas c(r.prompt_tokens, r.max_length, r.mask_token, r.shift_logits, p);
      EXPECT_TRUE(diffusion::run_canvas(*e.forward, c, e.blocks).ok());
      return std::make_pair(c.tokens(), c.stats());
    };
    DiffusionParams one_cached = one;
    one_cached.block_cache = true;
    const auto [plain, plain_stats] = run(one);
    const auto [cached, cached_stats] = run(one_cached);
    EXPECT_EQ(cached, plain) << r.label;
    EXPECT_EQ(cached_stats.rows_evaluated, plain_stats.rows_evaluated) << r.label;
    EXPECT_EQ(cached_stats.cached_forwards, 0) << r.label;

    DiffusionParams many = r.params;  // 4 steps per block
    many.block_cache = true;
    const auto [tokens, stats] = run(many);
    EXPECT_GT(stats.cached_forwards, 0) << r.label;
    EXPECT_LT(stats.rows_evaluated, int64_t{stats.forwards} * r.max_length) << r.label;
    EXPECT_EQ(stats.committed, r.max_length - n_prompt) << r.label;
    for (int32_t t : tokens) EXPECT_NE(t, r.mask_token) << r.label;
    ++compared;
  }
  EXPECT_EQ(compared, 5);
}

INSTANTIATE_TEST_SUITE_P(
    Wave2, DiffusionGolden,
    ::testing::Values(DiffusionGoldenModel{"llada-tiny-peaked-f16.gguf", "llada-tiny-peaked-f16.jsonl", 18},
                      DiffusionGoldenModel{"dream-tiny-peaked-f16.gguf", "dream-tiny-peaked-f16.jsonl", 18},
                      DiffusionGoldenModel{"llada-moe-tiny-peaked-f16.gguf", "llada-moe-tiny-peaked-f16.jsonl", 17}),
    [](const ::testing::TestParamInfo<DiffusionGoldenModel>& info) {
      const std::string file = info.param.model_file;
      std::string name;
      for (char ch : file.substr(0, file.find("-tiny"))) {
        if (std::isalnum(static_cast<unsigned char>(ch))) name += ch;
      }
      return name;  // llada, dream, lladamoe
    });

}  // namespace
}  // namespace spillway::engine
