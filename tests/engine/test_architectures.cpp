// Every architecture of the registry against the naive double-precision reference
// (reference_forward.h), on small demo models written by engine/demo_model: the engine's
// batched, paged forward must give the same logits at every position, whether the
// sequence is fed at once, in chunks, or token by token.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "tools/demo_model.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "kernels/thread_pool.h"
#include "reference_forward.h"

namespace spillway::engine {
namespace {

using namespace tools;  // the demo model and generator the tests run

struct ArchCase {
  const char* arch;
  kernels::DType type;
  // Bounds on |logit - reference| over 21 positions x 600 logits (logits are ~±8): its
  // maximum and its root mean square. Float weights: float32 accumulation only. Quantized
  // weights: the engine also rounds activations to 8-bit blocks as llama.cpp does (Q8_0,
  // 32 wide, for Q8_0/Q4_0; Q8_K, 256 wide, for Q4_K/Q6_K): step d = amax/127 ~ 0.017
  // (0.023 for 256-wide blocks) after RMSNorm, an error of std d/sqrt(12) per element;
  // through the output matmul alone (256 inputs, weights std 0.5) a logit error of std
  // ~0.04 (~0.05), the layers add to it. The bounds are ~6 sigma of that; a wiring bug
  // (rope layout, GQA map, bias, paging) moves logits by whole units.
  double max_error;
  double rms_error;
};

class ArchitectureTest : public ::testing::TestWithParam<ArchCase> {};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST_P(ArchitectureTest, MatchesNaiveReferenceInChunks) {
  DemoModelOptions o;
  o.architecture = GetParam().arch;
  o.layers = 2;
  o.dim = 256;
  o.heads = 4;
  o.kv_heads = 2;
  o.ff = 512;
  o.vocab = 600;
  o.type = GetParam().type;
  o.seed = 7;
  const std::string path = temp_path(std::string("spillway-arch-") + o.architecture + "-" +
                                     std::string(kernels::dtype_name(o.type)) + ".gguf");
  ASSERT_TRUE(write_demo_model(path, o).ok());
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::filesystem::remove(path);
  EXPECT_EQ((*model)->config().architecture, o.architecture);

  std::vector<int32_t> tokens;
  for (int i = 0; i < 21; ++i) tokens.push_back(259 + (i * 37) % 300);
  const auto expected = testing::reference_logits(**model, tokens);
  const int32_t n_vocab = (*model)->config().n_vocab;

  kernels::ThreadPool pool(2);
  KvCache kv((*model)->config().n_layers, (*model)->config().n_kv_heads,
             (*model)->config().head_dim, 4, 8);
  ForwardPass forward(**model, kv, pool, 32, 32);
  const std::vector<int32_t> blocks = {5, 2, 7, 0, 3, 6};  // deliberately scattered
  // Chunks of 8, 6, then single tokens: prefill chunks and decode steps.
  size_t pos = 0;
  double worst = 0, sum_squares = 0;
  size_t n_compared = 0;
  for (size_t chunk : {8, 6, 1, 1, 1, 1, 1, 1, 1}) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, static_cast<int32_t>(chunk), pos, blocks);
    for (size_t i = 0; i < chunk; ++i) batch.logit_rows.push_back(static_cast<int32_t>(i));
    auto result = forward.execute(batch);
    ASSERT_TRUE(result.ok()) << result.error().message;
    const std::span<const float> logits = *result;
    for (size_t i = 0; i < chunk; ++i) {
      for (int32_t v = 0; v < n_vocab; ++v) {
        const double diff = std::abs(logits[i * n_vocab + v] - expected[pos + i][v]);
        worst = std::max(worst, diff);
        sum_squares += diff * diff;
        ++n_compared;
        ASSERT_LE(diff, GetParam().max_error) << "position " << pos + i << " token " << v;
      }
    }
    pos += chunk;
  }
  EXPECT_EQ(pos, tokens.size());
  const double rms = std::sqrt(sum_squares / n_compared);
  EXPECT_LE(rms, GetParam().rms_error);
  std::cout << "[ info ] |logit - reference|: max " << worst << ", rms " << rms << "\n";
}

INSTANTIATE_TEST_SUITE_P(All, ArchitectureTest,
                         ::testing::Values(ArchCase{"llama", kernels::DType::F32, 2e-3, 2e-4},
                                           ArchCase{"llama", kernels::DType::F16, 2e-3, 2e-4},
                                           ArchCase{"llama", kernels::DType::Q8_0, 0.3, 0.08},
                                           ArchCase{"llama", kernels::DType::Q4_0, 0.3, 0.08},
                                           ArchCase{"llama", kernels::DType::Q4_K, 0.45, 0.1},
                                           ArchCase{"llama", kernels::DType::Q6_K, 0.45, 0.1},
                                           ArchCase{"qwen2", kernels::DType::F32, 2e-3, 2e-4},
                                           ArchCase{"qwen3", kernels::DType::F32, 2e-3, 2e-4},
                                           ArchCase{"qwen3", kernels::DType::BF16, 2e-3, 2e-4},
                                           ArchCase{"qwen3moe", kernels::DType::F32, 2e-3, 2e-4}),
                         [](const auto& info) {
                           return std::string(info.param.arch) + "_" +
                                  std::string(kernels::dtype_name(info.param.type));
                         });

}  // namespace
}  // namespace spillway::engine
