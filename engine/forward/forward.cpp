#include "engine/forward/forward.h"

#include <algorithm>
#include <cassert>
#include <variant>

namespace spillway::engine {

namespace {
constexpr size_t kAlignFloats = 16;  // 64 bytes

template <class T>
T* align64(T* p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<T*>((addr + 63) & ~uintptr_t{63});
}

// Keys a query at `position` of `seq` attends: its causal prefix, or for a position inside
// a canvas the whole canvas (bidirectional) after the committed prefix.
int64_t key_count(const BatchSequence& seq, int64_t position) {
  if (seq.mode == AttentionMode::Padding) return 0;
  if (seq.mode == AttentionMode::Canvas && position >= seq.canvas_begin && position < seq.canvas_end) {
    return seq.canvas_end;
  }
  return position + 1;
}
}  // namespace

const char* ForwardProfile::name(int part) {
  static constexpr const char* kNames[kParts] = {"embed", "norms", "qkv", "rope_kv", "attention", "wo",
                                                 "gate_up", "silu_mul", "down", "residual", "logits", "weights",
                                                 "recurrence"};
  return part >= 0 && part < kParts ? kNames[part] : "?";
}

double ForwardProfile::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

void AlignedBuffer::resize(size_t floats) {
  if (storage_.size() >= floats + kAlignFloats) return;
  storage_.assign(floats + kAlignFloats, 0.0f);
  data = align64(storage_.data());
}

ForwardPass::ForwardPass(const Model& model, KvCache& kv, kernels::ThreadPool& pool,
                         int32_t max_batch_tokens, int32_t max_context,
                         LayerWeightSource* weights)
    : model_(model),
      cfg_(model.config()),
      mapped_weights_(model),
      weights_(weights ? weights : &mapped_weights_),
      pool_(pool),
      attention_(model.config(), kv, pool),
      delta_net_(model.config()),
      dense_ffn_(model.config()),
      moe_ffn_(model.config()) {
  ensure_capacity(max_batch_tokens, std::min(max_batch_tokens, 64), max_context);
}

void ForwardPass::ensure_capacity(int32_t n_tokens, int32_t n_logit_rows, int64_t max_keys) {
  attention_.ensure_capacity(n_tokens, max_keys);
  delta_net_.ensure_capacity(n_tokens);
  dense_ffn_.ensure_capacity(n_tokens);
  moe_ffn_.ensure_capacity(n_tokens);
  if (n_tokens > token_capacity_) {
    token_capacity_ = n_tokens;
    x_.resize(size_t(n_tokens) * cfg_.n_embd);
    h_.resize(size_t(n_tokens) * cfg_.n_embd);
  }
  if (n_logit_rows > logit_capacity_) {
    logit_capacity_ = n_logit_rows;
    final_rows_.resize(size_t(n_logit_rows) * cfg_.n_embd);
    logits_.resize(size_t(n_logit_rows) * cfg_.n_vocab);
  }
  // Matmul scratch for the largest matmul of a step, of either token count.
  size_t need = 0;
  const int64_t m = std::max(token_capacity_, logit_capacity_);
  for (const BlockWeights& block : model_.layers()) {
    block.for_each_matrix([&](const kernels::WeightMatrix& w) { need = std::max(need, kernels::matmul_scratch_bytes(w, m)); });
  }
  need = std::max(need, kernels::matmul_scratch_bytes(model_.output(), m));
  if (need > matmul_scratch_bytes_) {
    matmul_scratch_bytes_ = need;
    matmul_scratch_storage_.assign(need + 64, 0);
    matmul_scratch_ = align64(matmul_scratch_storage_.data());
  }
}

Result<std::span<const float>> ForwardPass::execute(const ForwardBatch& batch) {
  const auto n_tokens = static_cast<int32_t>(batch.tokens.size());
  const auto n_logits = static_cast<int32_t>(batch.logit_rows.size());
  if (n_tokens == 0) return std::span<const float>();

  int64_t max_keys = 0;
  token_sequence_.resize(n_tokens);
  token_position_.resize(n_tokens);
  token_key_count_.resize(n_tokens);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const BatchSequence& seq = batch.sequences[s];
    assert(seq.first_token >= 0 && seq.first_token + seq.n_tokens <= n_tokens);
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      const int32_t t = seq.first_token + i;
      token_sequence_[t] = static_cast<int32_t>(s);
      token_position_[t] = seq.positions.empty() ? seq.start_position + i : seq.positions[i];
      token_key_count_[t] = key_count(seq, token_position_[t]);
      max_keys = std::max(max_keys, token_key_count_[t]);
    }
  }
  ensure_capacity(n_tokens, n_logits, max_keys);
  const StepContext ctx{.batch = batch,
                        .n_tokens = n_tokens,
                        .token_sequence = token_sequence_.data(),
                        .token_position = token_position_.data(),
                        .token_key_count = token_key_count_.data(),
                        .pool = pool_,
                        .matmul_scratch = matmul_scratch_,
                        .profile = profile_};
  attention_.plan_step(ctx);
  if (Status s = delta_net_.plan_step(ctx); !s) return s.error();

  Status embedded;
  timed(profile_, ForwardProfile::Embed, [&] {
    const kernels::DType type = weights_->token_embedding().type;
    embd_row_scratch_.resize(static_cast<size_t>(kernels::row_bytes(type, cfg_.n_embd)));
    for (int32_t t = 0; t < n_tokens && embedded.ok(); ++t) {
      const int32_t id = batch.tokens[t];
      assert(id >= 0 && id < cfg_.n_vocab);
      Result<const uint8_t*> row = weights_->embedding_row(id, embd_row_scratch_.data());
      if (!row) {
        embedded = row.error();
        return;
      }
      kernels::dequantize_row(type, *row, x_.data + size_t(t) * cfg_.n_embd, cfg_.n_embd);
    }
  });
  if (!embedded.ok()) return embedded.error();

  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    Result<const BlockWeights*> layer = Error{""};
    timed(profile_, ForwardProfile::Weights, [&] { layer = weights_->acquire_layer(l); });
    if (!layer) return layer.error();
    const Status ran = run_layer(ctx, l, **layer);
    weights_->release_layer(l);
    if (!ran.ok()) return ran.error();
  }

  if (n_logits == 0) return std::span<const float>();
  timed(profile_, ForwardProfile::Logits, [&] {
    for (int32_t r = 0; r < n_logits; ++r) {
      const int32_t t = batch.logit_rows[r];
      assert(t >= 0 && t < n_tokens);
      kernels::rms_norm(x_.data + size_t(t) * cfg_.n_embd, model_.output_norm(),
                        final_rows_.data + size_t(r) * cfg_.n_embd, cfg_.n_embd, cfg_.rms_eps);
    }
    ctx.matmul(weights_->output(), final_rows_.data, n_logits, logits_.data);
  });
  return std::span<const float>(logits_.data, size_t(n_logits) * cfg_.n_vocab);
}

