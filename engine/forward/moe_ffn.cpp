#include "engine/forward/moe_ffn.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace spillway::engine {

void moe_route(const float* logits, int32_t n_expert, int32_t n_used, bool renormalize, float scale,
               float* probs, int32_t* ids, float* weights) {
  assert(n_used >= 1 && n_used <= n_expert);
  std::memcpy(probs, logits, sizeof(float) * n_expert);
  kernels::softmax(probs, n_expert);
  // Top-k by insertion, scanning ids in ascending order: a later id displaces an earlier one
  // only when strictly more probable, so ties keep the lower id first.
  int32_t n = 0;
  for (int32_t e = 0; e < n_expert; ++e) {
    const float p = probs[e];
    if (n == n_used && !(p > probs[ids[n - 1]])) continue;
    int32_t pos = n < n_used ? n++ : n - 1;
    while (pos > 0 && p > probs[ids[pos - 1]]) {
      ids[pos] = ids[pos - 1];
      --pos;
    }
    ids[pos] = e;
  }
  float sum = 0.0f;
  for (int32_t j = 0; j < n_used; ++j) {
    weights[j] = probs[ids[j]];
    sum += weights[j];
  }
  if (renormalize) {
    const float denom = std::max(sum, kMoeRenormMin);
    for (int32_t j = 0; j < n_used; ++j) weights[j] /= denom;
  }
  if (scale != 0.0f && scale != 1.0f) {
    for (int32_t j = 0; j < n_used; ++j) weights[j] *= scale;
  }
}

MoeFfn::MoeFfn(const ModelConfig& config) : cfg_(config) {
  for (const LayerSpec& s : config.layers) {
    if (s.ffn != FfnKind::Moe) continue;
    max_expert_ = std::max(max_expert_, s.n_expert);
    max_used_ = std::max(max_used_, s.n_expert_used);
    max_ff_expert_ = std::max(max_ff_expert_, s.n_ff_expert);
    max_ff_shared_ = std::max(max_ff_shared_, s.n_ff_shared);
  }
}

void MoeFfn::record_full_routing(bool on) {
  record_full_routing_ = on;
  full_routing_.resize(cfg_.layers.size());
  for (auto& r : full_routing_) r.clear();
}

void MoeFfn::ensure_capacity(int32_t n_tokens) {
  if (max_expert_ == 0 || n_tokens <= token_capacity_) return;
  token_capacity_ = n_tokens;
  const size_t t = n_tokens, d = cfg_.n_embd;
  h_.resize(t * d);
  logits_.resize(t * max_expert_);
  probs_.resize(max_expert_);
  sel_ids_.resize(t * max_used_);
  sel_w_.resize(t * max_used_);
  pair_token_.resize(t * max_used_);
  pair_slot_.resize(t * max_used_);
  expert_begin_.resize(max_expert_ + 1);
  cursor_.reserve(max_expert_);
  used_ids_.reserve(max_expert_);
  xe_.resize(t * d);
  ge_.resize(t * max_ff_expert_);
  ue_.resize(t * max_ff_expert_);
  ye_.resize(t * d);
  slot_out_.resize(t * max_used_ * d);
  if (max_ff_shared_ > 0) {
    sg_.resize(t * max_ff_shared_);
    su_.resize(t * max_ff_shared_);
    sh_out_.resize(t * d);
    sh_gate_.resize(t);
  }
}

namespace {

// The SwiGLU of each row (into gate) as the down projection's row prologue.
struct SiluRows {
  float* gate;
  const float* up;
  int32_t n_ff;

  static void apply(void* c, int64_t t) {
    const auto* s = static_cast<const SiluRows*>(c);
    float* g = s->gate + t * s->n_ff;
    kernels::silu_mul(g, s->up + t * s->n_ff, g, s->n_ff);
  }
};

}  // namespace

