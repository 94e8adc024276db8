// Layer streaming never changes outputs: a demo model run fully streamed, partly resident
// (each placement, several prefetch depths) and fully resident gives logits bit-identical
// to the plain engine reading its file mapping; so does shedding and re-admitting layers
// between steps, driven by a fake memory source through the ResidencyController.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "tools/demo_model.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/platform/read_mode_probe.h"
#include "engine/residency/residency_controller.h"
#include "engine/residency/residency_plan.h"
#include "engine/residency/residency_setup.h"
#include "engine/residency/weight_residency.h"
#include "kernels/thread_pool.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

using namespace tools;  // the demo model and generator the tests run

namespace fs = std::filesystem;

// Runs the same chunked sequence through a forward pass and returns every step's logits.
// Between steps, `between(step)` may change the residency.
std::vector<std::vector<float>> run_steps(const Model& model, LayerWeightSource* weights,
                                          const std::function<void(int)>& between = {}) {
  kernels::ThreadPool pool(2);
  const ModelConfig& c = model.config();
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, 8, 8);
  ForwardPass forward(model, kv, pool, 16, 64, weights);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 24; ++i) tokens.push_back(259 + (i * 53) % 300);
  const std::vector<int32_t> blocks = {3, 1, 4, 0, 2, 5, 7, 6};
  std::vector<std::vector<float>> out;
  size_t pos = 0;
  int step = 0;
  for (size_t chunk : {10, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + pos, static_cast<int32_t>(chunk), static_cast<int64_t>(pos), blocks);
    batch.logit_rows.push_back(static_cast<int32_t>(chunk) - 1);
    auto logits = forward.execute(batch);
    EXPECT_TRUE(logits.ok()) << logits.error().message;
    if (!logits.ok()) return out;
    out.emplace_back(logits->begin(), logits->end());
    pos += chunk;
    if (between) between(step);
    ++step;
  }
  return out;
}

void expect_bit_identical(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
        << what << ": logits of step " << i << " differ";
  }
}

