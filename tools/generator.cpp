#include "tools/generator.h"

#include <algorithm>

#include "tools/mobile_decode.h"

#include <chrono>
#include <vector>

#include <fmt/format.h>

namespace spillway::tools {

using namespace engine;  // NOLINT: tools are written against the engine's types

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Generator::Generator(const Model& model, kernels::ThreadPool& pool, int32_t max_context,
                     int32_t block_size, LayerWeightSource* weights)
    : model_(model),
      max_context_(max_context),
      kv_(model.config(), block_size,
          (max_context + block_size - 1) / block_size),
      state_(model.config(), 1, engine::RecurrentState::undo_for(model.config())),
      forward_(model, kv_, pool, 512, max_context, weights) {
  forward_.set_recurrent_state(&state_);
  block_table_.resize(kv_.n_blocks());
  for (int32_t i = 0; i < kv_.n_blocks(); ++i) block_table_[i] = i;
}

Result<GenerateResult> Generator::generate(std::span<const int32_t> prompt,
                                           const GenerateOptions& options,
                                           const Tokenizer* tokenizer,
                                           const std::function<void(int32_t)>& on_token) {
  const int32_t n_vocab = model_.config().n_vocab;
  if (prompt.empty()) return Error{"the prompt is empty (no tokens to start from)"};
  for (int32_t id : prompt) {
    if (id < 0 || id >= n_vocab) return Error{fmt::format("token id {} is out of range", id)};
  }
  if (static_cast<int64_t>(prompt.size()) + options.max_tokens > max_context_) {
    return Error{fmt::format("prompt ({} tokens) + max tokens ({}) exceed the context of {}",
                             prompt.size(), options.max_tokens, max_context_)};
  }

  GenerateResult result;
  Sampler sampler(options.sampling, 0x5eed5eedULL);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<float> logits(n_vocab);
  ForwardBatch batch;

  const int32_t little =
      engine::resolve_little_experts(options.mobile.little_experts, engine::moe_top_k(model_.config()));
  auto run_step = [&](std::span<const int32_t> tokens, int64_t start, bool want_logits, bool decode = false) -> Status {
    batch.clear();
    batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), start, block_table_);
    batch.sequences.back().state_slot = 0;
    if (want_logits) batch.logit_rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    auto out = decode ? mobile_decode_step(forward_, state_, batch, little, options.mobile.fallback_confidence,
                                           &result.mobile_little_tokens, &result.mobile_fallback_tokens)
                      : forward_.execute(batch);
    if (!out) return out.error();
    if (want_logits) std::copy(out->begin(), out->begin() + n_vocab, logits.begin());
    if (options.after_step) options.after_step();
    return {};
  };

  auto start = std::chrono::steady_clock::now();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  for (int64_t pos = 0; pos < n_prompt; pos += options.prefill_chunk) {
    const int64_t n = std::min<int64_t>(options.prefill_chunk, n_prompt - pos);
    SPILLWAY_TRY(run_step(prompt.subspan(pos, n), pos, pos + n == n_prompt));
  }
  result.prompt_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  for (int32_t i = 0; i < options.max_tokens; ++i) {
    if (i > 0) {
      SPILLWAY_TRY(run_step(std::span<const int32_t>(&history.back(), 1), history.size() - 1, true, /*decode=*/true));
    }
    const SampledToken next = sampler.sample(logits.data(), n_vocab, history, prompt.size());
    if (options.stop_at_end_of_generation && tokenizer &&
        tokenizer->is_end_of_generation(next.token)) {
      result.stopped_at_end = true;
      break;
    }
    history.push_back(next.token);
    result.tokens.push_back(next.token);
    if (on_token) on_token(next.token);
  }
  result.generate_seconds = seconds_since(start);
  return result;
}

}  // namespace spillway::tools
