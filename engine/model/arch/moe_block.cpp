#include "engine/model/arch/moe_block.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

namespace {

Result<int64_t> read_count(const ModelSource& src, const std::string& key, bool required) {
  auto v = src.metadata().get_int(key);
  if (!v) return v.error();
  if (!v->has_value()) {
    if (required) return Error{fmt::format("{}: missing metadata key '{}'", src.path(), key)};
    return int64_t{0};
  }
  const int64_t x = **v;
  if (x <= 0 || x > (int64_t{1} << 24)) {
    return Error{fmt::format("{}: metadata '{}' = {} is out of range", src.path(), key, x)};
  }
  return x;
}

// The slice of expert e of a 3-D expert tensor `t` seen as [rows, cols] matrices, the
// expert's rows starting at row `first_row` of its slice.
kernels::WeightMatrix expert_slice(const TensorInfo& t, int32_t n_expert, int32_t e, int64_t first_row,
                                   int64_t rows, int64_t cols) {
  const uint64_t stride = t.n_bytes / static_cast<uint64_t>(n_expert);
  const auto* base = static_cast<const uint8_t*>(t.data) + stride * static_cast<uint64_t>(e) +
                     static_cast<uint64_t>(first_row * kernels::row_bytes(t.type, cols));
  return kernels::WeightMatrix{t.type, base, rows, cols};
}

// A 3-D expert tensor of shape {cols, rows_per_expert, n_expert}, rows a multiple of the
// type's block.
Result<const TensorInfo*> expert_tensor(const WeightBinder& b, const std::string& name, int64_t cols,
                                        int64_t rows, int64_t n_expert) {
  auto t = b.require(name, {cols, rows, n_expert});
  if (!t) return t.error();
  if (cols % kernels::block_elems((*t)->type) != 0) {
    return Error{fmt::format("{}: tensor '{}' rows of {} are not a multiple of the {} block",
                             b.source().path(), name, cols, kernels::dtype_name((*t)->type))};
  }
  return t;
}

// The shared expert's tensors (when the spec has one) into w.
Result<MoeFfnWeights> bind_shared_expert(WeightBinder& b, const ModelConfig& c, const LayerSpec& s,
                                         const std::string& p, MoeFfnWeights w);

}  // namespace

Result<MoeDims> read_moe_dims(const ModelSource& src, std::string_view arch, bool default_renormalize) {
  const std::string a = std::string(arch) + ".";
  MoeDims d;
  ASSIGN_OR_RETURN(const int64_t n_expert, read_count(src, a + "expert_count", true));
  ASSIGN_OR_RETURN(const int64_t n_used, read_count(src, a + "expert_used_count", true));
  ASSIGN_OR_RETURN(const int64_t n_ff, read_count(src, a + "expert_feed_forward_length", true));
  ASSIGN_OR_RETURN(int64_t n_shared, read_count(src, a + "expert_shared_feed_forward_length", false));
  if (n_used > n_expert) {
    return Error{fmt::format("{}: metadata '{}expert_used_count' = {} exceeds '{}expert_count' = {}", src.path(),
                             a, n_used, a, n_expert)};
  }
  if (n_shared == 0) {
    if (const TensorInfo* t = src.find_tensor("blk.0.ffn_up_shexp.weight"); t && t->shape.size() == 2) {
      n_shared = t->shape[1];
    }
  }
  d.n_expert = static_cast<int32_t>(n_expert);
  d.n_expert_used = static_cast<int32_t>(n_used);
  d.n_ff_expert = static_cast<int32_t>(n_ff);
  d.n_ff_shared = static_cast<int32_t>(n_shared);
  auto norm = src.metadata().get_bool(a + "expert_weights_norm");
  if (!norm) return norm.error();
  d.renormalize = norm->value_or(default_renormalize);
  auto scale = src.metadata().get_float(a + "expert_weights_scale");
  if (!scale) return scale.error();
  d.weights_scale = static_cast<float>(scale->value_or(1.0));
  if (!(d.weights_scale > 0.0f) || !std::isfinite(d.weights_scale)) {
    return Error{fmt::format("{}: metadata '{}expert_weights_scale' must be a positive number", src.path(), a)};
  }
  return d;
}

void set_moe_ffn(LayerSpec& spec, const MoeDims& dims) {
  spec.ffn = FfnKind::Moe;
  spec.n_expert = dims.n_expert;
  spec.n_expert_used = dims.n_expert_used;
  spec.n_ff_expert = dims.n_ff_expert;
  spec.n_ff_shared = dims.n_ff_shared;
  spec.moe_renormalize = dims.renormalize;
  spec.expert_weights_scale = dims.weights_scale;
}

