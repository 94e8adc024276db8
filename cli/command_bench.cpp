// `spillway bench`: prefill, decode and batched-decode speeds of a model, each also as a
// fraction of the physical limit measured in the same run (bench/README.md):
//   decode: (weight bytes + KV bytes + recurrent-state bytes read per token) x tok/s / DRAM
//   read bandwidth;
//   prefill: ops per token x tok/s / the compute peak of the weights' dot product (int8
//   for quantized weights, bf16 for F16/BF16, fp32 for F32);
//   with layers streamed from disk: streamed bytes per step x steps/s / disk bandwidth.
// The machine is probed before and after the measurement; the bounds are the better of the two.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "engine/platform/memory_probe.h"
#include "engine/model/model.h"
#include "runtime/engine_bootstrap.h"
#include "tools/throughput_bench.h"
#include "kernels/probe/machine_probe.h"
#include "tools/sampling_bench.h"
#include "tools/diffusion_bench.h"
#include "kernels/thread_pool.h"
#include "cli/commands.h"
#include "server/observability/progress.h"
#include "cli/mobile_flags.h"
#include "cli/residency_flags.h"

namespace spillway::cli {

namespace {

struct BenchOptions {
  std::string model;
  tools::ThroughputOptions throughput;
  int threads = 0;
  bool json = false;
  bool no_streaming = false;
  bool no_probe = false;
  bool file_layout = false;
  bool sampling = false;
  tools::SamplingBenchOptions sampling_options;
  ResidencyFlags residency;
  MobileFlags mobile;  // MoE models: MoBiLE in the one-sequence decode
  bool diffusion = false;  // bench --diffusion (tools/diffusion_bench.h)
  tools::DiffusionBenchOptions diffusion_options;
  std::string diffusion_sampler = "reference";
  float diffusion_threshold = 0.0f;
};

struct Peak {
  const char* kind;
  double ops_per_second;
};

Peak prefill_peak(kernels::DType t, const kernels::MachinePeaks& m) {
  switch (t) {
    case kernels::DType::F32: return {"fp32", m.fp32_flops};
    case kernels::DType::F16:
    case kernels::DType::BF16: return {"bf16", m.bf16_flops > 0 ? m.bf16_flops : m.fp32_flops};
    default: return {"int8", m.int8_ops_per_second};
  }
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The probe's DRAM buffer, sized to the memory left now (above the pressure floor when a
// controller runs): a fixed 512 MiB buffer got `bench` OOM-killed in small cgroups.
kernels::ProbeOptions probe_options(const engine::MemorySource& memory, const engine::ResidencyController* controller) {
  const engine::MemoryReading m = memory.read();
  const int64_t floor = controller ? controller->policy().floor_for(m.limit_bytes) : 0;
  kernels::ProbeOptions o;
  o.buffer_bytes = kernels::probe_buffer_bytes_for(m.available_bytes - floor);
  return o;
}

nlohmann::ordered_json events_json(const engine::ResidencyController& c) {
  nlohmann::ordered_json out = nlohmann::json::array();
  for (const engine::ResidencyEvent& e : c.events()) {
    out.push_back({{"seconds", e.seconds},
                   {"step", e.step},
                   {"reason", e.reason},
                   {"layers_shed", e.layers_shed},
                   {"layers_readmitted", e.layers_readmitted},
                   {"expert_slots_shed", e.expert_slots_shed},
                   {"expert_slots_readmitted", e.expert_slots_readmitted},
                   {"resident_layers_after", e.resident_layers_after},
                   {"available_bytes", e.available_bytes},
                   {"floor_bytes", e.floor_bytes},
                   {"pressure_some_avg10", e.pressure_some_avg10}});
  }
  return out;
}

// `bench --diffusion`: aggregate committed tokens/s for 1, 2, 4, 8 canvases batched.
int bench_diffusion(const BenchOptions& o, const engine::Model& model, engine::LayerWeightSource* weights,
                    kernels::ThreadPool& pool) {
  tools::DiffusionBenchOptions d = o.diffusion_options;
  d.prompt_tokens = o.throughput.prompt_tokens;
  d.gen_tokens = o.throughput.gen_tokens;
  d.repeats = o.throughput.repeats;
  if (o.diffusion_sampler == "turbo") {
    d.params.threshold = 0.95f;  // the API's turbo preset
    d.params.threshold_low = 0.80f;
    d.params.threshold_switch = 8;
  }
  if (o.diffusion_threshold > 0.0f) d.params.threshold = o.diffusion_threshold;
  fmt::print(stderr, "measuring diffusion: prompt {} + canvas {} tokens, {} sampler, {} threads\n", d.prompt_tokens,
             d.gen_tokens, d.params.turbo() ? "turbo" : "reference", pool.size());
  auto rows = tools::measure_diffusion(model, weights, pool, d);
  if (!rows) {
    fmt::print(stderr, "error: {}\n", rows.error().message);
    return 1;
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : *rows) {
      j.push_back({{"canvases", r.canvases}, {"committed", r.committed}, {"forwards", r.forwards},
                   {"canvas_forwards", r.canvas_forwards}, {"rows_evaluated", r.rows_evaluated},
                   {"seconds", r.seconds}, {"cpu_seconds", r.cpu_seconds},
                   {"tokens_per_second", r.tokens_per_second()}, {"tokens_per_cpu_second", r.tokens_per_cpu_second()}});
    }
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{:>8} {:>10} {:>9} {:>14} {:>12} {:>14} {:>10}\n", "canvases", "committed", "forwards",
             "rows evaluated", "tok/s wall", "tok/s CPU", "vs 1");
  const double one = rows->front().tokens_per_cpu_second();
  for (const auto& r : *rows) {
    fmt::print("{:>8} {:>10} {:>9} {:>14} {:>12.1f} {:>14.1f} {:>9.2f}x\n", r.canvases, r.committed, r.forwards,
               r.rows_evaluated, r.tokens_per_second(), r.tokens_per_cpu_second(),
               one > 0 ? r.tokens_per_cpu_second() / one : 0.0);
  }
  return 0;
}

// `bench --sampling`: sampling time per row and per step against the step's forward.
int bench_sampling(const BenchOptions& o, const engine::Model& model, engine::LayerWeightSource* weights,
                   kernels::ThreadPool& pool) {
  fmt::print(stderr, "measuring sampling: a decode step of {} sequences, {} repeats, {} threads\n",
             o.sampling_options.rows, o.sampling_options.repeats, pool.size());
  auto result = tools::measure_sampling(model, weights, pool, o.sampling_options);
  if (!result) {
    fmt::print(stderr, "error: {}\n", result.error().message);
    return 1;
  }
  const tools::SamplingBenchResult& r = *result;
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["n_vocab"] = r.n_vocab;
  j["rows"] = r.rows;
  j["threads"] = r.threads;
  j["forward_ms_per_step"] = r.forward_ms_per_step;
  j["forward_cpu_ms_per_step"] = r.forward_cpu_ms_per_step;
  j["cases"] = nlohmann::json::array();
  for (const tools::SamplingBenchCase& bc : r.cases) {
    j["cases"].push_back({{"name", bc.name},
                          {"ms_per_row_1_thread", bc.ms_per_row_1_thread},
                          {"cpu_ms_per_row_1_thread", bc.cpu_ms_per_row_1_thread},
                          {"ms_per_step_pool", bc.ms_per_step_pool},
                          {"cpu_ms_per_step_pool", bc.cpu_ms_per_step_pool},
                          {"fraction_of_forward", ratio(bc.ms_per_step_pool, r.forward_ms_per_step)},
                          {"cpu_fraction_of_forward",
                           ratio(bc.cpu_ms_per_step_pool, r.forward_cpu_ms_per_step)}});
  }
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{} (vocabulary {}), {} threads: forward of a {}-sequence decode step {:.2f} ms "
             "(CPU {:.2f} ms)\n",
             o.model, r.n_vocab, r.threads, r.rows, r.forward_ms_per_step, r.forward_cpu_ms_per_step);
  fmt::print("  {:<30} {:>17} {:>17} {:>21}\n", "sampling", "ms/row, 1 thread", "ms/step, pool",
             "% of forward");
  fmt::print("  {:<30} {:>17} {:>17} {:>21}\n", "", "wall (CPU)", "wall (CPU)", "wall (CPU)");
  for (const tools::SamplingBenchCase& bc : r.cases) {
    fmt::print("  {:<30} {:7.3f} ({:7.3f}) {:7.2f} ({:7.2f}) {:9.1f}% ({:6.1f}%)\n", bc.name,
               bc.ms_per_row_1_thread, bc.cpu_ms_per_row_1_thread, bc.ms_per_step_pool,
               bc.cpu_ms_per_step_pool, 100 * ratio(bc.ms_per_step_pool, r.forward_ms_per_step),
               100 * ratio(bc.cpu_ms_per_step_pool, r.forward_cpu_ms_per_step));
  }
  return 0;
}

int bench(const BenchOptions& o) {
  auto model = engine::Model::open(o.model);
  if (!model) {
    fmt::print(stderr, "error: {}\n", model.error().message);
    return 1;
  }
  const engine::ModelConfig& cfg = (*model)->config();
  const engine::LinuxMemorySource memory;
  runtime::EngineBootstrapOptions boot{
      .residency = std::nullopt,
      .context_tokens = o.throughput.prompt_tokens + o.throughput.gen_tokens,
      .max_batch_tokens = std::max(o.throughput.prompt_tokens, o.throughput.batch),
      .threads = o.threads,
      .progress = {}};
  server::ProgressReporter progress("reading the resident weights", "bytes",
                                    server::ProgressReporter::interactive_for(server::LogFormat::Text));
  if (!o.no_streaming) {
    auto options = residency_options(o.residency);
    if (!options) {
      fmt::print(stderr, "error: {}\n", options.error().message);
      return 2;
    }
    options->keep_file_layout = o.file_layout;
    boot.residency = *options;
    boot.progress = server::resident_weights_progress(progress);
  }
  auto booted = runtime::bootstrap_engine(**model, boot, memory);
  if (!booted) {
    fmt::print(stderr, "error: {}\n", booted.error().message);
    return 1;
  }
  const int threads = booted->threads;
  kernels::ThreadPool& pool = *booted->pool;
  const engine::ResidencySetup* setup = booted->residency.get();
  // The serving path's weights (null with --no-streaming: the file mapping, repacked on
  // every matmul).
  engine::LayerWeightSource* weights = setup ? setup->weights.get() : nullptr;
  if (o.sampling) return bench_sampling(o, **model, weights, pool);
  if (o.diffusion) return bench_diffusion(o, **model, weights, pool);
  const engine::ResidencyController* controller = booted->controller.get();
  if (setup) {
    for (const std::string& line : setup->describe(**model)) fmt::print(stderr, "{}\n", line);
  }

  kernels::MachinePeaks peaks;
  size_t probe_buffer = 0;
  if (!o.no_probe) {
    const kernels::ProbeOptions po = probe_options(memory, controller);
    probe_buffer = po.buffer_bytes;
    fmt::print(stderr, "probing the machine (DRAM bandwidth over {} MiB, compute peaks)...\n", po.buffer_bytes >> 20);
    peaks = kernels::probe_machine(pool, po);
  }
  fmt::print(stderr, "measuring: {} prompt tokens, {} generated, batch {}, {} repeats, {} threads\n",
             o.throughput.prompt_tokens, o.throughput.gen_tokens, o.throughput.batch,
             o.throughput.repeats, threads);
  engine::StreamerStats io_before;  // the warm-up's reads are not part of the measurement
  engine::ExpertCacheStats experts_before;
  // The expert tier over the timed decode runs alone: the counters summed over repeats.
  engine::ExpertCacheStats decode_start, decode_sum;
  auto result = tools::measure_throughput(
      **model, setup ? setup->weights.get() : nullptr, pool, o.throughput,
      [&] { booted->between_steps(); },
      [&] {
        if (!setup) return;
        io_before = setup->weights->streamer_stats();
        experts_before = setup->weights->expert_cache_stats();
      },
      [&](bool begin) {
        if (!setup || !setup->weights->expert_tier()) return;
        if (begin) {
          decode_start = setup->weights->expert_cache_stats();
        } else {
          accumulate_expert_stats(decode_sum, setup->weights->expert_cache_stats(), decode_start);
        }
      });
  if (!result) {
    fmt::print(stderr, "error: {}\n", result.error().message);
    return 1;
  }
  if (!o.no_probe) {
    // The machine is shared: probe again after measuring and keep the better figures, so a
    // quiet moment during the run raises the bounds rather than flattering the fractions.
    const kernels::ProbeOptions po = probe_options(memory, controller);
    probe_buffer = std::min(probe_buffer, po.buffer_bytes);
    const kernels::MachinePeaks after = kernels::probe_machine(pool, po);
    peaks.dram_read_bytes_per_second = std::max(peaks.dram_read_bytes_per_second, after.dram_read_bytes_per_second);
    peaks.dram_read_bytes_per_second_1_thread =
        std::max(peaks.dram_read_bytes_per_second_1_thread, after.dram_read_bytes_per_second_1_thread);
    peaks.int8_ops_per_second = std::max(peaks.int8_ops_per_second, after.int8_ops_per_second);
    peaks.bf16_flops = std::max(peaks.bf16_flops, after.bf16_flops);
    peaks.fp32_flops = std::max(peaks.fp32_flops, after.fp32_flops);
  }
  const tools::ThroughputResult& r = *result;
  kernels::DType type = kernels::DType::F32;  // the first matrix's: the model's main weight type
  (*model)->layers().front().for_each_matrix([&, first = true](const kernels::WeightMatrix& w) mutable {
    if (first) type = w.type;
    first = false;
  });
  const Peak peak = prefill_peak(type, peaks);
  const double tg_bytes = r.weight_bytes_per_decode_token + r.kv_bytes_per_decode_token + r.state_bytes_per_decode_token;

  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["weight_type"] = kernels::dtype_name(type);
  j["layers"] = cfg.n_layers;
  j["threads"] = threads;
  j["isa"] = kernels::isa_name(kernels::active_isa());
  j["prompt_tokens"] = o.throughput.prompt_tokens;
  j["gen_tokens"] = o.throughput.gen_tokens;
  j["pp_tokens_per_second"] = r.pp_tokens_per_second;
  j["tg_tokens_per_second"] = r.tg_tokens_per_second;
  j["pp_fraction_of_peak"] = ratio(r.pp_tokens_per_second * r.ops_per_prefill_token, peak.ops_per_second);
  j["tg_fraction_of_bandwidth"] = ratio(r.tg_tokens_per_second * tg_bytes, peaks.dram_read_bytes_per_second);
  j["pp_peak"] = peak.kind;
  j["pp_ops_per_token"] = r.ops_per_prefill_token;
  j["tg_bytes_per_token"] = tg_bytes;
  j["tg_kv_bytes_per_token"] = r.kv_bytes_per_decode_token;
  j["tg_state_bytes_per_token"] = r.state_bytes_per_decode_token;
  if (r.batch > 1) {
    j["batch"] = r.batch;
    j["batch_tg_tokens_per_second"] = r.batch_tg_tokens_per_second;
    j["batch_speedup"] = ratio(r.batch_tg_tokens_per_second, r.tg_tokens_per_second);
  }
  j["pp_samples"] = r.pp_samples;
  j["tg_samples"] = r.tg_samples;
  j["machine"] = {
      {"dram_read_bytes_per_second", peaks.dram_read_bytes_per_second},
      {"dram_read_bytes_per_second_1_thread", peaks.dram_read_bytes_per_second_1_thread},
      {"int8_ops_per_second", peaks.int8_ops_per_second},
      {"bf16_flops", peaks.bf16_flops},
      {"fp32_flops", peaks.fp32_flops},
      {"dram_probe_buffer_bytes", probe_buffer},
  };
  if (o.throughput.profile) {
    // Share of each phase's forward time per part, and seconds per step.
    auto parts = [&](const engine::ForwardProfile& p, double steps) {
      nlohmann::ordered_json out;
      const double total = p.total();
      for (int i = 0; i < engine::ForwardProfile::kParts; ++i) out[engine::ForwardProfile::name(i)] = ratio(p.seconds[i], total);
      out["seconds_per_step"] = ratio(total, steps);
      return out;
    };
    const double repeats = o.throughput.repeats;
    j["profile"] = {{"prefill", parts(r.pp_profile, repeats)},
                    {"decode", parts(r.tg_profile, repeats * o.throughput.gen_tokens)},
                    {"batch", parts(r.batch_profile, repeats * o.throughput.gen_tokens)}};
  }
  if (setup) {
    const engine::WeightResidency& w = *setup->weights;
    const engine::StreamerStats io = w.streamer_stats();
    const double streamed = static_cast<double>(w.streamed_bytes_per_step());
    nlohmann::ordered_json res = {
        {"planned_resident_layers", setup->plan.resident_layers},
        {"resident_layers", w.resident_layers()},  // at the end of the run
        {"streamed_layers", w.n_layers() - w.resident_layers()},
        {"resident_weight_bytes", w.resident_weight_bytes()},
        {"streamed_bytes_per_step", streamed},
        {"prefetch_depth", setup->prefetch_depth},
        {"weight_bytes_read_total", io.bytes_read - io_before.bytes_read},
        {"io_stall_seconds_total", io.stall_seconds - io_before.stall_seconds},
        {"residency_shed_total", controller->shed_total()},
        {"residency_readmit_total", controller->readmit_total()},
        {"residency_events", events_json(*controller)},
        {"memory_available_bytes_at_start", setup->memory_at_start.available_bytes},
        {"memory_limit_bytes", setup->memory_at_start.limit_bytes},
        {"pressure_floor_bytes", setup->pressure_floor_bytes},
        {"budget_bytes", setup->plan.budget_bytes},
    };
    if (streamed > 0) {
      res["disk_read_bytes_per_second"] = setup->disk_bytes_per_second;
      res["tg_fraction_of_disk"] = ratio(r.tg_tokens_per_second * streamed, setup->disk_bytes_per_second);
      res["pp_fraction_of_disk"] = ratio(r.pp_tokens_per_second / o.throughput.prompt_tokens * streamed,
                                         setup->disk_bytes_per_second);
    }
    j["residency"] = res;
    if (w.expert_tier()) {
      j["experts"] = expert_json(engine::expert_cache_report(w.expert_cache_stats(), experts_before));
      double decode_seconds = 0;
      for (double tps : r.tg_samples) decode_seconds += tps > 0 ? o.throughput.gen_tokens / tps : 0;
      j["experts"]["decode"] = expert_decode_json(engine::expert_decode_report(
          decode_sum, {}, static_cast<double>(r.tg_samples.size()) * o.throughput.gen_tokens, decode_seconds,
          setup->disk_bytes_per_second));
    }
  } else {
    j["residency"] = nullptr;  // --no-streaming: the plain engine on the file mapping
  }
  if (engine::moe_top_k(cfg) > 0) {  // MoBiLE (one-sequence decode), under the metrics' names
    j["mobile"] = {{"moe_little_tokens_total", r.mobile_little_tokens},
                   {"moe_fallback_tokens_total", r.mobile_fallback_tokens}};
  }

  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{} ({} weights, {} layers), {} threads, {}\n", o.model, j["weight_type"].get<std::string>(),
             cfg.n_layers, threads, j["isa"].get<std::string>());
  // Without the probe there is no bound to be a fraction of: print the speeds alone.
  const std::string pp_share =
      o.no_probe ? "" : fmt::format("  {:5.1f}% of the {} peak", 100 * j["pp_fraction_of_peak"].get<double>(), peak.kind);
  const std::string tg_share =
      o.no_probe ? "" : fmt::format("  {:5.1f}% of DRAM bandwidth", 100 * j["tg_fraction_of_bandwidth"].get<double>());
  fmt::print("  prefill {:>5} tokens: {:9.1f} tok/s{}\n", o.throughput.prompt_tokens, r.pp_tokens_per_second,
             pp_share);
  const std::string state_share = r.state_bytes_per_decode_token > 0
      ? fmt::format(", {:.1f} MB of it recurrent state", r.state_bytes_per_decode_token / 1e6) : "";
  fmt::print("  decode  {:>5} tokens: {:9.1f} tok/s{} ({:.1f} MB per token{})\n", o.throughput.gen_tokens,
             r.tg_tokens_per_second, tg_share, tg_bytes / 1e6, state_share);
  if (r.batch > 1) {
    fmt::print("  decode x{:<3} sequences: {:9.1f} tok/s  {:.2f}x one sequence\n", r.batch,
               r.batch_tg_tokens_per_second, j["batch_speedup"].get<double>());
  }
  if (setup && setup->weights->streamed_bytes_per_step() > 0) {
    fmt::print("  streaming: decode at {:.1f}%, prefill at {:.1f}% of the disk bound\n",
               100 * j["residency"]["tg_fraction_of_disk"].get<double>(),
               100 * j["residency"]["pp_fraction_of_disk"].get<double>());
  }
  if (j.contains("experts")) {
    const auto& d = j["experts"]["decode"];
    fmt::print("  experts (decode): hit rate {:.1f}%, {:.2f} MB read per token of {:.2f} MB asked, stall {:.0f}%, "
               "disk bound {:.2f} tok/s\n",
               100 * d["hit_rate"].get<double>(), d["expert_bytes_read_per_token"].get<double>() / 1e6,
               d["requested_expert_bytes_per_token"].get<double>() / 1e6, 100 * d["stall_fraction"].get<double>(),
               d["disk_bound_tokens_per_second"].get<double>());
  }
  if (setup) {
    const auto& res = j["residency"];
    fmt::print("  residency: {} of {} layers resident at the end of the run (plan {}); {} shed, {} re-admitted\n",
               res["resident_layers"].get<int>(), cfg.n_layers, res["planned_resident_layers"].get<int>(),
               controller->shed_total(), controller->readmit_total());
    for (const engine::ResidencyEvent& e : controller->events()) {
      fmt::print("    {:7.1f} s, step {:5}: {} ({:.1f} MiB available, floor {:.1f} MiB, PSI {:.1f}%): ", e.seconds, e.step,
                 e.reason, e.available_bytes / 1048576.0, e.floor_bytes / 1048576.0, e.pressure_some_avg10);
      if (e.layers_shed) fmt::print("shed {} layers", e.layers_shed);
      if (e.layers_readmitted) fmt::print("re-admitted {} layers", e.layers_readmitted);
      if (e.expert_slots_shed) fmt::print("shed {} expert slots", e.expert_slots_shed);
      if (e.expert_slots_readmitted) fmt::print("re-admitted {} expert slots", e.expert_slots_readmitted);
      fmt::print(", {} resident\n", e.resident_layers_after);
    }
  }
  if (o.throughput.profile) {
    for (const char* phase : {"prefill", "decode", "batch"}) {
      const auto& p = j["profile"][phase];
      std::string line;
      for (const auto& [part, share] : p.items()) {
        if (part == "seconds_per_step" || share.get<double>() < 0.005) continue;
        line += fmt::format(" {} {:.1f}%", part, 100 * share.get<double>());
      }
      fmt::print("  {:<7} {:8.2f} ms/step:{}\n", phase, 1e3 * p["seconds_per_step"].get<double>(), line);
    }
  }
  if (o.no_probe) {
    fmt::print("  machine: not probed (--no-probe)\n");
    return 0;
  }
  fmt::print("  machine: DRAM {:.1f} GB/s ({:.1f} one thread; {} MiB buffer), int8 {:.2f} TOPS, bf16 {:.2f} TFLOPS, "
             "fp32 {:.2f} TFLOPS\n",
             peaks.dram_read_bytes_per_second / 1e9, peaks.dram_read_bytes_per_second_1_thread / 1e9,
             probe_buffer >> 20, peaks.int8_ops_per_second / 1e12, peaks.bf16_flops / 1e12, peaks.fp32_flops / 1e12);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure prefill / decode speed as fractions of this machine's limits");
  cmd->add_option("--model", opts->model, "GGUF file or Hugging Face folder")->required();
  cmd->add_option("--prompt-tokens", opts->throughput.prompt_tokens, "Prefill length")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--gen-tokens", opts->throughput.gen_tokens, "Decode steps")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--batch", opts->throughput.batch,
                  "Sequences in the batched-decode measurement (1: skip it)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_option("--repeat", opts->throughput.repeats, "Repeats (the median is reported)")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Kernel threads (default: physical cores)");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->add_flag("--profile", opts->throughput.profile, "Also report where each phase's time goes");
  cmd->add_flag("--no-streaming", opts->no_streaming,
                "Read weights through the file mapping, without the residency machinery");
  cmd->add_flag("--no-probe", opts->no_probe, "Skip the machine probe (speeds only; the JSON fractions are 0)");
  cmd->add_flag("--file-layout", opts->file_layout,
                "Resident weights keep the file's row-major layout (compare with --no-streaming "
                "to isolate the residency machinery's cost)");
  cmd->add_flag("--sampling", opts->sampling,
                "Measure sampling instead: per row single-threaded, and a decode step's rows on "
                "the pool against that step's forward (--repeat applies)");
  cmd->add_option("--sampling-rows", opts->sampling_options.rows,
                  "Sequences in the --sampling decode step")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  cmd->add_flag("--diffusion", opts->diffusion,
                "Measure diffusion canvases instead: aggregate committed tok/s for --canvases batched "
                "(--prompt-tokens, --gen-tokens = canvas length, --repeat apply)");
  cmd->add_option("--canvases", opts->diffusion_options.canvases, "Canvas counts for --diffusion")
      ->delimiter(',')->capture_default_str();
  cmd->add_option("--diffusion-sampler", opts->diffusion_sampler, "reference | turbo (--diffusion)")
      ->check(CLI::IsMember({"reference", "turbo"}))->capture_default_str();
  cmd->add_option("--diffusion-block-length", opts->diffusion_options.params.block_length,
                  "Block length for --diffusion (0: the whole canvas is one block)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--diffusion-threshold", opts->diffusion_threshold,
                  "A single turbo threshold for --diffusion (instead of the [0.95, 0.80, 8] preset)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--diffusion-exact-top-k", opts->diffusion_options.params.exact_top_k,
                "--diffusion: hierarchical top-K candidates (engine/diffusion/vocab_top_k.h)");
  cmd->add_option("--diffusion-top-k", opts->diffusion_options.params.top_k,
                  "--diffusion: the row sampler's top_k (0 = whole vocabulary; greedy)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  add_residency_flags(*cmd, opts->residency);
  add_mobile_flags(*cmd, opts->mobile);
  cmd->callback([opts, &exit_code] {
    opts->sampling_options.repeats = opts->throughput.repeats;
    auto mobile = mobile_settings(opts->mobile);
    if (!mobile) {
      fmt::print(stderr, "error: {}\n", mobile.error().message);
      exit_code = 2;
      return;
    }
    opts->throughput.mobile = *mobile;
    exit_code = bench(*opts);
  });
}

}  // namespace spillway::cli
