// Golden generations from llama.cpp (../shared/testdata/golden, see its README):
// - teacher-forced: every step's top-5 probabilities within tolerance of llama.cpp's,
//   argmax equal wherever llama.cpp's top1-top2 gap is not a near-tie;
// - free-running greedy decoding reproduces llama.cpp's ids (quantized models: up to the
//   first near-tie, where other rounding may legitimately flip the choice);
// - a prompt decoded inside a batch of other sequences gives the same ids as alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "tools/generator.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

using namespace tools;  // the demo model and generator the tests run

struct GoldenCase {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;
  std::string text;
  // top5[i]: (id, p, logprob), best first
  std::vector<std::vector<std::tuple<int32_t, double, double>>> top5;
};

struct GoldenModel {
  const char* model_file;
  const char* golden_file;
  bool quantized;
};

std::vector<GoldenCase> read_golden(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    GoldenCase c;
    c.prompt = j["prompt"];
    c.prompt_tokens = j["prompt_tokens"].get<std::vector<int32_t>>();
    c.tokens = j["tokens"].get<std::vector<int32_t>>();
    c.text = j["text"];
    for (const auto& step : j["top5"]) {
      std::vector<std::tuple<int32_t, double, double>> s;
      for (const auto& e : step) s.emplace_back(e["id"], e["p"], e["logprob"]);
      c.top5.push_back(std::move(s));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

using spillway::test_paths::testdata;

// Tolerances from the issue: F32/F16 top-5 within 0.01 and exact ids; quantized top-5
// within 0.1 and ids compared only while llama.cpp's top1-top2 gap is >= 0.3 nats.
double probability_tolerance(const GoldenModel& m) { return m.quantized ? 0.1 : 0.01; }
double near_tie_gap(const GoldenModel& m) { return m.quantized ? 0.3 : 0.0; }

double gap(const GoldenCase& c, size_t step) {
  return std::get<2>(c.top5[step][0]) - std::get<2>(c.top5[step][1]);
}

std::vector<double> softmax(std::span<const float> logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(double(logits[i]) - max_logit);
  for (double& x : p) x /= sum;
  return p;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

class GoldenTest : public ::testing::TestWithParam<GoldenModel> {
 protected:
  void SetUp() override {
    auto model = Model::open(testdata(std::string("models/") + GetParam().model_file));
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    auto tok = Tokenizer::from_metadata(model_->source().metadata(), GetParam().model_file);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tokenizer_ = std::move(*tok);
    cases_ = read_golden(testdata(std::string("golden/") + GetParam().golden_file));
    ASSERT_EQ(cases_.size(), 5u);
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<GoldenCase> cases_;
  kernels::ThreadPool pool_{2};
};

TEST_P(GoldenTest, PromptTokenization) {
  for (const auto& c : cases_) {
    EXPECT_EQ(tokenizer_->encode(c.prompt, /*add_special=*/true, /*parse_special=*/false),
              c.prompt_tokens)
        << "prompt: " << c.prompt;
  }
}

TEST_P(GoldenTest, TeacherForcedProbabilities) {
  const GoldenModel& gm = GetParam();
  const int32_t n_vocab = model_->config().n_vocab;
  for (const auto& c : cases_) {
    std::vector<int32_t> seq = c.prompt_tokens;
    seq.insert(seq.end(), c.tokens.begin(), c.tokens.end() - 1);
    const int32_t ctx = static_cast<int32_t>(seq.size());
    KvCache kv(model_->config().n_layers, model_->config().n_kv_heads, model_->config().head_dim,
               16, (ctx + 15) / 16);
    ForwardPass forward(*model_, kv, pool_, ctx, ctx);
    std::vector<int32_t> blocks(kv.n_blocks());
    for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;
    ForwardBatch batch;
    batch.add_sequence(seq.data(), ctx, 0, blocks);
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      batch.logit_rows.push_back(static_cast<int32_t>(c.prompt_tokens.size() + i - 1));
    }
    auto result = forward.execute(batch);
    ASSERT_TRUE(result.ok()) << result.error().message;
    const std::span<const float> logits = *result;
    ASSERT_EQ(logits.size(), c.tokens.size() * n_vocab);

    double worst = 0;
    for (size_t step = 0; step < c.tokens.size(); ++step) {
      auto row = logits.subspan(step * n_vocab, n_vocab);
      const std::vector<double> p = softmax(row);
      for (const auto& [id, golden_p, _] : c.top5[step]) {
        const double diff = std::abs(p[id] - golden_p);
        worst = std::max(worst, diff);
        EXPECT_LE(diff, probability_tolerance(gm))
            << c.prompt << " step " << step << " id " << id << " p " << p[id] << " golden "
            << golden_p;
      }
      if (gap(c, step) > std::max(near_tie_gap(gm), 0.02)) {
        EXPECT_EQ(argmax(row), c.tokens[step]) << c.prompt << " step " << step;
      }
    }
    RecordProperty("worst_top5_diff_" + std::to_string(&c - cases_.data()), std::to_string(worst));
  }
}

// Steps of a free-running generation whose ids must match: all of them, or for quantized
// models those before llama.cpp's first near-tie (after it the sequences may diverge).
size_t comparable_steps(const GoldenModel& gm, const GoldenCase& c) {
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    if (gap(c, i) < near_tie_gap(gm)) return i;
  }
  return c.tokens.size();
}

TEST_P(GoldenTest, GreedyGenerationMatches) {
  const GoldenModel& gm = GetParam();
  Generator generator(*model_, pool_, 1024);
  for (const auto& c : cases_) {
    GenerateOptions opt;
    opt.max_tokens = static_cast<int32_t>(c.tokens.size());
    opt.sampling.temperature = 0;
    opt.stop_at_end_of_generation = false;
    auto r = generator.generate(c.prompt_tokens, opt, tokenizer_.get());
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->tokens.size(), c.tokens.size());
    const size_t n = comparable_steps(gm, c);
    if (n < c.tokens.size()) {
      std::cout << "[ note ] " << gm.model_file << " \"" << c.prompt << "\": llama.cpp's step "
                << n << " is a near-tie (gap " << gap(c, n)
                << " nats); ids compared before it only\n";
    }
    EXPECT_EQ(std::vector<int32_t>(r->tokens.begin(), r->tokens.begin() + n),
              std::vector<int32_t>(c.tokens.begin(), c.tokens.begin() + n))
        << "prompt: " << c.prompt;
    if (n == c.tokens.size()) {
      EXPECT_EQ(tokenizer_->decode(r->tokens, true), c.text) << "prompt: " << c.prompt;
    }
  }
}

// All prompts decoded together, one token per sequence per step, sharing each forward:
// each must produce exactly what it produces alone.
TEST_P(GoldenTest, BatchedGreedyEqualsAlone) {
  const int32_t n_vocab = model_->config().n_vocab;
  const int32_t steps = 32, block = 16;
  std::vector<std::vector<int32_t>> alone;
  {
    Generator generator(*model_, pool_, 1024);
    for (const auto& c : cases_) {
      GenerateOptions opt;
      opt.max_tokens = steps;
      opt.sampling.temperature = 0;
      opt.stop_at_end_of_generation = false;
      auto r = generator.generate(c.prompt_tokens, opt, nullptr);
      ASSERT_TRUE(r.ok());
      alone.push_back(r->tokens);
    }
  }

  const int32_t blocks_per_seq = (1024 + block - 1) / block;
  KvCache kv(model_->config().n_layers, model_->config().n_kv_heads, model_->config().head_dim,
             block, blocks_per_seq * static_cast<int32_t>(cases_.size()));
  ForwardPass forward(*model_, kv, pool_, 1024, 1024);
  std::vector<std::vector<int32_t>> tables(cases_.size()), history(cases_.size()), out(cases_.size());
  for (size_t s = 0; s < cases_.size(); ++s) {
    // Interleave the block ids of the sequences so tables are not contiguous.
    for (int32_t b = 0; b < blocks_per_seq; ++b) {
      tables[s].push_back(b * static_cast<int32_t>(cases_.size()) + static_cast<int32_t>(s));
    }
    history[s] = cases_[s].prompt_tokens;
  }
  for (int32_t step = 0; step < steps; ++step) {
    ForwardBatch batch;
    for (size_t s = 0; s < cases_.size(); ++s) {
      // Step 0 feeds each whole prompt (a mixed-length prefill batch); later steps one token.
      const size_t start = step == 0 ? 0 : history[s].size() - 1;
      const int32_t n = static_cast<int32_t>(history[s].size() - start);
      batch.add_sequence(history[s].data() + start, n, static_cast<int64_t>(start), tables[s]);
      batch.logit_rows.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
    }
    auto result = forward.execute(batch);
    ASSERT_TRUE(result.ok()) << result.error().message;
    const std::span<const float> logits = *result;
    for (size_t s = 0; s < cases_.size(); ++s) {
      const int32_t next = argmax(logits.subspan(s * n_vocab, n_vocab));
      history[s].push_back(next);
      out[s].push_back(next);
    }
  }
  for (size_t s = 0; s < cases_.size(); ++s) {
    EXPECT_EQ(out[s], alone[s]) << "prompt: " << cases_[s].prompt;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GoldenTest,
    ::testing::Values(GoldenModel{"stories260K.gguf", "stories260K.jsonl", false},
                      GoldenModel{"stories260K-f16.gguf", "stories260K-f16.jsonl", false},
                      GoldenModel{"stories260K-q8_0.gguf", "stories260K-q8_0.jsonl", true},
                      GoldenModel{"llama-tiny-peaked-f16.gguf", "llama-tiny-peaked-f16.jsonl", false},
                      // llama-quantize's K-quant mixes: Q4_K + Q6_K; Q5_K + Q6_K; Q3_K + Q4_K + Q5_K + Q6_K.
                      GoldenModel{"llama-tiny-peaked-q4_k_m.gguf", "llama-tiny-peaked-q4_k_m.jsonl", true},
                      GoldenModel{"llama-tiny-peaked-q5_k_m.gguf", "llama-tiny-peaked-q5_k_m.jsonl", true},
                      GoldenModel{"llama-tiny-peaked-q3_k_m.gguf", "llama-tiny-peaked-q3_k_m.jsonl", true}),
    [](const auto& info) {
      std::string name = info.param.model_file;
      name = name.substr(0, name.find(".gguf"));
      std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(ch); }, '_');
      return name;
    });

}  // namespace
}  // namespace spillway::engine
