#include "engine/forward/delta_net_mixer.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include <fmt/format.h>

namespace spillway::engine {

namespace {

// A sequence with at least this many tokens in the step has its conv run as one pass over whole
// rows, split by channels, before the per-key-head tasks: a task's conv reads a 512-byte slice
// of every 24 KiB qkv row (Qwen3.5-0.8B), which for a 512-token prefill made the layer's
// recurrence part ~20% slower; for a decode token the slices cost less than the extra fan-out.
constexpr int32_t kWholeRowConvTokens = 8;

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// As ggml's softplus.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x / max(||x||, eps), the sum of squares in double (ggml_l2_norm).
void l2_normalise(float* x, int32_t n, float eps) {
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int32_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

DeltaNetMixer::DeltaNetMixer(const ModelConfig& config) : cfg_(config) {
  for (const LayerSpec& s : config.layers) {
    if (s.mixer != MixerKind::GatedDeltaNet) continue;
    max_conv_dim_ = std::max(max_conv_dim_, s.ssm_conv_dim());
    max_value_dim_ = std::max(max_value_dim_, s.ssm_value_dim());
    max_value_heads_ = std::max(max_value_heads_, s.ssm_value_heads);
    max_conv_kernel_ = std::max(max_conv_kernel_, s.ssm_conv_kernel);
    conv_taps_.resize(std::max<size_t>(conv_taps_.size(), size_t(s.recurrent_ordinal) + 1));
  }
  conv_zeros_.resize(size_t(max_conv_dim_));  // zero-filled, never written
}

void DeltaNetMixer::ensure_capacity(int32_t n_tokens) {
  if (!active() || n_tokens <= token_capacity_) return;
  token_capacity_ = n_tokens;
  const size_t t = n_tokens;
  h_.resize(t * cfg_.n_embd);
  qkv_.resize(t * max_conv_dim_);
  conv_.resize(t * max_conv_dim_);
  z_.resize(t * max_value_dim_);
  ba_.resize(t * 2 * max_value_heads_);
  alpha_.resize(t * max_value_heads_);
  g_.resize(t * max_value_heads_);
  beta_.resize(t * max_value_heads_);
  o_.resize(t * max_value_dim_);
}

Status DeltaNetMixer::plan_step(const StepContext& ctx) {
  if (!active()) return {};
  if (!state_) return Error{"the model has gated delta net layers but the forward has no recurrent-state pool"};
  if (max_conv_kernel_ > kMaxConvKernel) {
    return Error{fmt::format("ssm conv kernel {} is longer than the {} taps the delta-net layer runs", max_conv_kernel_,
                             kMaxConvKernel)};
  }
  std::vector<uint8_t> seen(state_->n_slots(), 0);
  for (const BatchSequence& seq : ctx.batch.sequences) {
    if (seq.state_slot < 0 || seq.state_slot >= state_->n_slots()) {
      return Error{fmt::format("sequence at position {} has recurrent-state slot {} (the pool has {})",
                               seq.start_position, seq.state_slot, state_->n_slots())};
    }
    if (seen[seq.state_slot]++) {
      return Error{fmt::format("two sequences of one batch share recurrent-state slot {}", seq.state_slot)};
    }
  }
  for (const BatchSequence& seq : ctx.batch.sequences) {
    if (seq.n_tokens > 0) state_->begin_step(seq.state_slot);
  }
  return {};
}

Status DeltaNetMixer::run(const StepContext& ctx, const LayerSpec& spec, const DeltaNetWeights& w, const float* norm,
                        const float* x, float* out) {
  using P = ForwardProfile;
  const int32_t n_tokens = ctx.n_tokens;
  NormRows in_norm{x, norm, h_.data, cfg_.n_embd, cfg_.rms_eps};
  // One matmul pass over every input projection: qkv and z (or the fused qkvz), then b/a.
  const kernels::WeightMatrix* ws[4];
  float* ys[4];
  size_t n = 0;
  if (w.fused_qkvz) {
    qkvz_.resize(size_t(token_capacity_) * (max_conv_dim_ + max_value_dim_));  // grows once
    ws[n] = &w.w_qkvz, ys[n++] = qkvz_.data;
  } else {
    ws[n] = &w.w_qkv, ys[n++] = qkv_.data;
    ws[n] = &w.w_gate, ys[n++] = z_.data;
  }
  if (w.fused_ba) {
    ws[n] = &w.w_ba, ys[n++] = ba_.data;
  } else {
    ws[n] = &w.w_beta, ys[n++] = ba_.data;
    ws[n] = &w.w_alpha, ys[n++] = alpha_.data;
  }
  SPILLWAY_TRY(ctx.matmul_multi(P::Qkv, std::span(ws, n), h_.data, n_tokens, std::span(ys, n),
                                {NormRows::apply, &in_norm}));
  if (w.fused_qkvz) split_qkvz(ctx, spec);
  timed(ctx.profile, P::Recurrence, [&] { mix(ctx, spec, w); });

  // Per head: RMSNorm(o) * ssm_norm * silu(z), as the output projection's row prologue.
  struct GatedNorm {
    float* o;
    const float* z;
    const float* norm;
    int32_t heads, dv;
    float eps;
  } gn{o_.data, z_.data, w.norm, spec.ssm_value_heads, spec.ssm_state, cfg_.rms_eps};
  auto gated_norm_row = [](void* c, int64_t t) {
    const auto* g = static_cast<const GatedNorm*>(c);
    const int64_t width = int64_t{g->heads} * g->dv;
    for (int32_t h = 0; h < g->heads; ++h) {
      float* o = g->o + t * width + int64_t{h} * g->dv;
      kernels::rms_norm(o, g->norm, o, g->dv, g->eps);
      kernels::silu_mul(g->z + t * width + int64_t{h} * g->dv, o, o, g->dv);  // o *= silu(z)
    }
  };
  const kernels::WeightMatrix* wo[] = {&w.w_out};
  float* yo[] = {out};
  return ctx.matmul_multi(P::Wo, wo, o_.data, n_tokens, yo, {gated_norm_row, &gn});
}

// qkvz_ rows, per key head g [q_g | k_g | v of its r value heads | z of them], into qkv_
// ([q all heads | k all heads | v all heads]) and z_ rows.
void DeltaNetMixer::split_qkvz(const StepContext& ctx, const LayerSpec& spec) {
  const int32_t C = spec.ssm_conv_dim(), V = spec.ssm_value_dim(), S = spec.ssm_state, nk = spec.ssm_key_heads;
  const int64_t rv = int64_t{spec.ssm_value_heads / nk} * S;  // a key head's value (and z) width
  parallel_for(ctx.pool, ctx.n_tokens, C + V, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* in = qkvz_.data + t * (C + V);
      float* qkv = qkv_.data + t * C;
      float* z = z_.data + t * V;
      for (int32_t g = 0; g < nk; ++g) {
        const float* group = in + g * (2 * S + 2 * rv);
        std::copy(group, group + S, qkv + int64_t{g} * S);
        std::copy(group + S, group + 2 * S, qkv + int64_t{nk + g} * S);
        std::copy(group + 2 * S, group + 2 * S + rv, qkv + int64_t{2 * nk} * S + g * rv);
        std::copy(group + 2 * S + rv, group + 2 * S + 2 * rv, z + g * rv);
      }
    }
  });
}

// Layer `spec`'s conv taps as [K][C] (kernels::conv_silu runs along channels: contiguous rows;
// each output still sums its K terms in tap order, as the per-channel form did), made on the
// layer's first step. Engine thread, before the layer's fan-out.
const float* DeltaNetMixer::conv_taps(const LayerSpec& spec, const DeltaNetWeights& w) {
  const int32_t C = spec.ssm_conv_dim(), K = spec.ssm_conv_kernel;
  std::vector<float>& layer_taps = conv_taps_[size_t(spec.recurrent_ordinal)];
  if (layer_taps.empty()) {
    layer_taps.resize(size_t(K) * size_t(C));
    for (int64_t ch = 0; ch < C; ++ch) {
      for (int32_t k = 0; k < K; ++k) layer_taps[size_t(int64_t{k} * C + ch)] = w.conv[ch * K + k];
    }
  }
  return layer_taps.data();
}

// One task per (sequence, key head): the conv of the key head's q and k channels and of its
// value heads' v channels (every channel belongs to one task), the L2 norms and gates, then the
// recurrence of those value heads. A decode step fans out once a layer (it ran the conv and
// gates on the engine thread, then the recurrence: ~30% of the part, bench/README.md); long
// chunks run their conv first (kWholeRowConvTokens).
void DeltaNetMixer::mix(const StepContext& ctx, const LayerSpec& spec, const DeltaNetWeights& w) {
  const float* taps = conv_taps(spec, w);
  const int32_t S = spec.ssm_state, nk = spec.ssm_key_heads, nv = spec.ssm_value_heads;
  const int64_t n_seq = static_cast<int64_t>(ctx.batch.sequences.size());
  for (const BatchSequence& seq : ctx.batch.sequences) {
    if (seq.n_tokens < kWholeRowConvTokens) continue;
    parallel_for(ctx.pool, spec.ssm_conv_dim(), int64_t{seq.n_tokens} * spec.ssm_conv_kernel,
                 [&](int64_t begin, int64_t end) { conv(spec, seq, taps, begin, end); });
  }
  // A task's cost in state values per token: the pool is woken only for real-size heads
  // (tiny test models run inline; a wake-up costs more than their whole recurrence).
  const int64_t task_work = int64_t{nv / nk} * S * S;
  parallel_for(ctx.pool, n_seq * nk, task_work * std::max<int64_t>(1, ctx.n_tokens / std::max<int64_t>(1, n_seq)),
               [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const BatchSequence& seq = ctx.batch.sequences[task / nk];
      if (seq.n_tokens == 0) continue;
      const int32_t g = static_cast<int32_t>(task % nk);
      if (seq.n_tokens < kWholeRowConvTokens) {
        conv(spec, seq, taps, int64_t{g} * S, int64_t{g + 1} * S);            // q
        conv(spec, seq, taps, int64_t{nk + g} * S, int64_t{nk + g + 1} * S);  // k
        for (int32_t h = 0; h < nv; ++h) {
          if (spec.ssm_key_head(h) != g) continue;
          const int64_t v = int64_t{2 * nk + h} * S;
          conv(spec, seq, taps, v, v + S);
        }
      }
      normalise_qk(spec, seq, g);
      for (int32_t h = 0; h < nv; ++h) {
        if (spec.ssm_key_head(h) != g) continue;
        gates(spec, w, seq, h);
        recurrence(spec, seq, h);
      }
    }
  });
}

