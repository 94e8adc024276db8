// The expert tier's histograms in the exposition (issue #16, "Metrics"):
// spillway_moe_expert_read_seconds and spillway_moe_experts_per_layer_step are Prometheus
// histograms fed from the engine's cumulative fixed-bucket counts; each set_residency adds
// what grew since the previous one, so the exposition shows the engine's totals (cumulative
// buckets, count, sum) however often it is published.
#include <gtest/gtest.h>

#include <string>

#include "metrics_sample.h"
#include "server/observability/metrics.h"

namespace spillway::server {
namespace {

using testing::sample;

TEST(ServerMoeMetrics, HistogramsShowTheEnginesCumulativeCounts) {
  ServerMetrics m("m");
  ResidencyMetrics r;
  for (double v : {3.0, 8.0, 8.0, 20.0}) r.moe_experts_per_layer_step.observe(v, engine::kExpertsPerLayerStepBounds);
  r.moe_expert_read_seconds.observe(0.002, engine::kExpertReadSecondsBounds);
  m.set_residency(r);
  m.set_residency(r);  // nothing new: nothing added
  for (double v : {1.0, 300.0}) r.moe_experts_per_layer_step.observe(v, engine::kExpertsPerLayerStepBounds);
  r.moe_expert_read_seconds.observe(3.0, engine::kExpertReadSecondsBounds);
  m.set_residency(r);
  const std::string text = m.render(std::nullopt);

  EXPECT_NE(text.find("# TYPE spillway_moe_experts_per_layer_step histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE spillway_moe_expert_read_seconds histogram"), std::string::npos);
  const std::string steps = "spillway_moe_experts_per_layer_step";
  EXPECT_EQ(sample(text, steps + "_count"), 6);
  EXPECT_DOUBLE_EQ(sample(text, steps + "_sum"), 340);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"1\"}"), 1);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"4\"}"), 2);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"8\"}"), 4);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"24\"}"), 5);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"256\"}"), 5);
  EXPECT_EQ(sample(text, steps + "_bucket{le=\"+Inf\"}"), 6);
  const std::string reads = "spillway_moe_expert_read_seconds";
  EXPECT_EQ(sample(text, reads + "_count"), 2);
  EXPECT_DOUBLE_EQ(sample(text, reads + "_sum"), 3.002);
  EXPECT_EQ(sample(text, reads + "_bucket{le=\"1\"}"), 1);
  EXPECT_EQ(sample(text, reads + "_bucket{le=\"+Inf\"}"), 2);
}

}  // namespace
}  // namespace spillway::server
