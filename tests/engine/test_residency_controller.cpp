// The pressure controller's policy in a small cgroup (issue #21): the floor and re-admit
// margin scale with the limit, a plan at its steady state is never shed, a mild dip is shed
// only when it lasts, and real pressure (PSI, a reading far under the floor, a lowered
// limit) still sheds at once. Driven by a fake memory source on a small demo model; the
// bit-identity of outputs across sheds is test_weight_residency.cpp's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "engine/model/model.h"
#include "engine/residency/residency_controller.h"
#include "engine/residency/weight_residency.h"
#include "tools/demo_model.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kMiB = 1 << 20;

class FakeMemory : public MemorySource {
 public:
  MemoryReading read() const override { return reading; }
  MemoryReading reading;
};

class ResidencyControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::path(spillway::test_paths::binary()) / ("spillway-controller-" + std::to_string(getpid()) + ".gguf");
    tools::DemoModelOptions o;
    o.layers = 8;
    o.dim = 128;
    o.heads = 4;
    o.kv_heads = 2;
    o.ff = 256;
    o.vocab = 600;
    o.type = kernels::DType::F16;
    const Status written = tools::write_demo_model(path_.string(), o);
    ASSERT_TRUE(written.ok()) << written.error().message;
    auto model = Model::open(path_.string());
    ASSERT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    reload();
    memory_.reading.cgroup_limited = true;
    memory_.reading.limit_bytes = 557 * kMiB;
  }
  void TearDown() override { fs::remove(path_); }
  // The plan: 6 of 8 layers resident, 2 streamed (staging already allocated).
  void reload() {
    auto w = WeightResidency::create(*model_, {true, true, true, true, true, true, false, false}, {});
    ASSERT_TRUE(w.ok()) << w.error().message;
    weights_ = std::move(*w);
  }

  // A controller checking on every step, on a fake clock advanced 1 s per step.
  // Like the bootstrap, re-admission never goes beyond the plan's resident bytes.
  ResidencyController make(PressurePolicy p) {
    p.check_every_steps = 1;
    p.max_resident_bytes = weights_->resident_weight_bytes();
    return ResidencyController(*weights_, memory_, p, [this] { return now_; });
  }
  ResidencyAction step(ResidencyController& c, int64_t available) {
    now_ += std::chrono::seconds(1);
    memory_.reading.available_bytes = available;
    return c.on_step();
  }

  fs::path path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<WeightResidency> weights_;
  FakeMemory memory_;
  std::chrono::steady_clock::time_point now_{};
};

TEST(PressurePolicy, TheDefaultFloorAndMarginScaleWithTheLimit) {
  const PressurePolicy p = default_pressure_policy();
  EXPECT_EQ(p.floor_for(557 * kMiB), static_cast<int64_t>(0.1 * 557 * kMiB));
  EXPECT_EQ(p.floor_for(256 * kMiB), static_cast<int64_t>(0.1 * 256 * kMiB));
  EXPECT_EQ(p.floor_for(64ll << 30), 300 * kMiB);  // large machines: the original 300 MB
  EXPECT_EQ(p.readmit_margin_for(557 * kMiB), static_cast<int64_t>(0.1 * 557 * kMiB));
  EXPECT_EQ(p.readmit_margin_for(64ll << 30), 256 * kMiB);
  EXPECT_EQ(p.floor_for(0), 300 * kMiB);  // unknown limit: the fixed floor
  const PressurePolicy fixed;  // fraction 0: the fixed values whatever the limit
  EXPECT_EQ(fixed.floor_for(557 * kMiB), 300 * kMiB);
  EXPECT_EQ(fixed.readmit_margin_for(557 * kMiB), 256 * kMiB);
}

// The measurement: a 557 MiB cgroup whose steady state leaves ~100 MiB available.
// A fixed 300 MB floor sheds the plan at the first check; the scaled floor keeps it for the
// whole run, including single dips under the floor (the run's own transient use).
TEST_F(ResidencyControllerTest, APlanAtItsSteadyStateIsNeverShed) {
  {
    ResidencyController old = make(PressurePolicy{});
    EXPECT_GT(step(old, 100 * kMiB).shed, 0) << "the fixed 300 MB floor sheds in a 557 MiB cgroup";
  }
  reload();
  ResidencyController c = make(default_pressure_policy());
  const int64_t floor = default_pressure_policy().floor_for(557 * kMiB);
  for (int i = 0; i < 200; ++i) {
    // Mostly above the floor; every 10th check one reading just under it (never two in a row).
    const int64_t available = i % 10 == 5 ? floor - 1 * kMiB : 100 * kMiB;
    const ResidencyAction a = step(c, available);
    EXPECT_TRUE(a.checked);
    EXPECT_EQ(a.shed, 0) << "check " << i;
    ASSERT_EQ(weights_->resident_layers(), 6) << "check " << i;
  }
  EXPECT_EQ(c.shed_total(), 0);
  EXPECT_EQ(c.readmit_total(), 0);  // the plan's resident set is also the cap
  EXPECT_TRUE(c.events().empty());
}

