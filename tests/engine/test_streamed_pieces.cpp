// Streaming a layer in pieces (one matrix per unit, or row ranges of it; a MoE layer's routed
// experts as one more) never changes outputs, for every mixer and FFN kind: attention with and without the
// output gate, gated delta net (separate and fused beta/alpha), dense and MoE FFNs with a
// shared expert, with and without the expert tier. Logits are compared bit for bit with the
// engine reading the file mapping, and the forward must consume the pieces in exactly the
// order they are streamed (no restart of the stream), so reads run ahead of compute.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/residency/weight_residency.h"
#include "engine/state/recurrent_state.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;

std::string testdata_model(const std::string& name) { return spillway::test_paths::testdata() + "/models/" + name; }

// A 12-token prefill then 4 single-token decode steps of one sequence; every step's logits.
Result<std::vector<float>> run_steps(const Model& model, LayerWeightSource* weights) {
  kernels::ThreadPool pool(2);
  const ModelConfig& c = model.config();
  KvCache kv(c, 16, 2, kernels::DType::F32);
  std::unique_ptr<RecurrentState> state;
  ForwardPass forward(model, kv, pool, 16, 32, weights);
  bool hybrid = false;
  for (const LayerSpec& s : c.layers) hybrid |= s.mixer == MixerKind::GatedDeltaNet;
  if (hybrid) {
    state = std::make_unique<RecurrentState>(c, 1);
    forward.set_recurrent_state(state.get());
  }
  std::vector<int32_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back(5 + (i * 97) % std::min(c.n_vocab - 5, 400));
  std::vector<float> all;
  int64_t pos = 0;
  for (int32_t n : {12, 1, 1, 1, 1}) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, n, pos, {0, 1});
    batch.sequences[0].state_slot = 0;
    batch.logit_rows.push_back(n - 1);
    ASSIGN_OR_RETURN(std::span<const float> logits, forward.execute(batch));
    all.insert(all.end(), logits.begin(), logits.end());
    pos += n;
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class StreamedPieces : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamedPieces, GiveTheMappingsBitsInStreamOrder) {
  const std::string path = testdata_model(GetParam());
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing";
  auto model = Model::open(path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto mapped = run_steps(**model, nullptr);
  ASSERT_TRUE(mapped.ok()) << mapped.error().message;
  const int32_t n = (*model)->config().n_layers;
  bool moe = false;
  for (const LayerSpec& s : (*model)->config().layers) moe |= s.ffn == FfnKind::Moe;
  std::vector<bool> alternate(n);
  for (int32_t l = 0; l < n; ++l) alternate[l] = l % 2 == 1;
  for (const int64_t cache : moe ? std::vector<int64_t>{-1, int64_t{1} << 30} : std::vector<int64_t>{-1}) {
    for (const auto& resident : {std::vector<bool>(n, false), alternate}) {
      for (const uint64_t piece_bytes : {uint64_t{0}, uint64_t{4 << 20}, uint64_t{3000}})
      for (const int32_t depth : {1, 3}) {
        WeightResidencyOptions o;
        o.expert_cache_bytes = cache;
        o.prefetch_depth = depth;
        o.row_piece_bytes = piece_bytes;  // 0: whole matrices; else row pieces, one held at a time
        o.min_ahead_bytes = 0;
        o.stream.chunk_bytes = 8192;  // several requests per matrix, on several threads
        auto w = WeightResidency::create(**model, resident, o);
        ASSERT_TRUE(w.ok()) << w.error().message;
        const std::string what = std::string(GetParam()) + (cache < 0 ? "" : ", expert tier") +
                                 (resident[1] ? ", odd layers resident" : ", all streamed") + ", depth " +
                                 std::to_string(depth) + ", row pieces of " + std::to_string(piece_bytes) + " B";
        auto got = run_steps(**model, w->get());
        ASSERT_TRUE(got.ok()) << what << ": " << got.error().message;
        EXPECT_TRUE(same_bits(*mapped, *got)) << what;
        const StreamerStats stats = (*w)->streamer_stats();
        EXPECT_EQ(stats.restarts, 0u) << what << ": the forward consumed pieces out of stream order";
        EXPECT_GE(stats.bytes_read, 5 * static_cast<uint64_t>((*w)->streamed_bytes_per_step())) << what;
        // Staging: the slots the kinds hold at once plus those read ahead, each the size of
        // the largest piece; far less than a few layers.
        EXPECT_EQ((*w)->staging_bytes(), (*w)->staging_bytes_when_streaming()) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StreamedPieces,
                         ::testing::Values("llama-tiny-peaked-q4_k_m.gguf", "qwen35-tiny-peaked-q8_0.gguf",
                                           "qwen35moe-tiny-peaked-q8_0.gguf", "qwen3next-tiny-peaked-q8_0.gguf"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find(".gguf"));
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(StreamedPiecesErrors, AFileCutShortIsAnErrorNamingItNotACrash) {
  const fs::path src = testdata_model("llama-tiny-peaked-q4_k_m.gguf");
  if (!fs::exists(src)) GTEST_SKIP() << src << " is missing";
  const fs::path path = fs::path(spillway::test_paths::binary()) / ("spillway-pieces-cut-" + std::to_string(getpid()) + ".gguf");
  fs::copy_file(src, path, fs::copy_options::overwrite_existing);
  {
    auto model = Model::open(path.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    const int32_t n = (*model)->config().n_layers;
    WeightResidencyOptions o;
    o.prefetch_depth = 1;
    o.min_ahead_bytes = 0;
    auto w = WeightResidency::create(**model, std::vector<bool>(n, false), o);
    ASSERT_TRUE(w.ok()) << w.error().message;
    // The last layers' matrices now lie past the end of the file.
    fs::resize_file(path, fs::file_size(path) / 2);
    Status failed;
    for (int i = 0; i < 3 && failed.ok(); ++i) {
      auto r = run_steps(**model, w->get());
      if (!r.ok()) failed = r.error();
    }
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.error().message.find(path.filename().string()), std::string::npos) << failed.error().message;
  }
  fs::remove(path);
}

}  // namespace
}  // namespace spillway::engine
