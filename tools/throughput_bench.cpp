#include "tools/throughput_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "tools/mobile_decode.h"

namespace spillway::tools {

using namespace engine;  // NOLINT: tools are written against the engine's types

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double matrix_bytes(const kernels::WeightMatrix& w) {
  return static_cast<double>(kernels::row_bytes(w.type, w.cols) * w.rows);
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

Result<ThroughputResult> measure_throughput(const Model& model, LayerWeightSource* weights,
                                            kernels::ThreadPool& pool,
                                            const ThroughputOptions& o,
                                            const std::function<void()>& after_step,
                                            const std::function<void()>& after_warm_up,
                                            const std::function<void(bool begin)>& around_decode) {
  const ModelConfig& c = model.config();
  if (o.prompt_tokens < 1 || o.gen_tokens < 1 || o.repeats < 1) {
    return Error{"bench: prompt tokens, generated tokens and repeats must be at least 1"};
  }
  const int32_t context = o.prompt_tokens + o.gen_tokens;
  if (context > c.n_ctx_train) {
    return Error{fmt::format("bench: {} prompt + {} generated tokens exceed the model's context "
                             "of {}",
                             o.prompt_tokens, o.gen_tokens, c.n_ctx_train)};
  }
  const int32_t batch = std::max(o.batch, 1);
  constexpr int32_t kBlock = 16;
  const int32_t blocks_per_seq = (context + kBlock - 1) / kBlock;
  KvCache kv(c, kBlock, blocks_per_seq * batch);
  ForwardPass forward(model, kv, pool, std::max(o.prompt_tokens, batch), context, weights);
  RecurrentState state(c, batch, RecurrentState::undo_for(c));  // hybrid models: a recurrent-state slot per sequence
  forward.set_recurrent_state(&state);

  ThroughputResult r;
  r.batch = batch > 1 ? batch : 0;
  const int32_t little = engine::resolve_little_experts(o.mobile.little_experts, engine::moe_top_k(c));
  // What one token runs through: every matrix of a layer but, in a MoE FFN, only its top-k
  // routed experts (k / n_expert of the experts' bytes and MACs: the experts of a layer are
  // one size). MoBiLE's little steps run fewer; the bound counts the full k.
  double macs_per_token = 0;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const engine::BlockWeights& l = model.layers()[i];
    double bytes = 0, macs = 0;
    l.for_each_matrix([&](const kernels::WeightMatrix& w) {
      bytes += matrix_bytes(w);
      macs += static_cast<double>(w.rows * w.cols);
    });
    if (const auto* moe = std::get_if<engine::MoeFfnWeights>(&l.ffn); moe && !moe->experts.empty()) {
      double expert_bytes = 0, expert_macs = 0;
      for (const engine::ExpertWeights& e : moe->experts) {
        for (const kernels::WeightMatrix* w : {&e.gate, &e.up, &e.down}) {
          expert_bytes += matrix_bytes(*w);
          expert_macs += static_cast<double>(w->rows * w->cols);
        }
      }
      const double unused = 1.0 - static_cast<double>(c.layers[i].n_expert_used) / static_cast<double>(moe->experts.size());
      bytes -= unused * expert_bytes;
      macs -= unused * expert_macs;
    }
    r.weight_bytes_per_decode_token += bytes;
    macs_per_token += macs;
  }
  r.weight_bytes_per_decode_token += matrix_bytes(model.output());
  // Prefill computes the logits of the prompt's last token only: the output matrix's MACs
  // are spread over the prompt (counting them for every token overstated prefill's share of
  // the peak, by half on the Qwen3.5-0.8B shape, whose output matrix is a third of its weights).
  r.ops_per_prefill_token = 2.0 * macs_per_token +
                            2.0 * static_cast<double>(model.output().rows * model.output().cols) / o.prompt_tokens;
  // Attention: q.k and p.v over the context, per query head, at the mean prefill position.
  // (The delta-net recurrence's float work, ~3% of a Qwen3.5 token's ops, is not counted.)
  for (const engine::LayerSpec& s : c.layers) {
    if (s.mixer == engine::MixerKind::Attention) r.ops_per_prefill_token += 2.0 * 2.0 * s.q_dim() * (o.prompt_tokens / 2.0);
  }
  const double kv_per_token = static_cast<double>(
      KvCache::bytes_per_token(c, kernels::DType::F16));
  r.kv_bytes_per_decode_token = kv_per_token * (o.prompt_tokens + o.gen_tokens / 2.0);
  // A decode step of a hybrid model reads its sequence's whole recurrent state (conv and
  // delta-rule state of every delta-net layer) as an attention layer reads its KV; the step
  // also writes it back (to the slot's other buffer), which is not counted, as KV writes are not.
  r.state_bytes_per_decode_token = static_cast<double>(RecurrentState::state_bytes(c));

  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::uniform_int_distribution<int32_t> random_id(0, c.n_vocab - 1);
  std::vector<std::vector<int32_t>> tables(batch);
  for (int32_t seq = 0; seq < batch; ++seq) {
    for (int32_t b = 0; b < blocks_per_seq; ++b) tables[seq].push_back(seq * blocks_per_seq + b);
  }
  auto table = [&](int32_t seq) -> const std::vector<int32_t>& { return tables[seq]; };
  auto step = [&](const ForwardBatch& fb) -> Result<std::span<const float>> {
    auto out = forward.execute(fb);
    if (after_step) after_step();
    return out;
  };

  {
    // Untimed warm-up: the first touches of the workspaces and of mapped weight pages, and
    // the pool threads' first wake-up, are not part of any measurement.
    // Both buffers of every recurrent-state slot: a step writes the buffer its previous step
    // did not, so the warm-up prefill alone left the first timed prefill to map the other
    // one (page faults that took more than the recurrence itself on the development VM).
    for (int32_t s = 0; s < state.n_slots(); ++s) state.prefault(s);
    std::mt19937 warm_rng(static_cast<uint32_t>(o.seed) ^ 0x9e3779b9u);
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (int32_t& t : prompt) t = random_id(warm_rng);
    ForwardBatch fb;
    fb.add_sequence(prompt.data(), o.prompt_tokens, 0, table(0));
    fb.sequences.back().state_slot = 0;
    fb.logit_rows.push_back(o.prompt_tokens - 1);
    auto logits = step(fb);
    if (!logits) return logits.error();
    if (after_warm_up) after_warm_up();
  }

  std::vector<double> batch_samples;
  for (int32_t rep = 0; rep < o.repeats; ++rep) {
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (int32_t& t : prompt) t = random_id(rng);

    ForwardBatch fb;
    fb.add_sequence(prompt.data(), o.prompt_tokens, 0, table(0));
    fb.sequences.back().state_slot = 0;
    fb.logit_rows.push_back(o.prompt_tokens - 1);
    if (o.profile) forward.set_profile(&r.pp_profile);
    auto start = Clock::now();
    auto logits = step(fb);
    if (!logits) return logits.error();
    r.pp_samples.push_back(o.prompt_tokens /
                           std::chrono::duration<double>(Clock::now() - start).count());
    const std::vector<float> prefill_logits(logits->begin(), logits->end());
    const RecurrentState::Snapshot after_prompt = state.snapshot(0);

    int32_t next = argmax(prefill_logits);
    if (o.profile) forward.set_profile(&r.tg_profile);
    if (around_decode) around_decode(true);
    start = Clock::now();
    for (int32_t i = 0; i < o.gen_tokens; ++i) {
      fb.clear();
      fb.add_sequence(&next, 1, o.prompt_tokens + i, table(0));
      fb.sequences.back().state_slot = 0;
      fb.logit_rows.push_back(0);
      if (little > 0) {
        logits = mobile_decode_step(forward, state, fb, little, o.mobile.fallback_confidence, &r.mobile_little_tokens,
                                    &r.mobile_fallback_tokens);
        if (after_step) after_step();
      } else {
        logits = step(fb);
      }
      if (!logits) return logits.error();
      next = argmax(*logits);
    }
    r.tg_samples.push_back(o.gen_tokens / std::chrono::duration<double>(Clock::now() - start).count());
    if (around_decode) around_decode(false);

    if (batch > 1) {
      // Every sequence continues the same prompt: sequence 0's prompt KV (written by the
      // timed prefill) is copied into each sequence's own blocks, so each reads its own
      // context from memory as independent requests would. Then all decode together, one
      // token each per step, with distinct continuations.
      const int32_t first = argmax(prefill_logits);
      std::vector<int32_t> tokens(batch);
      const std::vector<int32_t>& source = table(0);
      const int32_t prompt_blocks = (o.prompt_tokens + kBlock - 1) / kBlock;
      for (int32_t s = 0; s < batch; ++s) {
        const std::vector<int32_t>& dest = table(s);
        if (s > 0) {
          for (int32_t b = 0; b < prompt_blocks; ++b) kv.copy_block(source[b], dest[b]);
        }
        state.restore(s, after_prompt);
        tokens[s] = (first + s) % c.n_vocab;
      }
      if (o.profile) forward.set_profile(&r.batch_profile);
      start = Clock::now();
      for (int32_t i = 0; i < o.gen_tokens; ++i) {
        fb.clear();
        for (int32_t s = 0; s < batch; ++s) {
          fb.add_sequence(&tokens[s], 1, o.prompt_tokens + i, table(s));
          fb.sequences.back().state_slot = s;
          fb.logit_rows.push_back(s);
        }
        logits = step(fb);
        if (!logits) return logits.error();
        for (int32_t s = 0; s < batch; ++s) {
          tokens[s] = argmax(logits->subspan(static_cast<size_t>(s) * c.n_vocab, c.n_vocab));
        }
      }
      batch_samples.push_back(static_cast<double>(batch) * o.gen_tokens /
                              std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  forward.set_profile(nullptr);
  r.pp_tokens_per_second = median(r.pp_samples);
  r.tg_tokens_per_second = median(r.tg_samples);
  r.batch_tg_tokens_per_second = median(batch_samples);
  return r;
}

}  // namespace spillway::tools