// conv_[t][ch] = silu(sum_k w[ch][k] * x_{t-K+1+k}[ch]) for ch in [begin, end) over the window
// [conv state | the sequence's qkv rows of this step]; the output state's channels = the last
// K - 1 raw rows of that window. In place (step input = output) too: state row j is written
// after every output is summed and from window row n + j > j, which no earlier copy wrote.
void DeltaNetMixer::conv(const LayerSpec& spec, const BatchSequence& seq, const float* taps, int64_t begin,
                         int64_t end) {
  const int32_t C = spec.ssm_conv_dim(), K = spec.ssm_conv_kernel, ord = spec.recurrent_ordinal;
  const float* state_in = seq.start_position == 0 ? nullptr : state_->step_input(seq.state_slot, ord);
  float* state_out = state_->step_output(seq.state_slot, ord);
  const int32_t n = seq.n_tokens;
  const float* rows = qkv_.data + size_t(seq.first_token) * C;
  float* conv_out = conv_.data + size_t(seq.first_token) * C;
  // Window position j (0 .. K-2 + n): j < K-1 the state row j (zeros at position 0), else
  // step row j - (K-1).
  auto window_row = [&](int32_t j) -> const float* {
    if (j >= K - 1) return rows + size_t(j - (K - 1)) * C;
    return state_in ? state_in + size_t(j) * C : conv_zeros_.data;
  };
  const float* window[kMaxConvKernel];
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t k = 0; k < K; ++k) window[k] = window_row(t + k);
    kernels::conv_silu(taps, C, window, K, begin, end, conv_out + size_t(t) * C);
  }
  for (int32_t j = 0; j < K - 1; ++j) {
    const float* x = window_row(n + j);
    std::copy(x + begin, x + end, state_out + size_t(j) * C + begin);
  }
}

