// Diffusion throughput for `spillway bench --diffusion`: N canvases (random prompts, fixed
// seed) denoised together, every step one forward holding the pending step of each canvas
// still running (engine::diffusion::add_canvas_step), then each canvas commits from its
// logits rows; a canvas leaves the batch when it is done. Reports aggregate committed tokens
// per second for each N (wall and process CPU time), forwards and rows evaluated, and the
// same totals as the scheduler's usage.diffusion would show.
//
// Thread: runs on the calling thread with the kernel pool; not re-entrant.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "engine/diffusion/params.h"
#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct DiffusionBenchOptions {
  std::vector<int32_t> canvases = {1, 2, 4, 8};
  int32_t prompt_tokens = 32;
  int32_t gen_tokens = 64;  // canvas positions after the prompt
  // Sampler: steps 0 = one token per step (gen_tokens); block_length 0 = the whole
  // generation is one block. threshold etc. as the API's turbo.
  engine::diffusion::DiffusionParams params;
  int32_t repeats = 1;
  uint64_t seed = 1;
};

struct DiffusionBenchRow {
  int32_t canvases = 0;
  int64_t committed = 0;       // positions committed over all canvases (one repeat)
  int64_t forwards = 0;        // engine forwards (one per batched step)
  int64_t canvas_forwards = 0; // per-canvas forwards summed (usage.diffusion.forwards)
  int64_t rows_evaluated = 0;  // canvas rows forwarded
  double seconds = 0;          // median wall time of one repeat
  double cpu_seconds = 0;      // process CPU time of that repeat
  double tokens_per_second() const { return seconds > 0 ? committed / seconds : 0; }
  double tokens_per_cpu_second() const { return cpu_seconds > 0 ? committed / cpu_seconds : 0; }
};

// Errors: options the model cannot run (not a diffusion model, canvas over the context),
// or a forward error.
// weights: as measure_throughput's (the serving path's layer weights; null: the file mapping,
// which repacks every matrix on every step).
Result<std::vector<DiffusionBenchRow>> measure_diffusion(const engine::Model& model, engine::LayerWeightSource* weights,
                                                         kernels::ThreadPool& pool, const DiffusionBenchOptions& options);

}  // namespace spillway::tools
