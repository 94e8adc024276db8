// `spillway expert-trace`: records the routing of a MoE model over prompts (greedy) and
// replays it through expert-cache policies of several sizes: hit rates, no timing.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "tools/expert_trace.h"

namespace spillway::cli {

namespace {

struct ExpertTraceOptions {
  std::string model;
  std::string prompts;  // file, one prompt per line
  int32_t max_tokens = 16;
  std::vector<int32_t> slots;
  bool json = false;
};

int expert_trace(const ExpertTraceOptions& o) {
  auto model = engine::Model::open(o.model);
  if (!model) {
    fmt::print(stderr, "error: {}\n", model.error().message);
    return 1;
  }
  auto tokenizer = engine::Tokenizer::from_metadata((*model)->source().metadata(), o.model);
  if (!tokenizer) {
    fmt::print(stderr, "error: {}\n", tokenizer.error().message);
    return 1;
  }
  std::ifstream in(o.prompts);
  if (!in) {
    fmt::print(stderr, "error: cannot open {}\n", o.prompts);
    return 1;
  }
  std::vector<std::vector<int32_t>> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) prompts.push_back((*tokenizer)->encode(line, /*add_special=*/true, /*parse_special=*/false));
  }
  kernels::ThreadPool pool(std::max(1u, std::thread::hardware_concurrency() / 2));
  auto trace = tools::record_expert_trace(**model, pool, prompts, o.max_tokens, (*tokenizer)->eos_id());
  if (!trace) {
    fmt::print(stderr, "error: {}\n", trace.error().message);
    return 1;
  }
  int32_t total = 0;
  for (int32_t n : trace->experts_per_layer) total += n;
  std::vector<int32_t> sizes = o.slots;
  if (sizes.empty()) {
    for (int32_t pct : {10, 25, 50, 75}) sizes.push_back(std::max(trace->experts_used, total * pct / 100));
  }
  const tools::CachePolicy policies[] = {tools::CachePolicy::Lru, tools::CachePolicy::LruFloor,
                                         tools::CachePolicy::Lfu, tools::CachePolicy::LruPerLayer};
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["prompts"] = prompts.size();
  j["steps"] = trace->steps.size();
  j["routed_experts"] = total;
  j["experts_used"] = trace->experts_used;
  if (!o.json) {
    fmt::print("{} prompts, {} forward steps, {} routed experts, top-{}\n", prompts.size(), trace->steps.size(),
               total, trace->experts_used);
    fmt::print("{:>8} {:>8}", "slots", "% of all");
    for (auto p : policies) fmt::print(" {:>14}", tools::cache_policy_name(p));
    fmt::print("\n");
  }
  for (int32_t s : sizes) {
    nlohmann::ordered_json row = {{"slots", s}};
    if (!o.json) fmt::print("{:>8} {:>7.0f}%", s, 100.0 * s / std::max(total, 1));
    for (auto p : policies) {
      const tools::ReplayResult r = tools::replay_expert_trace(*trace, p, s);
      row[std::string(tools::cache_policy_name(p))] = r.hit_rate();
      if (!o.json) fmt::print(" {:>13.1f}%", 100.0 * r.hit_rate());
    }
    if (!o.json) fmt::print("\n");
    j["hit_rate"].push_back(row);
  }
  if (o.json) fmt::print("{}\n", j.dump());
  return 0;
}

}  // namespace

void add_expert_trace_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ExpertTraceOptions>();
  CLI::App* cmd = app.add_subcommand(
      "expert-trace", "Record a MoE model's routing over prompts and replay it through expert-cache policies");
  cmd->add_option("--model", opts->model, "MoE model (GGUF)")->required();
  cmd->add_option("--prompts", opts->prompts, "File of prompts, one per line")->required();
  cmd->add_option("--max-tokens", opts->max_tokens, "Greedy tokens generated per prompt")->capture_default_str();
  cmd->add_option("--slots", opts->slots, "Cache sizes in experts (default 10/25/50/75% of all)")->delimiter(',');
  cmd->add_flag("--json", opts->json, "One JSON object");
  cmd->callback([opts, &exit_code] { exit_code = expert_trace(*opts); });
}

}  // namespace spillway::cli