// Key head g's q and k rows (in conv_) L2-normalised, every token of the sequence.
void DeltaNetMixer::normalise_qk(const LayerSpec& spec, const BatchSequence& seq, int32_t g) {
  const int32_t C = spec.ssm_conv_dim(), S = spec.ssm_state, nk = spec.ssm_key_heads;
  for (int64_t t = seq.first_token; t < seq.first_token + seq.n_tokens; ++t) {
    float* row = conv_.data + t * C;
    l2_normalise(row + int64_t{g} * S, S, cfg_.rms_eps);
    l2_normalise(row + int64_t{nk + g} * S, S, cfg_.rms_eps);
  }
}

// Value head h's beta = sigmoid(b) and g = softplus(a + dt_bias) * ssm_a, every token of the
// sequence.
void DeltaNetMixer::gates(const LayerSpec& spec, const DeltaNetWeights& w, const BatchSequence& seq, int32_t h) {
  const int32_t nk = spec.ssm_key_heads, nv = spec.ssm_value_heads, r = nv / nk;
  for (int64_t t = seq.first_token; t < seq.first_token + seq.n_tokens; ++t) {
    float b, a;
    if (w.fused_ba) {  // per key head g: [beta of its r value heads | alpha of them]
      const float* ba = ba_.data + t * 2 * nv + int64_t{h / r} * 2 * r;
      b = ba[h % r];
      a = ba[r + h % r];
    } else {
      b = ba_.data[t * nv + h];
      a = alpha_.data[t * nv + h];
    }
    beta_.data[t * nv + h] = sigmoid(b);
    g_.data[t * nv + h] = softplus(a + w.dt_bias[h]) * w.a[h];
  }
}

