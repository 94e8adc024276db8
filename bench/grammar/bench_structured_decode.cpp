// Constrained vs unconstrained decode throughput through the real serving path
// (EngineLoop + engine runner + sampler), same model, same prompt, greedy.
//
//   bench_structured_decode MODEL.gguf [--threads N] [--tokens T] [--batches 1,16] [--rounds R]
//
// Each round runs, for every batch size B, B unconstrained requests (ignore_eos) and B
// requests constrained by a JSON Schema that cannot complete within T tokens (an array of
// at least 50 objects with strings, bounded integers, enums and nested arrays: the mask
// walks keys, string slices, number automata), each generating exactly T tokens; the two
// are interleaved so that machine noise hits both alike. Reported: generated tokens per
// second (best round and median), their ratio, the mean mask time per token, and the trie
// build time at load. Single process; the kernel pool has --threads threads.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/sampling/grammar_constraint.h"
#include "engine/tokenizer/tokenizer.h"
#include "grammar/compile_cache.h"
#include "kernels/thread_pool.h"
#include "runtime/engine_loop.h"
#include "runtime/engine_runner.h"

using namespace spillway;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSchema = R"({
  "type": "array", "minItems": 50,
  "items": {
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 24},
      "email": {"type": "string", "maxLength": 40},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "role": {"enum": ["admin", "editor", "viewer", "guest"]},
      "active": {"type": "boolean"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4}
    },
    "required": ["name", "email", "age", "role", "active", "tags"]
  }
})";

double run(runtime::EngineLoop& loop, const std::vector<int32_t>& prompt, int batch, int tokens,
           std::shared_ptr<const grammar::CompiledGrammar> g, int64_t& generated) {
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  generated = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < batch; ++i) {
    scheduler::GenerationParams p;
    p.prompt = prompt;
    p.max_tokens = tokens;
    p.sampling.temperature = 0.0f;
    p.ignore_eos = !g;
    p.grammar = g;
    auto r = loop.submit(std::move(p), [&](scheduler::RequestUpdate&& u) {
      std::lock_guard lock(mu);
      for (const auto& c : u.choices) generated += static_cast<int64_t>(c.tokens.size());
      if (u.error) std::fprintf(stderr, "error: %s\n", u.error->c_str());
      if (u.finished) {
        ++finished;
        cv.notify_all();
      }
    });
    if (!std::holds_alternative<scheduler::RequestId>(r)) {
      std::fprintf(stderr, "refused: %s\n", std::get<scheduler::SubmitRejection>(r).message.c_str());
      std::exit(1);
    }
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished == batch; });
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [--threads N] [--tokens T] [--batches 1,16] [--rounds R]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  int threads = 2, tokens = 64, rounds = 3;
  std::vector<int> batches = {1, 16};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    if (k == "--tokens") tokens = std::atoi(argv[i + 1]);
    if (k == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (k == "--batches") {
      batches.clear();
      std::string s = argv[i + 1];
      for (size_t pos = 0; pos < s.size();) {
        size_t comma = s.find(',', pos);
        if (comma == std::string::npos) comma = s.size();
        batches.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
        pos = comma + 1;
      }
    }
  }
  auto model = engine::Model::open(path);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  auto tokenizer = engine::Tokenizer::from_metadata((*model)->source().metadata(), path);
  if (!tokenizer) {
    std::fprintf(stderr, "%s\n", tokenizer.error().message.c_str());
    return 1;
  }
  const auto tt = Clock::now();
  auto trie = engine::build_token_trie(**tokenizer);
  std::printf("model %s: vocabulary %zu tokens, trie built in %.1f ms\n", path.c_str(), trie->vocab_size(),
              std::chrono::duration<double, std::milli>(Clock::now() - tt).count());
  grammar::GrammarSpec spec;
  spec.kind = grammar::GrammarSpec::Kind::kJsonSchema;
  spec.text = kSchema;
  spec.json.strict = true;
  const auto tc = Clock::now();
  auto compiled = grammar::compile_spec(spec);
  if (auto* e = std::get_if<grammar::CompileError>(&compiled)) {
    std::fprintf(stderr, "compile: %s\n", e->message.c_str());
    return 1;
  }
  auto g = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
  std::printf("schema compiled in %.2f ms\n", std::chrono::duration<double, std::milli>(Clock::now() - tc).count());

  const int max_batch = *std::max_element(batches.begin(), batches.end());
  scheduler::SchedulerConfig config;
  config.max_batch_tokens = std::max(512, max_batch * 32);
  config.max_running = max_batch;
  config.max_context = 64 + tokens + 16;
  config.prefix_cache = false;
  config.token_trie = trie;
  kernels::ThreadPool pool(threads);
  runtime::EngineLoop loop(runtime::make_engine_runner(**model, pool, config), **tokenizer, config);
  loop.start();
  const std::vector<int32_t> prompt = (*tokenizer)->encode("Here are the users of the system as JSON:", true, false);

  std::printf("threads %d, %d tokens per sequence, %d rounds (best / median tok/s)\n", threads, tokens, rounds);
  std::printf("%6s %22s %22s %10s %12s\n", "batch", "unconstrained tok/s", "constrained tok/s", "ratio", "mask us/tok");
  for (int b : batches) {
    std::vector<double> free_tps, cons_tps;
    uint64_t masks = 0, mask_ns = 0;
    for (int r = 0; r < rounds; ++r) {
      int64_t n = 0;
      double s = run(loop, prompt, b, tokens, nullptr, n);
      free_tps.push_back(static_cast<double>(n) / s);
      auto& cc = engine::constraint_counters();
      const uint64_t m0 = cc.masks.load(), ns0 = cc.mask_nanoseconds.load();
      s = run(loop, prompt, b, tokens, g, n);
      if (n != static_cast<int64_t>(b) * tokens) std::fprintf(stderr, "constrained run generated %lld tokens\n", (long long)n);
      cons_tps.push_back(static_cast<double>(n) / s);
      masks += cc.masks.load() - m0;
      mask_ns += cc.mask_nanoseconds.load() - ns0;
    }
    const double fb = *std::max_element(free_tps.begin(), free_tps.end());
    const double cb = *std::max_element(cons_tps.begin(), cons_tps.end());
    char fbuf[64], cbuf[64];
    std::snprintf(fbuf, sizeof fbuf, "%.1f / %.1f", fb, median(free_tps));
    std::snprintf(cbuf, sizeof cbuf, "%.1f / %.1f", cb, median(cons_tps));
    std::printf("%6d %22s %22s %9.1f%% %12.1f\n", b, fbuf, cbuf, 100.0 * median(cons_tps) / median(free_tps),
                masks ? static_cast<double>(mask_ns) / masks / 1e3 : 0.0);
  }
  loop.stop();
  return 0;
}
