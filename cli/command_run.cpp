// `spillway run`: completes a raw prompt (no chat template; BOS as the model's metadata
// says) and prints the text as it is generated, or one JSON object with --json.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tools/generator.h"
#include "engine/platform/memory_probe.h"
#include "engine/model/model.h"
#include "runtime/engine_bootstrap.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"
#include "cli/commands.h"
#include "server/observability/progress.h"
#include "cli/mobile_flags.h"
#include "cli/residency_flags.h"
#include "cli/run_diffusion.h"

namespace spillway::cli {

namespace {

struct RunOptions {
  std::string model;
  std::string prompt;
  int32_t max_tokens = 128;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  int threads = 0;
  int32_t ctx_size = 0;
  bool json = false;
  ResidencyFlags residency;
  MobileFlags mobile;             // MoE models: --moe-little-experts, --moe-fallback-confidence
  DiffusionRunOptions diffusion;  // diffusion models only (--diffusion-*)
};

int run(const RunOptions& o) {
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
  const engine::ModelConfig& cfg = (*model)->config();
  const std::vector<int32_t> prompt =
      (*tokenizer)->encode(o.prompt, /*add_special=*/true, /*parse_special=*/true);
  const int32_t ctx = o.ctx_size > 0 ? o.ctx_size
                                     : std::min<int32_t>(cfg.n_ctx_train,
                                                         static_cast<int32_t>(prompt.size()) + o.max_tokens);

  auto residency_opts = residency_options(o.residency);
  if (!residency_opts) {
    fmt::print(stderr, "error: {}\n", residency_opts.error().message);
    return 2;
  }
  auto mobile = mobile_settings(o.mobile);
  if (!mobile) {
    fmt::print(stderr, "error: {}\n", mobile.error().message);
    return 2;
  }
  const engine::LinuxMemorySource memory;
  server::ProgressReporter progress("reading the resident weights", "bytes",
                                    server::ProgressReporter::interactive_for(server::LogFormat::Text));
  auto booted = runtime::bootstrap_engine(
      **model,
      runtime::EngineBootstrapOptions{.residency = *residency_opts,
                                      .context_tokens = ctx,
                                      .max_batch_tokens = 512,
                                      .threads = o.threads,
                                      .progress = server::resident_weights_progress(progress)},
      memory);
  if (!booted) {
    fmt::print(stderr, "error: {}\n", booted.error().message);
    return 1;
  }
  const engine::ResidencySetup& setup = *booted->residency;
  const engine::ResidencyController& controller = *booted->controller;
  for (const std::string& line : setup.describe(**model)) fmt::print(stderr, "{}\n", line);

  if (cfg.is_diffusion()) {
    DiffusionRunOptions d = o.diffusion;
    d.max_tokens = o.max_tokens;
    d.temperature = o.temperature;
    d.top_k = o.top_k;
    d.top_p = o.top_p;
    d.seed = o.seed;
    d.json = o.json;
    return run_diffusion(**model, **tokenizer, prompt, *booted->pool, booted->weights(), d);
  }

  tools::Generator generator(**model, *booted->pool, std::max<int32_t>(ctx, 1), 16, booted->weights());
  tools::GenerateOptions gen;
  gen.max_tokens = o.max_tokens;
  gen.sampling.temperature = o.temperature;
  gen.sampling.top_k = o.top_k;
  gen.sampling.top_p = o.top_p;
  gen.sampling.min_p = o.min_p;
  gen.sampling.repetition_penalty = o.repetition_penalty;
  gen.sampling.seed = o.seed;
  gen.after_step = [&] { booted->between_steps(); };
  gen.mobile = *mobile;

  engine::StreamingDetokenizer detok(**tokenizer, /*skip_special=*/true);
  std::string text;
  auto on_token = [&](int32_t id) {
    std::string piece = detok.push(id);
    text += piece;
    if (!o.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };
  auto result = generator.generate(prompt, gen, tokenizer->get(), on_token);
  if (!result) {
    fmt::print(stderr, "error: {}\n", result.error().message);
    return 1;
  }
  std::string tail = detok.flush();
  text += tail;

  const double pp_tps = result->prompt_seconds > 0 ? prompt.size() / result->prompt_seconds : 0.0;
  // The first generated token comes from the prompt's forward; later ones from decode steps.
  const size_t decode_steps = result->tokens.empty() ? 0 : result->tokens.size() - 1;
  const double tg_tps = result->generate_seconds > 0 ? decode_steps / result->generate_seconds : 0.0;
  if (o.json) {
    nlohmann::ordered_json j;
    j["prompt_tokens"] = prompt;
    j["tokens"] = result->tokens;
    j["text"] = text;
    j["prompt_tokens_per_second"] = pp_tps;
    j["tokens_per_second"] = tg_tps;
    const engine::WeightResidency& w = *setup.weights;
    const engine::StreamerStats io = w.streamer_stats();
    const engine::MemoryReading now = memory.read();
    // The residency metrics of the server's /metrics, under the same names without prefix.
    j["residency"] = {
        {"resident_layers", w.resident_layers()},
        {"streamed_layers", w.n_layers() - w.resident_layers()},
        {"resident_weight_bytes", w.resident_weight_bytes()},
        {"weight_bytes_read_total", io.bytes_read},
        {"weight_stream_bandwidth_bytes_per_second",
         io.read_seconds > 0 ? static_cast<double>(io.bytes_read) / io.read_seconds : 0.0},
        {"io_stall_seconds_total", io.stall_seconds},
        {"memory_limit_bytes", now.limit_bytes},
        {"memory_available_bytes", now.available_bytes},
        {"memory_pressure_ratio", now.pressure_some_avg10 / 100.0},
        {"residency_shed_total", controller.shed_total()},
        {"residency_readmit_total", controller.readmit_total()},
        {"disk_read_bandwidth_at_start_bytes_per_second", setup.disk_bytes_per_second},
    };
    if (w.expert_tier()) j["experts"] = expert_json(engine::expert_cache_report(w.expert_cache_stats()));
    if (engine::moe_top_k(cfg) > 0) {  // MoBiLE, under the metrics' names
      j["mobile"] = {{"moe_little_tokens_total", result->mobile_little_tokens},
                     {"moe_fallback_tokens_total", result->mobile_fallback_tokens}};
    }
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n", tail);
    fmt::print(stderr, "prompt: {} tokens, {:.1f} tok/s; generated: {} tokens, {:.1f} tok/s\n",
               prompt.size(), pp_tps, result->tokens.size(), tg_tps);
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Complete a raw prompt and print the text");
  cmd->add_option("--model", opts->model, "GGUF file or Hugging Face folder")->required();
  cmd->add_option("--prompt", opts->prompt, "Prompt text (no chat template)")->required();
  cmd->add_option("--max-tokens", opts->max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", opts->temperature, "0 = greedy")->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--top-k", opts->top_k, "0 = off")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", opts->top_p)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", opts->min_p)->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty", opts->repetition_penalty)->check(CLI::PositiveNumber);
  cmd->add_option("--seed", opts->seed, "RNG seed (same seed, same output)");
  cmd->add_option("--threads", opts->threads, "Kernel threads (default: the physical cores)");
  cmd->add_option("--ctx-size", opts->ctx_size, "Context size (default: prompt + max tokens)");
  cmd->add_flag("--json", opts->json, "Print one JSON object with ids, text and speeds");
  cmd->add_option("--diffusion-steps", opts->diffusion.steps,
                  "Diffusion models: denoising steps (default: --max-tokens)")->check(CLI::PositiveNumber);
  cmd->add_option("--diffusion-block-length", opts->diffusion.block_length,
                  "Diffusion models: block schedule with blocks of N (default: timestep schedule)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--diffusion-eps", opts->diffusion.eps, "Diffusion timestep schedule epsilon")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--diffusion-algorithm", opts->diffusion.algorithm,
                  "Diffusion commit order: confidence, entropy, margin, random, origin");
  cmd->add_option("--diffusion-alg-temp", opts->diffusion.alg_temp, "Diffusion: sample commit positions (0 = top)")
      ->check(CLI::NonNegativeNumber);
  add_residency_flags(*cmd, opts->residency);
  add_mobile_flags(*cmd, opts->mobile);
  cmd->callback([opts, &exit_code] { exit_code = run(*opts); });
}

}  // namespace spillway::cli