// Value head h's delta-rule recurrence over the sequence's tokens (kernels::gated_delta_net).
void DeltaNetMixer::recurrence(const LayerSpec& spec, const BatchSequence& seq, int32_t h) {
  const int32_t C = spec.ssm_conv_dim(), S = spec.ssm_state, nk = spec.ssm_key_heads, nv = spec.ssm_value_heads;
  const int32_t V = spec.ssm_value_dim(), ord = spec.recurrent_ordinal;
  const int64_t conv_floats = state_->conv_floats(ord);
  const int32_t kh = spec.ssm_key_head(h);
  const float* row = conv_.data + size_t(seq.first_token) * C;
  kernels::GatedDeltaNetArgs a;
  a.state_in = seq.start_position == 0
                   ? nullptr
                   : state_->step_input(seq.state_slot, ord) + conv_floats + int64_t{h} * S * S;
  a.state_out = state_->step_output(seq.state_slot, ord) + conv_floats + int64_t{h} * S * S;
  a.dk = S;
  a.dv = S;
  a.n_tokens = seq.n_tokens;
  a.q = row + int64_t{kh} * S;
  a.k = row + int64_t{nk} * S + int64_t{kh} * S;
  a.qk_stride = C;
  a.v = row + int64_t{2 * nk} * S + int64_t{h} * S;
  a.v_stride = C;
  a.g = g_.data + size_t(seq.first_token) * nv + h;
  a.beta = beta_.data + size_t(seq.first_token) * nv + h;
  a.gb_stride = nv;
  a.scale = 1.0f / std::sqrt(static_cast<float>(S));
  a.out = o_.data + size_t(seq.first_token) * V + int64_t{h} * S;
  a.out_stride = V;
  kernels::gated_delta_net(a);
}

}  // namespace spillway::engine
