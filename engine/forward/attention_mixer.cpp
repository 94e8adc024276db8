#include "engine/forward/attention_mixer.h"

#include <algorithm>
#include <atomic>
#include <cmath>

namespace spillway::engine {

AttentionMixer::AttentionMixer(const ModelConfig& config, KvCache& kv, kernels::ThreadPool& pool)
    : cfg_(config), kv_(kv), pool_(pool) {
  for (const LayerSpec& s : config.layers) {
    if (s.mixer != MixerKind::Attention) continue;
    max_q_dim_ = std::max(max_q_dim_, s.q_dim());
    max_kv_dim_ = std::max(max_kv_dim_, s.kv_dim());
    max_group_ = std::max(max_group_, s.n_heads / s.n_kv_heads);
    if (s.attention_gate) max_gated_q_dim_ = std::max(max_gated_q_dim_, s.q_dim());
  }
}

size_t AttentionMixer::scratch_stride() const {
  constexpr size_t kAlignFloats = 16;
  const size_t floats = kernels::attention_scratch_floats(kernels::kAttentionMaxTokens, max_group_, key_capacity_);
  return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

void AttentionMixer::ensure_capacity(int32_t n_tokens, int64_t max_keys) {
  if (n_tokens > token_capacity_) {
    token_capacity_ = n_tokens;
    const size_t t = n_tokens;
    h_.resize(t * cfg_.n_embd);
    q_.resize(t * max_q_dim_);
    k_.resize(t * max_kv_dim_);
    v_.resize(t * max_kv_dim_);
    attn_.resize(t * max_q_dim_);
    if (max_gated_q_dim_ > 0) {
      qg_.resize(t * 2 * max_gated_q_dim_);
      gate_.resize(t * max_gated_q_dim_);
    }
    chunks_.reserve(t);
  }
  if (max_keys > key_capacity_) {
    key_capacity_ = max_keys;
    scratch_.resize(size_t(pool_.size()) * scratch_stride());
  }
}

void AttentionMixer::plan_step(const StepContext& ctx) {
  chunks_.clear();
  token_keys_ = 0;
  for (const BatchSequence& seq : ctx.batch.sequences) {
    if (seq.mode == AttentionMode::Padding) continue;  // no keys: attn rows stay 0 (run())
    for (int32_t i = 0; i < seq.n_tokens; i += kernels::kAttentionMaxTokens) {
      chunks_.push_back({seq.first_token + i, std::min(kernels::kAttentionMaxTokens, seq.n_tokens - i)});
    }
    for (int32_t i = 0; i < seq.n_tokens; ++i) token_keys_ += ctx.token_key_count[seq.first_token + i];
  }
}

Status AttentionMixer::run(const StepContext& ctx, const LayerSpec& spec, const AttentionWeights& w,
                         const float* norm, const float* x, float* out) {
  using P = ForwardProfile;
  const int32_t n_tokens = ctx.n_tokens;
  const int32_t q_dim = spec.q_dim(), kv_dim = spec.kv_dim(), hd = spec.head_dim;
  const int32_t layer = spec.attention_ordinal;

  NormRows attn_norm{x, norm, h_.data, cfg_.n_embd, cfg_.rms_eps};
  {
    const kernels::WeightMatrix* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {spec.attention_gate ? qg_.data : q_.data, k_.data, v_.data};
    SPILLWAY_TRY(ctx.matmul_multi(P::Qkv, ws, h_.data, n_tokens, ys, {NormRows::apply, &attn_norm}));
  }

  timed(ctx.profile, P::RopeKv, [&] {
    parallel_for(ctx.pool, n_tokens, q_dim + 2 * kv_dim, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const BatchSequence& seq = ctx.batch.sequences[ctx.token_sequence[t]];
        if (seq.mode == AttentionMode::Padding) continue;  // writes no K/V
        float* q = q_.data + t * q_dim;
        float* k = k_.data + t * kv_dim;
        float* v = v_.data + t * kv_dim;
        if (spec.attention_gate) {  // [q_h | gate_h] per head -> q, gate
          const float* qg = qg_.data + t * 2 * q_dim;
          float* gate = gate_.data + t * q_dim;
          for (int32_t h = 0; h < spec.n_heads; ++h) {
            std::copy(qg + 2 * h * hd, qg + 2 * h * hd + hd, q + h * hd);
            std::copy(qg + 2 * h * hd + hd, qg + 2 * (h + 1) * hd, gate + h * hd);
          }
        }
        if (w.bq) kernels::add_inplace(q, w.bq, q_dim);
        if (w.bk) kernels::add_inplace(k, w.bk, kv_dim);
        if (w.bv) kernels::add_inplace(v, w.bv, kv_dim);
        if (w.q_norm) {
          for (int32_t h = 0; h < spec.n_heads; ++h) kernels::rms_norm(q + h * hd, w.q_norm, q + h * hd, hd, cfg_.rms_eps);
          for (int32_t h = 0; h < spec.n_kv_heads; ++h) kernels::rms_norm(k + h * hd, w.k_norm, k + h * hd, hd, cfg_.rms_eps);
        }
        const float* factors = cfg_.rope_freq_factors.empty() ? nullptr : cfg_.rope_freq_factors.data();
        const int64_t pos = ctx.token_position[t];
        kernels::rope(q, spec.n_heads, hd, cfg_.rope_dim, pos, cfg_.rope_freq_base, cfg_.rope_freq_scale, factors,
                      cfg_.rope_style);
        kernels::rope(k, spec.n_kv_heads, hd, cfg_.rope_dim, pos, cfg_.rope_freq_base, cfg_.rope_freq_scale, factors,
                      cfg_.rope_style);
        kv_.write(layer, seq.block_table, pos, k, v);
      }
    });
  });

