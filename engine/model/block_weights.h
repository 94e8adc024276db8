// The weights of one decoder layer, bound by its architecture file (model/arch/) to the
// kinds its LayerSpec names. Views only: matrices point into the model file's mapping, or
// into memory a WeightResidency owns; 1-D tensors into float copies the Model owns.
//
// for_each_matrix visits every 2-D weight of the block in one fixed order (the order is
// the contract residency relies on to place and rebase matrices; norms and biases are not
// visited: they are small, always resident, and never retiled).
#pragma once

#include <utility>
#include <variant>
#include <vector>

#include "kernels/kernels.h"

namespace spillway::engine {

struct AttentionWeights {
  kernels::WeightMatrix wq, wk, wv;  // [q_dim | kv_dim rows, n_embd cols]
  const float* bq = nullptr;         // [q_dim]  (qkv bias only)
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  const float* q_norm = nullptr;     // [head_dim] (per-head QK norm only)
  const float* k_norm = nullptr;     // [head_dim]
  kernels::WeightMatrix wo;          // [n_embd rows, q_dim cols]

  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    fn(wq), fn(wk), fn(wv), fn(wo);
  }
};

struct DenseFfnWeights {
  kernels::WeightMatrix w_gate, w_up;  // [n_ff rows, n_embd cols]
  kernels::WeightMatrix w_down;        // [n_embd rows, n_ff cols]

  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    fn(w_gate), fn(w_up), fn(w_down);
  }
};

// One routed expert of a MoE FFN: a residency unit of its own ({layer, expert}), served by
// LayerWeightSource::acquire_experts.
struct ExpertWeights {
  kernels::WeightMatrix gate, up;  // [n_ff_expert rows, n_embd cols]
  kernels::WeightMatrix down;      // [n_embd rows, n_ff_expert cols]

  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    fn(gate), fn(up), fn(down);
  }
};

// A gated delta net mixer (LayerSpec::ssm_*; C = ssm_conv_dim, V = ssm_value_dim, nv value heads).
struct DeltaNetWeights {
  kernels::WeightMatrix w_qkv;    // [C rows, n_embd]: q (nk*dk) | k (nk*dk) | v (nv*dv)
  kernels::WeightMatrix w_gate;   // [V rows, n_embd]: z, the output gate
  // Or both fused as Hugging Face's qwen3_next in_proj_qkvz (w_qkv / w_gate unused):
  // [C + V rows, n_embd], per key head g the rows [q_g (dk) | k_g (dk) | v of its r value
  // heads (r dv) | z of them (r dv)].
  bool fused_qkvz = false;
  kernels::WeightMatrix w_qkvz;
  // beta / alpha either as two matrices [nv rows, n_embd] (qwen35*), or fused (qwen3next):
  // w_ba [2 nv rows, n_embd], per key head g the rows [beta of its r value heads | alpha of them].
  bool fused_ba = false;
  kernels::WeightMatrix w_beta, w_alpha;
  kernels::WeightMatrix w_ba;
  const float* conv = nullptr;     // [C][K] causal depthwise conv, tap K-1 = the current token
  const float* dt_bias = nullptr;  // [nv]
  const float* a = nullptr;        // [nv] -exp(A_log) (< 0)
  const float* norm = nullptr;     // [dv] RMSNorm weight of each head's output (no +1 folded)
  kernels::WeightMatrix w_out;     // [n_embd rows, V]

  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    if (fused_qkvz) {
      fn(w_qkvz);
    } else {
      fn(w_qkv), fn(w_gate);
    }
    if (fused_ba) {
      fn(w_ba);
    } else {
      fn(w_beta), fn(w_alpha);
    }
    fn(w_out);
  }
};

// A mixture-of-experts FFN (forward/moe_ffn.h; bound by model/arch/moe_block.h).
// Routed expert e is the contiguous slice e of the file's 3-D tensors ffn_{gate,up,down}_exps
// (or of the fused ffn_gate_up_exps: gate = its first n_ff_expert rows, up = the next ones),
// so each expert is 2 or 3 contiguous byte ranges of the file.
//
// for_each_matrix visits: the router, the shared expert's gate, up, down (when present),
// then every routed expert in id order (gate, up, down). Visiting the experts makes a
// whole-layer unit of them (layer streaming reads them all; the matmul scratch is sized for
// them); an expert tier (residency/) serves them one by one through
// LayerWeightSource::acquire_experts instead and skips them with for_each_non_expert_matrix.
struct MoeFfnWeights {
  kernels::WeightMatrix router;  // ffn_gate_inp [n_expert rows, n_embd cols] (F32 in files)
  std::vector<ExpertWeights> experts;  // [n_expert]
  // Shared expert (LayerSpec::n_ff_shared > 0), else empty (rows == 0).
  kernels::WeightMatrix shared_gate, shared_up;  // [n_ff_shared rows, n_embd cols]
  kernels::WeightMatrix shared_down;             // [n_embd rows, n_ff_shared cols]
  // ffn_gate_inp_shexp [n_embd] (a float copy the Model owns): the shared expert's output is
  // scaled by sigmoid(dot(shared_gate_inp, h)); null: not gated (scale 1).
  const float* shared_gate_inp = nullptr;

  bool has_shared() const { return shared_down.rows > 0; }

  template <class Fn>
  void for_each_non_expert_matrix(Fn&& fn) {
    fn(router);
    if (has_shared()) fn(shared_gate), fn(shared_up), fn(shared_down);
  }
  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    for_each_non_expert_matrix(fn);
    for (ExpertWeights& e : experts) e.for_each_matrix(fn);
  }
};

// Each variant gains an alternative with its kind.
using MixerWeights = std::variant<AttentionWeights, DeltaNetWeights>;
using FfnWeights = std::variant<DenseFfnWeights, MoeFfnWeights>;

struct BlockWeights {
  const float* mixer_norm = nullptr;  // [n_embd] RMSNorm weight before the mixer
  const float* ffn_norm = nullptr;    // [n_embd] RMSNorm weight before the FFN
  MixerWeights mixer;
  FfnWeights ffn;

  // fn(kernels::WeightMatrix&) for every matrix: the mixer's, then the FFN's.
  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    std::visit([&](auto& m) { m.for_each_matrix(fn); }, mixer);
    std::visit([&](auto& f) { f.for_each_matrix(fn); }, ffn);
  }
  // fn(const kernels::WeightMatrix&).
  template <class Fn>
  void for_each_matrix(Fn&& fn) const {
    const_cast<BlockWeights*>(this)->for_each_matrix(
        [&](kernels::WeightMatrix& m) { fn(static_cast<const kernels::WeightMatrix&>(m)); });
  }
};

}  // namespace spillway::engine
