// Measures the engine's raw speeds on a model, for `spillway bench`: prefill (one forward
// of P prompt tokens), decode (G steps of one token after the prompt) and batched decode
// (G steps of B sequences, one token each), with greedy argmax and no sampling or
// tokenization. Random prompt ids, fixed seed. Reports the median of R repeats.
//
// Also computes the work each measures, so callers can turn speeds into fractions of the
// machine's limits: the bytes a decode step reads (every weight matrix once, plus the KV
// of the context) and the operations a prefill token costs.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/result.h"
#include "engine/forward/forward.h"
#include "engine/forward/mobile_params.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/model/model.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct ThroughputOptions {
  int32_t prompt_tokens = 512;
  int32_t gen_tokens = 128;
  int32_t batch = 16;    // sequences in the batched-decode measurement; <= 1 skips it
  int32_t repeats = 3;
  uint64_t seed = 1;
  bool profile = false;  // also time the parts of the forward (ThroughputResult::*_profile)
  // MoE models: MoBiLE big-little steps in the one-sequence decode (the batched decode
  // runs the full k).
  engine::MobileSettings mobile;
};

struct ThroughputResult {
  double pp_tokens_per_second = 0;        // prefill
  double tg_tokens_per_second = 0;        // decode, one sequence
  double batch_tg_tokens_per_second = 0;  // decode, `batch` sequences, all tokens counted
  int32_t batch = 0;
  // Work per unit measured.
  // Matrices one decode token reads (embedding rows aside; MoE: the top-k routed experts).
  double weight_bytes_per_decode_token = 0;
  double kv_bytes_per_decode_token = 0;   // KV read at the mean decode context
  double state_bytes_per_decode_token = 0;  // hybrid models: the recurrent state a step reads (0 otherwise)
  // 2 x the MACs of the matrices a prompt token runs through (MoE: top-k experts), the
  // output matrix's once per prompt (spread over its tokens), attention at the mean context.
  double ops_per_prefill_token = 0;
  std::vector<double> pp_samples, tg_samples;  // per repeat, tokens per second
  int64_t mobile_little_tokens = 0, mobile_fallback_tokens = 0;  // MoBiLE, one-sequence decode
  // With ThroughputOptions::profile: wall time per part of the forward, summed over repeats.
  engine::ForwardProfile pp_profile, tg_profile, batch_profile;
};

// weights: null for the model's file mapping. One untimed prefill warms up first;
// after_warm_up runs then (e.g. to snapshot cumulative I/O counters), after_step after
// every forward step, warm-up included. around_decode(true) runs just before and
// around_decode(false) just after each repeat's timed single-sequence decode (outside the
// timed span), e.g. to attribute I/O counters to decode alone.
Result<ThroughputResult> measure_throughput(const engine::Model& model, engine::LayerWeightSource* weights,
                                            kernels::ThreadPool& pool,
                                            const ThroughputOptions& options,
                                            const std::function<void()>& after_step = {},
                                            const std::function<void()>& after_warm_up = {},
                                            const std::function<void(bool begin)>& around_decode = {});

}  // namespace spillway::tools
