#include "tools/diffusion_bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "engine/diffusion/canvas.h"
#include "engine/diffusion/generate.h"
#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"

namespace spillway::tools {

namespace dd = engine::diffusion;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

Result<std::vector<DiffusionBenchRow>> measure_diffusion(const engine::Model& model, engine::LayerWeightSource* weights,
                                                         kernels::ThreadPool& pool, const DiffusionBenchOptions& o) {
  const engine::ModelConfig& cfg = model.config();
  if (!cfg.is_diffusion()) return Error{"--diffusion needs a diffusion model (llada, dream, llada-moe)"};
  const int32_t length = o.prompt_tokens + o.gen_tokens;
  if (o.prompt_tokens < 1 || o.gen_tokens < 1 || length > cfg.n_ctx_train) {
    return Error{fmt::format("--prompt-tokens {} + --gen-tokens {} must be >= 1 each and fit the context {}",
                             o.prompt_tokens, o.gen_tokens, cfg.n_ctx_train)};
  }
  dd::DiffusionParams p = o.params;
  if (p.steps <= 0) p.steps = o.gen_tokens;
  if (p.block_length <= 0) p.block_length = o.gen_tokens;
  p.schedule = dd::Schedule::Block;
  p.blocks_over_canvas = false;
  if (Status st = dd::validate(p, o.prompt_tokens, length); !st) return st.error();
  const int32_t max_canvases = *std::max_element(o.canvases.begin(), o.canvases.end());
  constexpr int32_t kBlock = 16;
  const int32_t blocks_per_canvas = (length + kBlock - 1) / kBlock;
  engine::KvCache kv(cfg, kBlock, blocks_per_canvas * max_canvases, kernels::DType::F32);
  engine::ForwardPass forward(model, kv, pool, length * max_canvases, length, weights);
  std::mt19937_64 rng(o.seed);
  std::vector<std::vector<int32_t>> prompts(max_canvases);
  for (auto& prompt : prompts) {
    for (int32_t i = 0; i < o.prompt_tokens; ++i) {
      int32_t t;
      do t = static_cast<int32_t>(rng() % cfg.n_vocab); while (t == cfg.mask_token_id);
      prompt.push_back(t);
    }
  }
  std::vector<DiffusionBenchRow> out;
  engine::ForwardBatch batch;
  for (int32_t n : o.canvases) {
    if (n < 1) return Error{"--canvases: counts must be >= 1"};
    std::vector<DiffusionBenchRow> runs;
    for (int32_t rep = 0; rep < std::max(1, o.repeats); ++rep) {
      DiffusionBenchRow row;
      row.canvases = n;
      std::vector<std::unique_ptr<dd::Canvas>> canvases;
      for (int32_t c = 0; c < n; ++c) {
        canvases.push_back(std::make_unique<dd::Canvas>(prompts[c], length, cfg.mask_token_id, cfg.shift_logits, p));
      }
      const auto t0 = std::chrono::steady_clock::now();
      const double cpu0 = process_cpu_seconds();
      std::vector<dd::Canvas*> live;
      for (;;) {
        batch.clear();
        live.clear();
        for (int32_t c = 0; c < n; ++c) {
          dd::Canvas& canvas = *canvases[c];
          if (canvas.done()) continue;
          auto rows = canvas.pending() ? canvas.pending_rows() : canvas.begin_step();
          if (canvas.done()) continue;
          std::vector<int32_t> table(blocks_per_canvas);
          for (int32_t b = 0; b < blocks_per_canvas; ++b) table[b] = c * blocks_per_canvas + b;
          dd::add_canvas_step(canvas, rows, std::move(table), batch);
          live.push_back(&canvas);
        }
        if (live.empty()) break;
        auto logits = forward.execute(batch);
        if (!logits) return logits.error();
        ++row.forwards;
        const float* at = logits->data();
        for (dd::Canvas* canvas : live) {
          const size_t rows = canvas->pending_rows().size();
          canvas->commit(at, cfg.n_vocab);
          at += rows * size_t(cfg.n_vocab);
        }
      }
      row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      row.cpu_seconds = process_cpu_seconds() - cpu0;
      for (const auto& canvas : canvases) {
        row.committed += canvas->stats().committed;
        row.canvas_forwards += canvas->stats().forwards;
        row.rows_evaluated += canvas->stats().rows_evaluated;
      }
      runs.push_back(row);
    }
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.seconds < b.seconds; });
    out.push_back(runs[runs.size() / 2]);
  }
  return out;
}

}  // namespace spillway::tools