  timed(ctx.profile, P::Attention, [&] {
    attend(ctx, spec);
    for (const BatchSequence& seq : ctx.batch.sequences) {  // padding rows attend to nothing
      if (seq.mode == AttentionMode::Padding) {
        std::fill_n(attn_.data + size_t(seq.first_token) * q_dim, size_t(seq.n_tokens) * q_dim, 0.0f);
      }
    }
  });
  if (!spec.attention_gate) {
    const kernels::WeightMatrix* ws[] = {&w.wo};
    float* ys[] = {out};
    return ctx.matmul_multi(P::Wo, ws, attn_.data, n_tokens, ys);
  }
  // attn *= sigmoid(gate), as the output projection's row prologue.
  struct GateRows {
    float* attn;
    const float* gate;
    int32_t q_dim;
  } gr{attn_.data, gate_.data, q_dim};
  auto gate_row = [](void* c, int64_t t) {
    const auto* g = static_cast<const GateRows*>(c);
    float* a = g->attn + t * g->q_dim;
    const float* gate = g->gate + t * g->q_dim;
    for (int32_t i = 0; i < g->q_dim; ++i) a[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  };
  const kernels::WeightMatrix* ws[] = {&w.wo};
  float* ys[] = {out};
  return ctx.matmul_multi(P::Wo, ws, attn_.data, n_tokens, ys, {gate_row, &gr});
}

void AttentionMixer::attend(const StepContext& ctx, const LayerSpec& spec) {
  const int32_t hd = spec.head_dim;
  const int32_t group = spec.n_heads / spec.n_kv_heads;
  const int32_t layer = spec.attention_ordinal;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t stride = scratch_stride();
  const int64_t n_tasks = static_cast<int64_t>(chunks_.size()) * spec.n_kv_heads;
  const size_t q_dim = spec.q_dim();
  std::atomic<int64_t> next{0};
  auto run = [&](int thread) {
    float* scratch = scratch_.data + thread * stride;
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_tasks) return;
      const Chunk& chunk = chunks_[i / spec.n_kv_heads];
      const int32_t kv_head = static_cast<int32_t>(i % spec.n_kv_heads);
      const BatchSequence& seq = ctx.batch.sequences[ctx.token_sequence[chunk.first_token]];
      const kernels::KvView k = kv_.k_view(layer, seq.block_table);
      const kernels::KvView v = kv_.v_view(layer, seq.block_table);
      const size_t offset = size_t(chunk.first_token) * q_dim + size_t(kv_head) * group * hd;
      kernels::attention(q_.data + offset, q_dim, chunk.n_tokens, group, hd, k, v, kv_head,
                         ctx.token_key_count + chunk.first_token, scale, attn_.data + offset, q_dim, scratch);
    }
  };
  if (token_keys_ * q_dim * 2 < kSerialElements * 4) {
    run(0);
  } else {
    pool_.run_on_all(run);
  }
}

}  // namespace spillway::engine