TEST_F(ResidencyControllerTest, ADipThatLastsShedsOnTheSecondCheck) {
  ResidencyController c = make(default_pressure_policy());
  const int64_t floor = default_pressure_policy().floor_for(557 * kMiB);
  EXPECT_EQ(step(c, 100 * kMiB).shed, 0);
  EXPECT_EQ(step(c, floor - 1 * kMiB).shed, 0);  // first reading under the floor: wait
  const ResidencyAction a = step(c, floor - 1 * kMiB);  // confirmed
  EXPECT_GT(a.shed, 0);
  EXPECT_EQ(weights_->resident_layers(), 6 - a.shed);
  ASSERT_EQ(c.events().size(), 1u);
  const ResidencyEvent& e = c.events()[0];
  EXPECT_EQ(e.layers_shed, a.shed);
  EXPECT_EQ(e.step, 2);
  EXPECT_EQ(e.resident_layers_after, 6 - a.shed);
  EXPECT_EQ(e.available_bytes, floor - 1 * kMiB);
  EXPECT_EQ(e.floor_bytes, floor);
  EXPECT_STREQ(e.reason, "below the floor");
}

TEST_F(ResidencyControllerTest, RealPressureShedsAtOnce) {
  const int64_t floor = default_pressure_policy().floor_for(557 * kMiB);
  {  // Another process allocating: far under the floor.
    ResidencyController c = make(default_pressure_policy());
    EXPECT_GT(step(c, floor / 2 - 1).shed, 0);
    EXPECT_STREQ(c.events().at(0).reason, "below half the floor");
  }
  reload();
  {  // PSI over its threshold with memory apparently available.
    ResidencyController c = make(default_pressure_policy());
    memory_.reading.pressure_some_avg10 = 60;
    EXPECT_GT(step(c, 400 * kMiB).shed, 0);
    EXPECT_STREQ(c.events().at(0).reason, "PSI");
    memory_.reading.pressure_some_avg10 = 0;
  }
  reload();
  {  // The limit lowered at run time: the first reading under the (new) floor sheds.
    ResidencyController c = make(default_pressure_policy());
    EXPECT_EQ(step(c, 100 * kMiB).shed, 0);
    memory_.reading.limit_bytes = 400 * kMiB;
    const int64_t new_floor = default_pressure_policy().floor_for(400 * kMiB);
    EXPECT_GT(step(c, new_floor - 1 * kMiB).shed, 0);
    EXPECT_STREQ(c.events().at(0).reason, "limit lowered");
  }
}

// Calm re-admits with the scaled margin (min(256 MiB, 10% of 557 MiB) = 55.7 MiB): room for
// a layer beyond floor + margin is enough, where the fixed margin would need 556 MiB.
TEST_F(ResidencyControllerTest, CalmReadmitsWithTheScaledMargin) {
  PressurePolicy p = default_pressure_policy();
  p.readmit_after_seconds = 2;
  ResidencyController c = make(p);
  const int64_t floor = p.floor_for(557 * kMiB);
  const int32_t shed = step(c, floor / 4).shed;
  ASSERT_GT(shed, 0);
  const int64_t room = floor + p.readmit_margin_for(557 * kMiB) + weights_->layer_bytes(0) + 1 * kMiB;
  ASSERT_LT(room, 557 * kMiB - 300 * kMiB);
  for (int i = 0; i < 2 + shed; ++i) step(c, room);
  EXPECT_EQ(weights_->resident_layers(), 6);
  EXPECT_EQ(c.readmit_total(), shed);
  // One shed event, then one re-admission event per layer.
  ASSERT_EQ(c.events().size(), 1u + static_cast<size_t>(shed));
  EXPECT_EQ(c.events().back().layers_readmitted, 1);
  EXPECT_STREQ(c.events().back().reason, "calm");
}

}  // namespace
}  // namespace spillway::engine
