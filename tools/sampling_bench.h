// Measures sampling against the forward, for `spillway bench --sampling`: one decode step
// of `rows` sequences (each after a `context`-token prompt) is forwarded, and its logit
// rows are sampled under several parameter sets, (a) one row after another on the calling
// thread (ms per row, single-threaded) and (b) all rows on the kernel pool as the runner
// does (engine/sampling_pool.h), next to the step's forward time. Medians of `repeats`.
// Wall time and CPU time are both reported: on a shared machine the wall figures carry the
// neighbours' load, while thread / process CPU time counts the work done (process CPU time
// of the pool also counts a worker's short spin before it sleeps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/sampling/sampling.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct SamplingBenchOptions {
  int32_t rows = 64;      // sequences in the decode step
  int32_t context = 32;   // prompt tokens per sequence before the step
  int32_t repeats = 5;
  uint64_t seed = 1;
};

struct SamplingBenchCase {
  std::string name;             // e.g. "temperature 1, top_p 1"
  engine::SamplingParams params;
  double ms_per_row_1_thread = 0;      // median over repeats of (serial wall time / rows)
  double cpu_ms_per_row_1_thread = 0;  // the same in the thread's CPU time
  double ms_per_step_pool = 0;         // median over repeats, all rows on the pool, wall
  double cpu_ms_per_step_pool = 0;     // the same in process CPU time (all threads)
};

struct SamplingBenchResult {
  int32_t n_vocab = 0;
  int32_t rows = 0;
  int threads = 0;
  double forward_ms_per_step = 0;      // median decode-step forward of `rows` sequences, wall
  double forward_cpu_ms_per_step = 0;  // the same in process CPU time (all threads)
  std::vector<SamplingBenchCase> cases;
};

// The parameter sets measured: OpenAI's default (temperature 1, top_p 1), top_p 0.9,
// top_k 40, min_p 0.05, temperature 1 with 5 top_logprobs, and greedy.
std::vector<SamplingBenchCase> default_sampling_cases();

// weights: the serving path's layer weights (spillway bench's residency setup: resident
// layers tiled at load, streamed ones read ahead), or null for the file mapping, which
// repacks every matrix into tiles on every step and so inflates the forward's time.
Result<SamplingBenchResult> measure_sampling(const engine::Model& model, engine::LayerWeightSource* weights,
                                             kernels::ThreadPool& pool, const SamplingBenchOptions& options);

}  // namespace spillway::tools