Status ForwardPass::run_layer(const StepContext& step, int32_t layer, const BlockWeights& w) {
  const LayerSpec& spec = cfg_.layers[layer];
  const int64_t elements = int64_t(step.n_tokens) * cfg_.n_embd;
  // The kinds acquire the matrices of each matmul through ctx (streamed layers).
  StepContext ctx = step;
  ctx.weights = weights_;
  ctx.layer = layer;
  Status mixer_status;
  std::visit([&](const auto& mixer) {
    using T = std::decay_t<decltype(mixer)>;
    if constexpr (std::is_same_v<T, AttentionWeights>) {
      mixer_status = attention_.run(ctx, spec, mixer, w.mixer_norm, x_.data, h_.data);
    } else if constexpr (std::is_same_v<T, DeltaNetWeights>) {
      mixer_status = delta_net_.run(ctx, spec, mixer, w.mixer_norm, x_.data, h_.data);
    }
  }, w.mixer);
  SPILLWAY_TRY(mixer_status);
  timed(profile_, ForwardProfile::Residual, [&] { kernels::add_inplace(x_.data, h_.data, elements); });
  Status ffn_status;
  std::visit([&](const auto& ffn) {
    using T = std::decay_t<decltype(ffn)>;
    if constexpr (std::is_same_v<T, DenseFfnWeights>) {
      ffn_status = dense_ffn_.run(ctx, spec, ffn, w.ffn_norm, x_.data, h_.data);
    } else if constexpr (std::is_same_v<T, MoeFfnWeights>) {
      ffn_status = moe_ffn_.run(ctx, spec, ffn, w.ffn_norm, x_.data, h_.data, *weights_, layer);
    }
  }, w.ffn);
  SPILLWAY_TRY(ffn_status);
  timed(profile_, ForwardProfile::Residual, [&] { kernels::add_inplace(x_.data, h_.data, elements); });
  return {};
}

}  // namespace spillway::engine
