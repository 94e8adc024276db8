#include "cli/run_diffusion.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"

namespace spillway::cli {

int run_diffusion(const engine::Model& model, const engine::Tokenizer& tokenizer,
                  const std::vector<int32_t>& prompt, kernels::ThreadPool& pool,
                  engine::LayerWeightSource* weights, const DiffusionRunOptions& o) {
  namespace dd = engine::diffusion;
  const engine::ModelConfig& cfg = model.config();
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  const int32_t length = n_prompt + o.max_tokens;

  dd::DiffusionParams p;
  p.steps = o.steps > 0 ? o.steps : o.max_tokens;
  p.schedule = o.block_length > 0 ? dd::Schedule::Block : dd::Schedule::Timestep;
  p.block_length = o.block_length;
  p.eps = o.eps;
  auto alg = dd::parse_algorithm(o.algorithm);
  if (!alg) {
    fmt::print(stderr, "error: --diffusion-{}\n", alg.error().message);
    return 2;
  }
  p.algorithm = *alg;
  p.alg_temp = o.alg_temp;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.seed = static_cast<uint32_t>(o.seed.value_or(42));
  if (Status st = dd::validate(p, n_prompt, length); !st) {
    fmt::print(stderr, "error: diffusion {}\n", st.error().message);
    return 2;
  }

  // F32 K/V: the canvas is rewritten every step, and llama.cpp's no-cache diffusion graph
  // keeps K/V in F32, so F16 rounding would only add near-tie flips.
  constexpr int32_t kBlock = 16;
  const int32_t n_blocks = (length + kBlock - 1) / kBlock;
  engine::KvCache kv(cfg, kBlock, n_blocks, kernels::DType::F32);
  engine::ForwardPass forward(model, kv, pool, length, length, weights);
  std::vector<int32_t> table(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;

  dd::Canvas canvas(prompt, length, cfg.mask_token_id, cfg.shift_logits, p);
  const auto start = std::chrono::steady_clock::now();
  Status st = dd::run_canvas(forward, canvas, table);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!st) {
    fmt::print(stderr, "error: {}\n", st.error().message);
    return 1;
  }
  const std::vector<int32_t> tokens(canvas.tokens().begin() + n_prompt, canvas.tokens().end());
  engine::StreamingDetokenizer detok(tokenizer, /*skip_special=*/true);
  std::string text;
  for (int32_t id : tokens) text += detok.push(id);
  text += detok.flush();
  const dd::CanvasStats& s = canvas.stats();
  if (o.json) {
    nlohmann::ordered_json j;
    j["prompt_tokens"] = prompt;
    j["tokens"] = tokens;
    j["text"] = text;
    j["diffusion"] = {{"forwards", s.forwards},
                      {"steps", s.steps_run},
                      {"tokens_per_forward", s.forwards ? double(s.committed) / s.forwards : 0.0},
                      {"rows_evaluated", s.rows_evaluated},
                      {"seconds", seconds}};
    fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}\n", text);
    fmt::print(stderr, "diffusion: {} tokens, {} forwards ({} steps), {:.2f} tokens/forward, {:.1f} tok/s\n",
               tokens.size(), s.forwards, s.steps_run, s.forwards ? double(s.committed) / s.forwards : 0.0,
               seconds > 0 ? tokens.size() / seconds : 0.0);
  }
  return 0;
}

}  // namespace spillway::cli
