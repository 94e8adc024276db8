// bench_stream_read MODEL [STEPS] [READ_THREADS] [CHUNK_MIB] [direct|buffered|auto] [tiled|file]
//   (file: keep the file's layout, no retiling on the reader threads: pure I/O)
// bench_stream_read --plan MODEL BUDGET_MIB   (the residency plan at that budget: staging
//                                            and resident layers, pieces vs whole layers)
// bench_stream_read --make-1b PATH   (writes a 1.1B-llama-shaped random Q8_0 model: 22
//                                     layers, d 2048, ff 5632, 32/4 heads, vocab 32000)
//
// The streamer's read bandwidth on a model file, without compute: every layer streamed,
// each step acquires every layer's matrices in forward order and releases them at once
// (so the forward's compute never hides the reads: this is what the device gives the
// streamer). Prints one line per figure; compare with `dd if=MODEL of=/dev/null bs=4M
// iflag=direct` run just before and after (bench/stream_read/run.sh), since the device's
// bandwidth drifts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/model/model.h"
#include "engine/residency/residency_plan.h"
#include "engine/residency/residency_setup.h"
#include "engine/residency/weight_residency.h"
#include "engine/state/kv_cache.h"
#include "tools/demo_model.h"

using namespace spillway;
using namespace spillway::engine;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [STEPS] [READ_THREADS] [CHUNK_MIB] [direct|buffered|auto]\n", argv[0]);
    return 2;
  }
  if (std::string(argv[1]) == "--make-1b" && argc > 2) {
    tools::DemoModelOptions d;
    d.layers = 22, d.dim = 2048, d.ff = 5632, d.heads = 32, d.kv_heads = 4, d.vocab = 32000;
    d.type = kernels::DType::Q8_0;
    const Status st = tools::write_demo_model(argv[2], d);
    if (!st) std::fprintf(stderr, "%s\n", st.error().message.c_str());
    return st ? 0 : 1;
  }
  if (std::string(argv[1]) == "--plan" && argc > 3) {
    auto model = Model::open(argv[2]);
    if (!model) return 1;
    const ModelConfig& c = (*model)->config();
    auto units = WeightResidency::measure(**model, {});
    if (!units) return 1;
    ResidencySizes sizes;
    sizes.non_layer_bytes = units->non_layer_bytes;
    sizes.layer_bytes = units->layer_bytes;
    sizes.kv_bytes_per_token = KvCache::bytes_per_token(c, kernels::DType::F16);
    sizes.context_tokens = c.n_ctx_train;
    sizes.runtime_reserve_bytes = runtime_reserve_bytes(c, ResidencyDemand{.context_tokens = c.n_ctx_train,
                                                                           .max_batch_tokens = 512, .threads = 2});
    ResidencyOptions o;
    o.memory_budget_bytes = static_cast<int64_t>(std::atof(argv[3]) * 1048576.0);
    const int64_t largest = *std::max_element(sizes.layer_bytes.begin(), sizes.layer_bytes.end());
    for (const bool pieces : {false, true}) {
      sizes.staging_bytes = pieces ? units->staging_bytes : (o.prefetch_depth + 1) * largest;
      sizes.staging_slots = pieces ? units->staging_slots : o.prefetch_depth + 1;
      auto plan = plan_residency(sizes, o, 0);
      if (!plan) {
        fmt::print("{}: {}\n", pieces ? "pieces" : "whole layers", plan.error().message);
        continue;
      }
      fmt::print("{:>12}: budget {:.0f} MiB, staging {:.1f} MiB in {} slots, {} of {} layers resident ({:.1f} MiB), "
                 "streamed {:.1f} MiB per step; non-layer {:.1f} MiB, KV reserve {:.1f} MiB, runtime {:.1f} MiB\n",
                 pieces ? "pieces" : "whole layers", plan->budget_bytes / 1048576.0,
                 plan->staging_bytes / 1048576.0, sizes.staging_slots, plan->resident_layers, c.n_layers,
                 plan->resident_layer_bytes / 1048576.0, plan->streamed_bytes_per_step / 1048576.0,
                 plan->non_layer_bytes / 1048576.0, plan->kv_reserve_bytes / 1048576.0,
                 plan->runtime_reserve_bytes / 1048576.0);
    }
    return 0;
  }
  const std::string path = argv[1];
  const int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  WeightResidencyOptions o;
  if (argc > 3) o.stream.read_threads = std::atoi(argv[3]);
  if (argc > 4) o.stream.chunk_bytes = static_cast<uint64_t>(std::atof(argv[4]) * 1048576.0);
  const std::string mode = argc > 5 ? argv[5] : "auto";
  if (mode == "direct") o.read_mode_probe_bytes = 0;
  if (mode == "buffered") o.direct_io = false;
  if (argc > 6 && std::string(argv[6]) == "file") o.keep_file_layout = true;
  auto model = Model::open(path);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  const int32_t n = (*model)->config().n_layers;
  auto w = WeightResidency::create(**model, std::vector<bool>(n, false), o);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.error().message.c_str());
    return 1;
  }
  WeightResidency& r = **w;
  if (!r.read_mode_summary().empty()) fmt::print("{}\n", r.read_mode_summary());
  fmt::print("staging: {} slots, {:.1f} MiB (largest layer {:.1f} MiB); {} read threads, {:.1f} MiB requests, {}\n",
             r.staging_slots(), r.staging_bytes() / 1048576.0, r.layer_bytes(0) / 1048576.0, o.stream.read_threads,
             o.stream.chunk_bytes / 1048576.0, r.direct_io() ? "O_DIRECT" : "buffered + DONTNEED");
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    for (int32_t l = 0; l < n; ++l) {
      auto block = r.acquire_layer(l);
      if (!block) return 1;
      std::vector<const kernels::WeightMatrix*> ms;
      const_cast<BlockWeights*>(*block)->for_each_matrix([&](const kernels::WeightMatrix& m) { ms.push_back(&m); });
      for (const kernels::WeightMatrix* m : ms) {
        const kernels::WeightMatrix* one[] = {m};
        if (Status st = r.acquire_matrices(l, one); !st) {
          std::fprintf(stderr, "%s\n", st.error().message.c_str());
          return 1;
        }
        r.release_matrices(l, one);
      }
      r.release_layer(l);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const StreamerStats st = r.streamer_stats();
  const double per_step = static_cast<double>(r.streamed_bytes_per_step());
  fmt::print("streamer: {} steps of {:.1f} MiB in {:.2f} s: {:.0f} MB/s consumed; {:.0f} MB/s while reads were in "
             "flight; stalls {:.2f} s; restarts {}\n",
             steps, per_step / 1048576.0, seconds, per_step * steps / seconds / 1e6,
             st.bytes_read / std::max(st.read_seconds, 1e-9) / 1e6, st.stall_seconds, st.restarts);
  return 0;
}
