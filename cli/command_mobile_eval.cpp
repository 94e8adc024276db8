// `spillway mobile-eval`: MoBiLE's big-little decoding (tools/mobile_decode.h) over prompts,
// one JSON line per (gamma, prompt) with the completion and the little / fallback step
// counts, for grading offline (bench/README.md, "MoBiLE").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "tools/mobile_decode.h"

namespace spillway::cli {

namespace {

struct MobileEvalOptions {
  std::string model;
  std::string prompts;
  std::vector<double> gammas = {0.0, 0.5, 0.7, 0.8, 1.0};
  int32_t little_experts = 0;
  int32_t max_tokens = 16;
};

int mobile_eval(const MobileEvalOptions& o) {
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
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) prompts.push_back(line);
  }
  kernels::ThreadPool pool(std::max(1u, std::thread::hardware_concurrency() / 2));
  for (double gamma : o.gammas) {
    for (const std::string& p : prompts) {
      tools::MobileOptions m{.little_experts = o.little_experts, .gamma = gamma, .max_new_tokens = o.max_tokens,
                             .eos_id = (*tokenizer)->eos_id()};
      auto r = tools::mobile_generate(**model, pool, (*tokenizer)->encode(p, true, false), m);
      if (!r) {
        fmt::print(stderr, "error: {}\n", r.error().message);
        return 1;
      }
      nlohmann::ordered_json j = {{"gamma", gamma},
                                  {"prompt", p},
                                  {"text", (*tokenizer)->decode(r->tokens, /*skip_special=*/true)},
                                  {"little_tokens", r->little_tokens},
                                  {"fallback_tokens", r->fallback_tokens}};
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  }
  return 0;
}

}  // namespace

void add_mobile_eval_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<MobileEvalOptions>();
  CLI::App* cmd = app.add_subcommand("mobile-eval", "MoBiLE big-little decoding of a MoE model over prompts (JSON lines)");
  cmd->add_option("--model", opts->model, "MoE model (GGUF)")->required();
  cmd->add_option("--prompts", opts->prompts, "File of prompts, one per line")->required();
  cmd->add_option("--gammas", opts->gammas, "Fallback thresholds on max softmax(logits)")->delimiter(',');
  cmd->add_option("--little-experts", opts->little_experts, "Experts of the little pass (default: top-k / 2)");
  cmd->add_option("--max-tokens", opts->max_tokens, "Greedy tokens per prompt")->capture_default_str();
  cmd->callback([opts, &exit_code] { exit_code = mobile_eval(*opts); });
}

}  // namespace spillway::cli