class WeightResidencyTest : public ::testing::TestWithParam<kernels::DType> {
 protected:
  void SetUp() override {
    // In the build tree rather than /tmp, which may be tmpfs (no O_DIRECT).
    path_ = fs::path(spillway::test_paths::binary()) /
            ("spillway-residency-" + std::to_string(getpid()) + "-" +
             std::string(kernels::dtype_name(GetParam())) + ".gguf");
    DemoModelOptions o;
    const bool k_quant = kernels::block_elems(GetParam()) == kernels::kQK_K;  // rows of 256 blocks
    o.layers = 6;
    o.dim = k_quant ? 256 : 128;
    o.heads = 4;
    o.kv_heads = 2;
    o.ff = k_quant ? 512 : 256;
    o.vocab = 600;
    o.type = GetParam();
    ASSERT_TRUE(write_demo_model(path_.string(), o).ok());
    auto model = Model::open(path_.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    plain_ = run_steps(*model_, nullptr);
    ASSERT_FALSE(plain_.empty());
  }
  void TearDown() override { fs::remove(path_); }

  fs::path path_;
  std::unique_ptr<Model> model_;
  std::vector<std::vector<float>> plain_;
};

TEST_P(WeightResidencyTest, EveryResidencyGivesTheSameLogits) {
  const int32_t n = model_->config().n_layers;
  for (int32_t resident : {0, 2, 5, 6}) {
    for (auto placement : {ResidencyPlacement::First, ResidencyPlacement::Last,
                           ResidencyPlacement::Interleaved}) {
      // Row pieces: whole matrices (0), the default (each matrix one piece here), and
      // pieces of a few 16-row tiles (several per matrix, the last one shorter).
      for (const uint64_t piece_bytes : {uint64_t{0}, WeightResidencyOptions{}.row_piece_bytes, uint64_t{4096},
                                         uint64_t{6600}})
      for (int32_t depth : {1, 3}) {
        WeightResidencyOptions o;
        o.prefetch_depth = depth;
        o.row_piece_bytes = piece_bytes;
        auto w = WeightResidency::create(*model_, place_resident_layers(n, resident, placement), o);
        ASSERT_TRUE(w.ok()) << w.error().message;
        EXPECT_EQ((*w)->resident_layers(), resident);
        const auto got = run_steps(*model_, w->get());
        const std::string what = "resident " + std::to_string(resident) + " placement " +
                                 std::string(residency_placement_name(placement)) + " depth " +
                                 std::to_string(depth) + " row pieces of " + std::to_string(piece_bytes) + " B";
        expect_bit_identical(plain_, got, what);
        // Each step reads every streamed layer exactly once (plus at most `depth + 1`
        // layers prefetched for a step that never came).
        const auto stats = (*w)->streamer_stats();
        const uint64_t per_step = static_cast<uint64_t>((*w)->streamed_bytes_per_step());
        EXPECT_GE(stats.bytes_read, per_step * plain_.size()) << what;
        // The forward consumes the streamed matrices in the order they are streamed.
        EXPECT_EQ(stats.restarts, 0u) << what;
        if (resident == n) {
          EXPECT_EQ(stats.bytes_read, 0u) << what;
        }
      }
    }
  }
}

// Plans that stream leave untied token embeddings on disk: the forward reads each token's
// row (embedding_row) instead of a copy of the table, with the same logits, and the table's
// bytes leave the non-layer set.
TEST_P(WeightResidencyTest, EmbeddingsOnDiskGiveTheSameLogitsAndHoldNoTable) {
  const int32_t n = model_->config().n_layers;
  const kernels::WeightMatrix& table = model_->token_embedding();
  ASSERT_NE(table.data, model_->output().data) << "the demo model's embeddings are untied";
  const int64_t table_bytes = table.rows * kernels::row_bytes(table.type, table.cols);
  WeightResidencyOptions copied, on_disk;
  on_disk.embeddings_on_disk = true;
  auto copied_sizes = WeightResidency::measure(*model_, copied);
  auto lean_sizes = WeightResidency::measure(*model_, on_disk);
  ASSERT_TRUE(copied_sizes.ok() && lean_sizes.ok());
  EXPECT_GE(copied_sizes->non_layer_bytes - lean_sizes->non_layer_bytes, table_bytes);
  for (int32_t resident : {0, 3, 6}) {
    auto w = WeightResidency::create(*model_, place_resident_layers(n, resident, ResidencyPlacement::First), on_disk);
    ASSERT_TRUE(w.ok()) << w.error().message;
    EXPECT_EQ((*w)->token_embedding().data, nullptr);
    EXPECT_EQ((*w)->non_layer_bytes(), lean_sizes->non_layer_bytes);
    expect_bit_identical(plain_, run_steps(*model_, w->get()), "embeddings on disk, resident " + std::to_string(resident));
  }
}

// A tied float output matrix is retiled like an untied one (the matmul's fast layout), and
// the embedding lookup copies each token's row back out of the tiles: the same logits as the
// model's own row-major bindings, on every residency.
TEST(WeightResidencyTied, FloatTiedOutputIsTiledAndLooksUpTheSameRows) {
  for (kernels::DType type : {kernels::DType::F16, kernels::DType::F32, kernels::DType::BF16}) {
    const fs::path path = fs::path(spillway::test_paths::binary()) /
                          ("spillway-tied-" + std::to_string(getpid()) + "-" + std::string(kernels::dtype_name(type)) + ".gguf");
    DemoModelOptions o;
    o.layers = 3;
    o.dim = 128;
    o.heads = 4;
    o.kv_heads = 2;
    o.ff = 256;
    o.vocab = 600;  // 37 full groups of 16 rows and 8 row-major rows
    o.type = type;
    o.tied_output = true;
    ASSERT_TRUE(write_demo_model(path.string(), o).ok());
    auto model = Model::open(path.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    ASSERT_EQ((*model)->output().data, (*model)->token_embedding().data) << "tied";
    const auto plain = run_steps(**model, nullptr);
    for (int32_t resident : {0, 3}) {
      auto w = WeightResidency::create(**model, place_resident_layers(3, resident, ResidencyPlacement::First), {});
      ASSERT_TRUE(w.ok()) << w.error().message;
      EXPECT_EQ((*w)->output().layout, kernels::WeightLayout::Tiled);
      EXPECT_EQ((*w)->token_embedding().layout, kernels::WeightLayout::Tiled);
      expect_bit_identical(plain, run_steps(**model, w->get()),
                           std::string(kernels::dtype_name(type)) + " tied, resident " + std::to_string(resident));
    }
    fs::remove(path);
  }
}

// A memory reading that never changes: the limit and what is available.
struct FixedMemory final : MemorySource {
  explicit FixedMemory(int64_t bytes) { r.available_bytes = r.limit_bytes = bytes; }
  MemoryReading read() const override { return r; }
  MemoryReading r;
};

// The setup keeps the table in memory when the whole model fits (the file is then not needed
// after load) and on disk when it does not, and then plans without it.
TEST_P(WeightResidencyTest, TheSetupLeavesEmbeddingsOnDiskOnlyWhenItStreams) {
  const ResidencyDemand demand{.context_tokens = 64, .max_batch_tokens = 16, .threads = 1};
  WeightResidencyOptions on_disk;
  on_disk.embeddings_on_disk = true;
  auto copied = WeightResidency::measure(*model_, WeightResidencyOptions{});
  auto lean = WeightResidency::measure(*model_, on_disk);
  ASSERT_TRUE(copied.ok() && lean.ok());
  int64_t layers = 0;
  for (int64_t b : copied->layer_bytes) layers += b;
  const int64_t whole = runtime_reserve_bytes(model_->config(), demand) + copied->non_layer_bytes + layers +
                        (int64_t{1} << 20);  // + the KV reserve below
  for (const bool fits : {true, false}) {
    ResidencyOptions o;
    o.memory_budget_bytes = fits ? whole : whole - layers / 2;
    o.kv_reserve_bytes = int64_t{1} << 20;
    o.direct_io = true;
    auto setup = set_up_residency(*model_, o, demand, FixedMemory(*o.memory_budget_bytes));
    ASSERT_TRUE(setup.ok()) << setup.error().message;
    // (Without the table the rest may fit whole: the file stays needed for the embeddings.)
    if (fits) {
      EXPECT_EQ(setup->plan.streamed_layers, 0);
    }
    EXPECT_EQ(setup->weights->token_embedding().data == nullptr, !fits);
    EXPECT_EQ(setup->plan.non_layer_bytes, fits ? copied->non_layer_bytes : lean->non_layer_bytes);
    expect_bit_identical(plain_, run_steps(*model_, setup->weights.get()), fits ? "fits" : "streams");
  }
}

// A row that can no longer be read (the file shrank under a running server) fails the step
// with an error naming the file; resident layers and the output matrix are not touched.
TEST_P(WeightResidencyTest, AnEmbeddingRowPastTheEndOfTheFileIsAnErrorNamingIt) {
  const int32_t n = model_->config().n_layers;
  WeightResidencyOptions o;
  o.embeddings_on_disk = true;
  auto w = WeightResidency::create(*model_, std::vector<bool>(n, true), o);
  ASSERT_TRUE(w.ok()) << w.error().message;
  fs::resize_file(path_, 0);
  std::vector<uint8_t> scratch(static_cast<size_t>(kernels::row_bytes(model_->token_embedding().type, model_->config().n_embd)));
  auto row = (*w)->embedding_row(259, scratch.data());
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.error().message.find(path_.filename().string()), std::string::npos) << row.error().message;
}

TEST_P(WeightResidencyTest, StagingHoldsAFewMatricesNotWholeLayers) {
  const int32_t n = model_->config().n_layers;
  WeightResidencyOptions o;
  o.prefetch_depth = 2;
  o.min_ahead_bytes = 0;
  o.row_piece_bytes = 0;  // whole matrices (row pieces: the next test)
  // Sized before anything streams (the plan's input), the same once streaming.
  auto resident = WeightResidency::create(*model_, std::vector<bool>(n, true), o);
  ASSERT_TRUE(resident.ok()) << resident.error().message;
  EXPECT_EQ((*resident)->staging_bytes(), 0);
  auto w = WeightResidency::create(*model_, std::vector<bool>(n, false), o);
  ASSERT_TRUE(w.ok()) << w.error().message;
  // Attention reads q, k, v at once (3 held) + 2 read ahead.
  EXPECT_EQ((*w)->staging_slots(), 5);
  uint64_t largest = 0;  // the largest layer matrix's aligned span in the file
  for (const TensorInfo& t : model_->source().tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    constexpr uint64_t kA = DirectReader::kAlignment;
    largest = std::max(largest, (DirectReader::span_bytes(t.file_offset, t.n_bytes) + kA - 1) / kA * kA);
  }
  EXPECT_EQ((*w)->staging_bytes(), 5 * static_cast<int64_t>(largest));
  EXPECT_EQ((*w)->staging_bytes(), (*resident)->staging_bytes_when_streaming());
  auto sizes = WeightResidency::measure(*model_, o);  // what the plan is given
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(sizes->staging_bytes, (*w)->staging_bytes());
  EXPECT_EQ(sizes->staging_slots, 5);
  EXPECT_LT((*w)->staging_bytes(), 2 * (*w)->layer_bytes(0));  // was 3 whole layers
  expect_bit_identical(plain_, run_steps(*model_, w->get()), "5 slots");
  // More read ahead for small matrices: up to 8 more, while under min_ahead_bytes.
  o.min_ahead_bytes = 1ull << 30;
  auto ahead = WeightResidency::create(*model_, std::vector<bool>(n, false), o);
  ASSERT_TRUE(ahead.ok());
  EXPECT_EQ((*ahead)->staging_slots(), 3 + 8);
}

// Row pieces: the kinds hold one piece at a time, so staging is 1 + read-ahead slots of the
// largest row piece (at most row_piece_bytes, whole 16-row tiles), far less than slots of the
// largest matrix; the plan is given that size (measure), and the streamed bytes per step
// are the layers' bytes (no row is read twice, none skipped).
TEST_P(WeightResidencyTest, RowPiecesStageOnePieceAtATimeAndReadEveryRowOnce) {
  const int32_t n = model_->config().n_layers;
  WeightResidencyOptions whole;
  whole.prefetch_depth = 2;
  whole.min_ahead_bytes = 0;
  whole.row_piece_bytes = 0;
  WeightResidencyOptions pieces = whole;
  pieces.row_piece_bytes = 6600;
  auto w_whole = WeightResidency::create(*model_, std::vector<bool>(n, false), whole);
  auto w = WeightResidency::create(*model_, std::vector<bool>(n, false), pieces);
  ASSERT_TRUE(w_whole.ok() && w.ok());
  EXPECT_EQ((*w)->staging_slots(), 1 + 2);
  uint64_t largest_row = 0, largest_piece = 0;  // bytes
  for (const TensorInfo& t : model_->source().tensors()) {
    if (t.name.rfind("blk.", 0) != 0 || t.shape.size() != 2) continue;
    const uint64_t row = static_cast<uint64_t>(kernels::row_bytes(t.type, t.shape[0]));
    largest_row = std::max(largest_row, row);
    largest_piece = std::max(largest_piece, std::min<uint64_t>(t.n_bytes, std::max<uint64_t>(16 * row, 6600 / row / 16 * 16 * row)));
  }
  constexpr uint64_t kA = DirectReader::kAlignment;
  const uint64_t slot = static_cast<uint64_t>((*w)->staging_bytes()) / 3;
  EXPECT_GE(slot, 16 * largest_row / 2);  // a piece holds tiles of rows, not single rows
  EXPECT_LE(slot, (largest_piece + 2 * kA + kA - 1) / kA * kA);  // the aligned span of it
  EXPECT_LT((*w)->staging_bytes(), (*w_whole)->staging_bytes() / 2);
  auto sizes = WeightResidency::measure(*model_, pieces);
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(sizes->staging_bytes, (*w)->staging_bytes());
  EXPECT_EQ((*w)->streamed_bytes_per_step(), (*w_whole)->streamed_bytes_per_step());
  expect_bit_identical(plain_, run_steps(*model_, w->get()), "row pieces of 6600 B, 3 slots");
  EXPECT_EQ((*w)->streamer_stats().restarts, 0u);
}

TEST_P(WeightResidencyTest, LoadProgressCountsTheResidentBytesUpToTheTotal) {
  const int32_t n = model_->config().n_layers;
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto w = WeightResidency::create(*model_, place_resident_layers(n, 4, ResidencyPlacement::Interleaved), {},
                                   [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ(calls.size(), 2u + 4u);  // the start, the non-layer set, each resident layer
  EXPECT_EQ(calls.front().first, 0);
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GT(calls[i].first, calls[i - 1].first);
    EXPECT_EQ(calls[i].second, calls[0].second);
  }
  EXPECT_EQ(calls.back().first, calls.back().second);
  EXPECT_EQ(calls.back().second, (*w)->resident_weight_bytes());
}

TEST_P(WeightResidencyTest, TheFileLayoutGivesTheSameLogitsAsTheTiledOne) {
  const int32_t n = model_->config().n_layers;
  for (int32_t resident : {0, 3, 6}) {
    WeightResidencyOptions o;
    o.keep_file_layout = true;
    auto w = WeightResidency::create(*model_, place_resident_layers(n, resident, ResidencyPlacement::First), o);
    ASSERT_TRUE(w.ok()) << w.error().message;
    expect_bit_identical(plain_, run_steps(*model_, w->get()), "file layout, resident " + std::to_string(resident));
  }
}

TEST_P(WeightResidencyTest, SheddingAndReadmissionBetweenStepsKeepOutputsIdentical) {
  const int32_t n = model_->config().n_layers;
  auto w = WeightResidency::create(*model_, std::vector<bool>(n, true), {});
  ASSERT_TRUE(w.ok()) << w.error().message;

  class FakeMemory : public MemorySource {
   public:
    MemoryReading read() const override { return reading; }
    MemoryReading reading;
  } memory;
  memory.reading.limit_bytes = 1ll << 30;
  memory.reading.available_bytes = 512ll << 20;

  auto now = std::chrono::steady_clock::time_point{};
  PressurePolicy policy;
  policy.floor_bytes = 100ll << 20;
  policy.readmit_margin_bytes = 0;
  policy.readmit_after_seconds = 2;
  policy.check_every_steps = 1;
  ResidencyController controller(**w, memory, policy, [&] { return now; });

  std::vector<int32_t> resident_after;
  const auto got = run_steps(*model_, w->get(), [&](int step) {
    now += std::chrono::seconds(1);
    if (step == 1) memory.reading.available_bytes = policy.floor_bytes - 1;  // pressure: shed
    if (step == 2) memory.reading.available_bytes = 512ll << 20;  // calm again
    const ResidencyAction a = controller.on_step();
    EXPECT_TRUE(a.checked);
    resident_after.push_back((*w)->resident_layers());
  });
  expect_bit_identical(plain_, got, "shed + readmit");
  // Step 1 sheds: the first shed starts the streamer, so it frees more than the staging
  // slots take (at least 2 layers here, and at least a quarter of them); steps from 2 on
  // are calm, and after 2 s re-admit one layer per check.
  int64_t smallest = INT64_MAX;
  for (int32_t l = 0; l < n; ++l) smallest = std::min(smallest, (*w)->layer_bytes(l));
  const int32_t first_shed = std::min<int32_t>(
      n, std::max<int32_t>((n + 3) / 4, static_cast<int32_t>((*w)->staging_bytes_when_streaming() / smallest) + 1));
  ASSERT_GE(first_shed, 2);
  EXPECT_GT(first_shed * smallest, (*w)->staging_bytes_when_streaming());
  EXPECT_EQ(resident_after[0], n);
  EXPECT_EQ(resident_after[1], n - first_shed);
  EXPECT_EQ(resident_after[2], n - first_shed);
  EXPECT_EQ(resident_after[4], n - first_shed + 1);
  EXPECT_EQ(resident_after.back(), n);
  EXPECT_EQ(controller.shed_total(), first_shed);
  EXPECT_EQ(controller.readmit_total(), first_shed);
  // Highest index first: after the shed, layers 0 and 1 stayed resident.
}

TEST_P(WeightResidencyTest, ALoweredLimitShedsEnoughToGetBackAboveTheFloor) {
  const int32_t n = model_->config().n_layers;
  auto w = WeightResidency::create(*model_, std::vector<bool>(n, true), {});
  ASSERT_TRUE(w.ok());
  class FakeMemory : public MemorySource {
   public:
    MemoryReading read() const override { return reading; }
    MemoryReading reading;
  } memory;
  PressurePolicy policy;
  policy.check_every_steps = 1;
  policy.shed_fraction = 0.01;  // one layer at a time, unless the deficit needs more
  int64_t layer = 0;  // the controller sizes its shedding by the largest layer
  for (int32_t l = 0; l < n; ++l) layer = std::max(layer, (*w)->layer_bytes(l));
  policy.floor_bytes = 10 * layer;
  memory.reading.available_bytes = policy.floor_bytes - 5 * layer - 1;  // deficit: 6 layers
  ResidencyController controller(**w, memory, policy);
  const ResidencyAction a = controller.on_step();
  EXPECT_EQ(a.shed, 6);
  EXPECT_EQ((*w)->resident_layers(), 0);
  for (int32_t l = 0; l < n; ++l) EXPECT_FALSE((*w)->is_resident(l));
}

// `auto` measures the read mode before it plans, and plans as the mode it chose: the page
// cache of buffered reads (requests in flight + two readahead windows, 24 MiB with 8 MiB
// windows) is in the plan only when they are the choice; O_DIRECT gives those bytes to
// resident layers. The log line says what was measured; a given mode plans without
// measuring. The model's layers (~58 MB) are several times that cache, so both modes stream.
TEST(ResidencySetup, AutoReadModePlansAsTheModeItChose) {
  const fs::path path = fs::path(spillway::test_paths::binary()) / ("spillway-read-mode-" + std::to_string(getpid()) + ".gguf");
  DemoModelOptions d;
  d.layers = 16;
  d.dim = 512;
  d.ff = 1536;
  d.vocab = 600;
  d.type = kernels::DType::Q8_0;
  ASSERT_TRUE(write_demo_model(path.string(), d).ok());
  struct Remove {
    fs::path p;
    ~Remove() { fs::remove(p); }
  } remove{path};
  auto model = Model::open(path.string());
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ResidencyDemand demand{.context_tokens = 64, .max_batch_tokens = 16, .threads = 1};
  auto sizes = WeightResidency::measure(**model, WeightResidencyOptions{});
  ASSERT_TRUE(sizes.ok());
  int64_t layers = 0;
  for (int64_t b : sizes->layer_bytes) layers += b;
  const StreamerOptions stream;
  const auto read_cache = static_cast<int64_t>(buffered_read_cache_bytes(path.string(), stream.read_threads, stream.chunk_bytes));
  ASSERT_LT(2 * read_cache, layers) << "a device readahead this large needs a bigger model here";
  auto set_up = [&](std::optional<bool> direct) {
    ResidencyOptions o;
    o.kv_reserve_bytes = int64_t{1} << 20;
    // Buffered reads leave room for a quarter of the layers, O_DIRECT for more.
    o.memory_budget_bytes = runtime_reserve_bytes((*model)->config(), demand) + sizes->non_layer_bytes +
                            *o.kv_reserve_bytes + sizes->staging_bytes + read_cache + layers / 4;
    o.direct_io = direct;
    return set_up_residency(**model, o, demand, FixedMemory(*o.memory_budget_bytes));
  };
  auto buffered = set_up(false);
  auto direct = set_up(true);
  auto automatic = set_up(std::nullopt);
  ASSERT_TRUE(buffered.ok()) << buffered.error().message;
  ASSERT_TRUE(direct.ok()) << direct.error().message;
  ASSERT_TRUE(automatic.ok()) << automatic.error().message;
  ASSERT_GT(buffered->plan.streamed_layers, 0);
  ASSERT_GT(direct->plan.streamed_layers, 0);
  EXPECT_EQ(buffered->plan.read_cache_bytes, read_cache);
  EXPECT_EQ(direct->plan.read_cache_bytes, 0);
  EXPECT_GT(direct->plan.resident_layers, buffered->plan.resident_layers);
  EXPECT_TRUE(buffered->read_mode_summary.empty() && direct->read_mode_summary.empty());

  const bool chose_direct = automatic->weights->direct_io();
  const ResidencySetup& as_chosen = chose_direct ? *direct : *buffered;
  EXPECT_EQ(automatic->plan.resident, as_chosen.plan.resident) << "O_DIRECT chosen: " << chose_direct;
  EXPECT_EQ(automatic->plan.read_cache_bytes, as_chosen.plan.read_cache_bytes);
  EXPECT_NE(automatic->read_mode_summary.find(chose_direct ? "reads: O_DIRECT" : "reads: buffered"), std::string::npos)
      << automatic->read_mode_summary;
}

INSTANTIATE_TEST_SUITE_P(Types, WeightResidencyTest,
                         // Q4_K / Q5_K / Q6_K run retiled when resident or streamed, row-major
                         // in the plain engine; Q3_K has no tiles.
                         ::testing::Values(kernels::DType::F16, kernels::DType::Q8_0, kernels::DType::Q4_0,
                                           kernels::DType::Q3_K, kernels::DType::Q4_K, kernels::DType::Q5_K,
                                           kernels::DType::Q6_K),
                         [](const auto& info) { return std::string(kernels::dtype_name(info.param)); });

}  // namespace
}  // namespace spillway::engine
