#include "engine/forward/dense_ffn.h"

#include <algorithm>

namespace spillway::engine {

DenseFfn::DenseFfn(const ModelConfig& config) : cfg_(config) {
  for (const LayerSpec& s : config.layers) {
    if (s.ffn == FfnKind::Dense) max_ff_ = std::max(max_ff_, s.n_ff);
  }
}

void DenseFfn::ensure_capacity(int32_t n_tokens) {
  if (n_tokens <= token_capacity_) return;
  token_capacity_ = n_tokens;
  const size_t t = n_tokens;
  h_.resize(t * cfg_.n_embd);
  gate_.resize(t * max_ff_);
  up_.resize(t * max_ff_);
}

Status DenseFfn::run(const StepContext& ctx, const LayerSpec& spec, const DenseFfnWeights& w, const float* norm,
                   const float* x, float* out) {
  using P = ForwardProfile;
  const int32_t n_tokens = ctx.n_tokens;
  NormRows ffn_norm{x, norm, h_.data, cfg_.n_embd, cfg_.rms_eps};
  {
    const kernels::WeightMatrix* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {gate_.data, up_.data};
    SPILLWAY_TRY(ctx.matmul_multi(P::GateUp, ws, h_.data, n_tokens, ys, {NormRows::apply, &ffn_norm}));
  }
  // SwiGLU of each row (into gate_) fused into the down projection's activation pass.
  struct SiluRows {
    float* gate;
    const float* up;
    int32_t n_ff;
  } silu{gate_.data, up_.data, spec.n_ff};
  auto silu_row = [](void* c, int64_t t) {
    const auto* s = static_cast<const SiluRows*>(c);
    float* g = s->gate + t * s->n_ff;
    kernels::silu_mul(g, s->up + t * s->n_ff, g, s->n_ff);
  };
  const kernels::WeightMatrix* ws[] = {&w.w_down};
  float* ys[] = {out};
  return ctx.matmul_multi(P::Down, ws, gate_.data, n_tokens, ys, {silu_row, &silu});
}

}  // namespace spillway::engine
