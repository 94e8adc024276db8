#include "tools/sampling_bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"
#include "engine/sampling/sampling_pool.h"

namespace spillway::tools {

using namespace engine;  // NOLINT: tools are written against the engine's types

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU time consumed so far, in ms: of the calling thread, or of the whole process.
double cpu_ms(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

std::vector<SamplingBenchCase> default_sampling_cases() {
  std::vector<SamplingBenchCase> cases;
  auto add = [&](std::string name, auto&& set) {
    SamplingBenchCase c;
    c.name = std::move(name);
    c.params.temperature = 1.0f;
    set(c.params);
    cases.push_back(std::move(c));
  };
  add("temperature 1, top_p 1", [](SamplingParams&) {});
  add("temperature 1, top_p 0.9", [](SamplingParams& p) { p.top_p = 0.9f; });
  add("temperature 1, top_k 40", [](SamplingParams& p) { p.top_k = 40; });
  add("temperature 1, min_p 0.05", [](SamplingParams& p) { p.min_p = 0.05f; });
  add("temperature 1, top_logprobs 5", [](SamplingParams& p) {
    p.logprobs = true;
    p.top_logprobs = 5;
  });
  add("greedy", [](SamplingParams& p) { p.temperature = 0.0f; });
  return cases;
}

Result<SamplingBenchResult> measure_sampling(const Model& model, engine::LayerWeightSource* weights,
                                             kernels::ThreadPool& pool, const SamplingBenchOptions& o) {
  const ModelConfig& c = model.config();
  if (o.rows < 1 || o.context < 1 || o.repeats < 1) {
    return Error{"bench --sampling: rows, context and repeats must be at least 1"};
  }
  if (o.context + 1 > c.n_ctx_train) {
    return Error{fmt::format("bench --sampling: a context of {} exceeds the model's {}", o.context,
                             c.n_ctx_train)};
  }
  constexpr int32_t kBlock = 16;
  const int32_t blocks_per_seq = (o.context + 1 + kBlock - 1) / kBlock;
  KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, kBlock, blocks_per_seq * o.rows);
  ForwardPass forward(model, kv, pool, std::max(o.rows, o.context), o.context + 1, weights);
  std::vector<std::vector<int32_t>> tables(o.rows);
  for (int32_t s = 0; s < o.rows; ++s) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) tables[s].push_back(s * blocks_per_seq + b);
  }

  // Every sequence gets its own random prompt (so the rows differ), prefilled one by one.
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::uniform_int_distribution<int32_t> random_id(0, c.n_vocab - 1);
  std::vector<std::vector<int32_t>> histories(o.rows);
  ForwardBatch fb;
  for (int32_t s = 0; s < o.rows; ++s) {
    std::vector<int32_t>& prompt = histories[s];
    for (int32_t i = 0; i < o.context; ++i) prompt.push_back(random_id(rng));
    fb.clear();
    fb.add_sequence(prompt.data(), o.context, 0, tables[s]);
    auto out = forward.execute(fb);
    if (!out) return out.error();
  }

  // The decode step (the same positions every repeat: its KV writes are idempotent).
  std::vector<int32_t> next(o.rows);
  for (int32_t& t : next) t = random_id(rng);
  fb.clear();
  for (int32_t s = 0; s < o.rows; ++s) {
    fb.add_sequence(&next[s], 1, o.context, tables[s]);
    fb.logit_rows.push_back(s);
  }
  std::vector<double> forward_ms, forward_cpu_ms;
  std::vector<float> logits;
  for (int32_t rep = 0; rep <= o.repeats; ++rep) {  // rep 0: warm-up
    const double cpu_start = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
    const auto start = Clock::now();
    auto out = forward.execute(fb);
    if (!out) return out.error();
    if (rep > 0) {
      forward_ms.push_back(ms_since(start));
      forward_cpu_ms.push_back(cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu_start);
    }
    logits.assign(out->begin(), out->end());
  }

  SamplingBenchResult r;
  r.n_vocab = c.n_vocab;
  r.rows = o.rows;
  r.threads = pool.size();
  r.forward_ms_per_step = median(forward_ms);
  r.forward_cpu_ms_per_step = median(forward_cpu_ms);
  r.cases = default_sampling_cases();
  SamplingPool sampling(pool);
  SamplerScratch scratch;
  std::vector<SampledToken> out(o.rows);
  for (SamplingBenchCase& bc : r.cases) {
    std::vector<Sampler> samplers;
    for (int32_t s = 0; s < o.rows; ++s) samplers.emplace_back(bc.params, o.seed + s);
    auto sample = [&](size_t s, SamplerScratch& sc) {
      samplers[s].sample(logits.data() + s * c.n_vocab, c.n_vocab, histories[s],
                         histories[s].size(), {}, sc, out[s]);
    };
    std::vector<double> serial, serial_cpu, pooled, pooled_cpu;
    for (int32_t rep = 0; rep <= o.repeats; ++rep) {  // rep 0: warm-up (scratch growth)
      double cpu_start = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
      auto start = Clock::now();
      for (int32_t s = 0; s < o.rows; ++s) sample(s, scratch);
      const double serial_ms = ms_since(start);
      const double serial_cpu_ms = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
      cpu_start = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
      start = Clock::now();
      sampling.for_each_row(o.rows, sample);
      const double pooled_ms = ms_since(start);
      const double pooled_cpu_ms = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
      if (rep > 0) {
        serial.push_back(serial_ms / o.rows);
        serial_cpu.push_back(serial_cpu_ms / o.rows);
        pooled.push_back(pooled_ms);
        pooled_cpu.push_back(pooled_cpu_ms);
      }
    }
    bc.ms_per_row_1_thread = median(serial);
    bc.cpu_ms_per_row_1_thread = median(serial_cpu);
    bc.ms_per_step_pool = median(pooled);
    bc.cpu_ms_per_step_pool = median(pooled_cpu);
  }
  return r;
}

}  // namespace spillway::tools