Status MoeFfn::run(const StepContext& ctx, const LayerSpec& spec, const MoeFfnWeights& w, const float* norm,
                   const float* x, float* out, LayerWeightSource& source, int32_t layer) {
  using P = ForwardProfile;
  const int32_t n_tokens = ctx.n_tokens;
  const int32_t d = cfg_.n_embd;
  const int32_t n_expert = spec.n_expert;
  const int32_t k_step = used_override_ > 0 ? std::min(used_override_, spec.n_expert_used) : spec.n_expert_used;
  // Per token its expert count (MoBiLE's little rows: token_used_); k = the largest, the
  // stride of sel_ids_ / sel_w_ / slot_out_.
  const bool per_token = !token_used_.empty();
  assert(!per_token || token_used_.size() == size_t(n_tokens));
  auto k_of = [&](int32_t t) {
    return per_token && token_used_[t] > 0 ? std::min(token_used_[t], spec.n_expert_used) : k_step;
  };
  int32_t k = k_step;
  if (per_token) {
    k = 1;
    for (int32_t t = 0; t < n_tokens; ++t) k = std::max(k, k_of(t));
  }
  assert(n_tokens <= token_capacity_ && n_expert <= max_expert_ && k >= 1);
  const bool shared = w.has_shared();

  // 1. One pass over h = RMSNorm(x): router logits, and the shared expert's gate, up and
  //    scalar gate.
  NormRows norm_rows{x, norm, h_.data, d, cfg_.rms_eps};
  const kernels::WeightMatrix shared_gate_vec{kernels::DType::F32, w.shared_gate_inp, 1, d};
  {
    // shared_gate_vec is a view of a vector the Model owns, not one of the layer's matrices.
    const kernels::WeightMatrix* ws[4] = {&w.router};
    float* ys[4] = {logits_.data};
    size_t n = 1;
    if (shared) {
      ws[n] = &w.shared_gate, ys[n++] = sg_.data;
      ws[n] = &w.shared_up, ys[n++] = su_.data;
      if (w.shared_gate_inp) ws[n] = &shared_gate_vec, ys[n++] = sh_gate_.data;
    }
    SPILLWAY_TRY(ctx.matmul_multi(P::GateUp, std::span(ws, n), h_.data, n_tokens, std::span(ys, n),
                                  {NormRows::apply, &norm_rows}));
  }

  // 2. Route every token.
  for (int32_t t = 0; t < n_tokens; ++t) {
    const int32_t kt = k_of(t);
    const float* router_logits = logits_.data + size_t(t) * n_expert;
    moe_route(router_logits, n_expert, kt, spec.moe_renormalize, spec.expert_weights_scale, probs_.data,
              sel_ids_.data() + size_t(t) * k, sel_w_.data() + size_t(t) * k);
    std::fill(sel_ids_.begin() + size_t(t) * k + kt, sel_ids_.begin() + size_t(t + 1) * k, -1);
    if (record_full_routing_ && kt < spec.n_expert_used) {
      // What the full top-k of this token would be at this layer (MoBiLE's fallback prefetch).
      full_ids_tmp_.resize(spec.n_expert_used);
      full_w_tmp_.resize(spec.n_expert_used);
      moe_route(router_logits, n_expert, spec.n_expert_used, spec.moe_renormalize, spec.expert_weights_scale,
                probs_.data, full_ids_tmp_.data(), full_w_tmp_.data());
      auto& rec = full_routing_[layer];
      for (int32_t j = 0; j < spec.n_expert_used; ++j) rec.push_back({t, full_ids_tmp_[j]});
    }
  }
  last_routed_ = size_t(n_tokens) * k;
  last_k_ = k;

  // 3. Group the (token, slot) pairs by expert, tokens ascending within an expert.
  std::fill(expert_begin_.begin(), expert_begin_.begin() + n_expert + 1, 0);
  for (size_t i = 0; i < last_routed_; ++i) {
    if (sel_ids_[i] >= 0) ++expert_begin_[sel_ids_[i] + 1];
  }
  for (int32_t e = 0; e < n_expert; ++e) expert_begin_[e + 1] += expert_begin_[e];
  used_ids_.clear();
  for (int32_t e = 0; e < n_expert; ++e) {
    if (expert_begin_[e + 1] > expert_begin_[e]) used_ids_.push_back(e);
  }
  if (on_route) on_route(layer, used_ids_);
  cursor_.assign(expert_begin_.begin(), expert_begin_.begin() + n_expert);
  for (int32_t t = 0; t < n_tokens; ++t) {
    for (int32_t j = 0, kt = k_of(t); j < kt; ++j) {
      const int32_t at = cursor_[sel_ids_[size_t(t) * k + j]]++;
      pair_token_[at] = t;
      pair_slot_[at] = t * k + j;
    }
  }

  // 4. Each expert the step uses, once, over the rows routed to it; in waves when the
  //    source cannot hold them all at once (an expert cache smaller than the step's set).
  const size_t row_bytes = sizeof(float) * d;
  const size_t wave = static_cast<size_t>(std::max(1, source.max_experts_per_acquire()));
  for (size_t first = 0; first < used_ids_.size(); first += wave) {
    const std::span<const int32_t> ids(used_ids_.data() + first, std::min(wave, used_ids_.size() - first));
    // The experts already in memory first, then each one read from disk as it lands: the
    // reads of the misses overlap the compute of the hits. (Each expert writes only its own
    // rows of slot_out_, so the order does not change a bit.)
    auto experts = source.begin_acquire_experts(layer, ids, ready_);
    if (!experts) return experts.error();
    assert(experts->size() == ids.size() && ready_.size() == ids.size());
    auto run_expert = [&](size_t i) {
      const int32_t e = ids[i];
      const ExpertWeights& ew = *(*experts)[i];
      const int32_t begin = expert_begin_[e];
      const int32_t rows = expert_begin_[e + 1] - begin;
      for (int32_t r = 0; r < rows; ++r) {
        std::memcpy(xe_.data + size_t(r) * d, h_.data + size_t(pair_token_[begin + r]) * d, row_bytes);
      }
      const auto n_ff = static_cast<int32_t>(ew.gate.rows);
      timed(ctx.profile, P::GateUp, [&] {
        const kernels::WeightMatrix* ws[] = {&ew.gate, &ew.up};
        float* ys[] = {ge_.data, ue_.data};
        kernels::matmul_multi(ws, xe_.data, rows, ys, ctx.matmul_scratch, ctx.pool);
      });
      SiluRows silu{ge_.data, ue_.data, n_ff};
      timed(ctx.profile, P::Down, [&] {
        const kernels::WeightMatrix* ws[] = {&ew.down};
        float* ys[] = {ye_.data};
        kernels::matmul_multi(ws, ge_.data, rows, ys, ctx.matmul_scratch, ctx.pool, {SiluRows::apply, &silu});
      });
      for (int32_t r = 0; r < rows; ++r) {
        std::memcpy(slot_out_.data + size_t(pair_slot_[begin + r]) * d, ye_.data + size_t(r) * d, row_bytes);
      }
    };
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ready_[i]) run_expert(i);
    }
    Status waited;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ready_[i]) continue;
      if (waited.ok()) waited = source.wait_expert(layer, i);  // after an error: drain only
      if (waited.ok()) run_expert(i);
    }
    SPILLWAY_TRY(waited);
    if (first + wave < used_ids_.size()) source.release_experts(layer);
  }

  // 5. The shared expert's down projection.
  if (shared) {
    SiluRows silu{sg_.data, su_.data, static_cast<int32_t>(w.shared_gate.rows)};
    const kernels::WeightMatrix* ws[] = {&w.shared_down};
    float* ys[] = {sh_out_.data};
    SPILLWAY_TRY(ctx.matmul_multi(P::Down, ws, sg_.data, n_tokens, ys, {SiluRows::apply, &silu}));
  }

  // 6. Per token, in slot order: out = sum_j w_j * y_j (+ gate * shared), as llama.cpp adds
  //    the weighted expert outputs one after the other and the shared expert last.
  timed(ctx.profile, P::Residual, [&] {
    parallel_for(ctx.pool, n_tokens, int64_t(d) * k, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* o = out + t * d;
        const float* wt = sel_w_.data() + t * k;
        const float* y0 = slot_out_.data + size_t(t * k) * d;
        for (int32_t c = 0; c < d; ++c) o[c] = wt[0] * y0[c];
        for (int32_t j = 1, kt = k_of(static_cast<int32_t>(t)); j < kt; ++j) {
          const float* y = slot_out_.data + size_t(t * k + j) * d;
          const float wj = wt[j];
          for (int32_t c = 0; c < d; ++c) o[c] += wj * y[c];
        }
        if (shared) {
          const float g = w.shared_gate_inp ? 1.0f / (1.0f + std::exp(-sh_gate_.data[t])) : 1.0f;
          const float* s = sh_out_.data + size_t(t) * d;
          for (int32_t c = 0; c < d; ++c) o[c] += s[c] * g;
        }
      }
    });
  });
  return {};
}

}  // namespace spillway::engine