Result<MoeFfnWeights> bind_moe_ffn(WeightBinder& b, const ModelConfig& c, const LayerSpec& s,
                                   const std::string& p) {
  const int64_t d = c.n_embd, ff = s.n_ff_expert, ne = s.n_expert;
  MoeFfnWeights w;
  ASSIGN_OR_RETURN(w.router, b.matrix(p + "ffn_gate_inp.weight", ne, d));
  w.experts.resize(static_cast<size_t>(ne));
  if (b.has(p + "ffn_gate_up_exps.weight")) {
    ASSIGN_OR_RETURN(const TensorInfo* gu, expert_tensor(b, p + "ffn_gate_up_exps.weight", d, 2 * ff, ne));
    for (int32_t e = 0; e < ne; ++e) {
      w.experts[e].gate = expert_slice(*gu, s.n_expert, e, 0, ff, d);
      w.experts[e].up = expert_slice(*gu, s.n_expert, e, ff, ff, d);
    }
  } else if (!b.has(p + "ffn_gate_exps.weight") && b.has(p + "ffn_gate_exps.0.weight")) {
    // Hugging Face folders: one 2-D tensor per expert (format/hf_tensor_names.cpp).
    for (int32_t e = 0; e < ne; ++e) {
      const std::string x = fmt::format(".{}.weight", e);
      ASSIGN_OR_RETURN(w.experts[e].gate, b.matrix(p + "ffn_gate_exps" + x, ff, d));
      ASSIGN_OR_RETURN(w.experts[e].up, b.matrix(p + "ffn_up_exps" + x, ff, d));
      ASSIGN_OR_RETURN(w.experts[e].down, b.matrix(p + "ffn_down_exps" + x, d, ff));
    }
    return bind_shared_expert(b, c, s, p, std::move(w));
  } else {
    ASSIGN_OR_RETURN(const TensorInfo* g, expert_tensor(b, p + "ffn_gate_exps.weight", d, ff, ne));
    ASSIGN_OR_RETURN(const TensorInfo* u, expert_tensor(b, p + "ffn_up_exps.weight", d, ff, ne));
    for (int32_t e = 0; e < ne; ++e) {
      w.experts[e].gate = expert_slice(*g, s.n_expert, e, 0, ff, d);
      w.experts[e].up = expert_slice(*u, s.n_expert, e, 0, ff, d);
    }
  }
  ASSIGN_OR_RETURN(const TensorInfo* dn, expert_tensor(b, p + "ffn_down_exps.weight", ff, d, ne));
  for (int32_t e = 0; e < ne; ++e) w.experts[e].down = expert_slice(*dn, s.n_expert, e, 0, d, ff);
  return bind_shared_expert(b, c, s, p, std::move(w));
}

namespace {

Result<MoeFfnWeights> bind_shared_expert(WeightBinder& b, const ModelConfig& c, const LayerSpec& s,
                                         const std::string& p, MoeFfnWeights w) {
  const int64_t d = c.n_embd;
  if (s.n_ff_shared > 0) {
    const int64_t sf = s.n_ff_shared;
    ASSIGN_OR_RETURN(w.shared_gate, b.matrix(p + "ffn_gate_shexp.weight", sf, d));
    ASSIGN_OR_RETURN(w.shared_up, b.matrix(p + "ffn_up_shexp.weight", sf, d));
    ASSIGN_OR_RETURN(w.shared_down, b.matrix(p + "ffn_down_shexp.weight", d, sf));
    ASSIGN_OR_RETURN(w.shared_gate_inp, b.vector_f32(p + "ffn_gate_inp_shexp.weight", d, false));
  }
  return w;
}

}  // namespace

Result<BlockWeights> bind_attention_moe_block(WeightBinder& b, const ModelConfig& c, int32_t layer) {
  const LayerSpec& s = c.layers[layer];
  const std::string p = fmt::format("blk.{}.", layer);
  BlockWeights block;
  SPILLWAY_TRY(bind_attention_mixer(b, c, layer, block));
  ASSIGN_OR_RETURN(block.ffn_norm, b.vector_f32(p + "ffn_norm.weight", c.n_embd, true));
  if (s.ffn != FfnKind::Moe) {
    return Error{fmt::format("{}: layer {} is not a MoE layer", b.source().path(), layer)};
  }
  ASSIGN_OR_RETURN(block.ffn, bind_moe_ffn(b, c, s, p));
  return block;
}

}  // namespace spillway::engine
