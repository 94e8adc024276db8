#include "engine/forward.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cassert>
#include <cmath>
#include <cstring>

namespace spillway::engine {

namespace {
constexpr size_t kAlignFloats = 16;  // 64 bytes

template <class T>
T* align64(T* p) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<T*>((addr + 63) & ~uintptr_t{63});
}
}  // namespace

const char* ForwardProfile::name(int part) {
  static constexpr const char* kNames[kParts] = {"embed", "norms", "qkv", "rope_kv", "attention", "wo",
                                                 "gate_up", "silu_mul", "down", "residual", "logits", "weights"};
  return part >= 0 && part < kParts ? kNames[part] : "?";
}

double ForwardProfile::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

namespace {
// Elementwise work below this many values runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kSerialElements = 32 * 1024;

// fn(begin, end) over [0, n) on the pool, or inline when n * elements_per_item is small.
template <class Fn>
void parallel_for(kernels::ThreadPool& pool, int64_t n, int64_t elements_per_item, Fn&& fn) {
  if (n * elements_per_item < kSerialElements) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, fn);
}
}  // namespace

template <class Fn>
void ForwardPass::timed(ForwardProfile::Part part, Fn&& fn) {
  if (!profile_) {
    fn();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  fn();
  profile_->seconds[part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ForwardPass::AlignedBuffer::resize(size_t floats) {
  if (storage.size() >= floats + kAlignFloats) return;
  storage.assign(floats + kAlignFloats, 0.0f);
  data = align64(storage.data());
}

ForwardPass::ForwardPass(const Model& model, KvCache& kv, kernels::ThreadPool& pool,
                         int32_t max_batch_tokens, int32_t max_context,
                         LayerWeightSource* weights)
    : model_(model),
      cfg_(model.config()),
      mapped_weights_(model),
      weights_(weights ? weights : &mapped_weights_),
      kv_(kv),
      pool_(pool) {
  ensure_capacity(max_batch_tokens, std::min(max_batch_tokens, 64), max_context);
}

size_t ForwardPass::attention_scratch_stride() const {
  const size_t floats = kernels::attention_scratch_floats(kernels::kAttentionMaxTokens,
                                                          cfg_.n_heads / cfg_.n_kv_heads, context_capacity_);
  return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
}

void ForwardPass::ensure_capacity(int32_t n_tokens, int32_t n_logit_rows, int64_t max_ctx) {
  if (n_tokens > token_capacity_) {
    token_capacity_ = n_tokens;
    const size_t t = n_tokens;
    x_.resize(t * cfg_.n_embd);
    h_.resize(t * cfg_.n_embd);
    q_.resize(t * cfg_.q_dim());
    k_.resize(t * cfg_.kv_dim());
    v_.resize(t * cfg_.kv_dim());
    attn_.resize(t * cfg_.q_dim());
    gate_.resize(t * cfg_.n_ff);
    up_.resize(t * cfg_.n_ff);
  }
  if (n_logit_rows > logit_capacity_) {
    logit_capacity_ = n_logit_rows;
    final_rows_.resize(size_t(n_logit_rows) * cfg_.n_embd);
    logits_.resize(size_t(n_logit_rows) * cfg_.n_vocab);
  }
  if (max_ctx > context_capacity_) {
    context_capacity_ = max_ctx;
    attention_scratch_.resize(size_t(pool_.size()) * attention_scratch_stride());
  }
  const size_t max_tasks = size_t(n_tokens) * cfg_.n_kv_heads;
  if (attention_tasks_.capacity() < max_tasks) attention_tasks_.reserve(max_tasks);
  // Matmul scratch for the largest matmul of a step, of either token count.
  size_t need = 0;
  const int64_t m = std::max(token_capacity_, logit_capacity_);
  for (const LayerWeights& l : model_.layers()) {
    for (const kernels::WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      need = std::max(need, kernels::matmul_scratch_bytes(*w, m));
    }
  }
  need = std::max(need, kernels::matmul_scratch_bytes(model_.output(), m));
  if (need > matmul_scratch_bytes_) {
    matmul_scratch_bytes_ = need;
    matmul_scratch_storage_.assign(need + 64, 0);
    matmul_scratch_ = align64(matmul_scratch_storage_.data());
  }
}

void ForwardPass::matmul(const kernels::WeightMatrix& w, const float* x, int64_t m, float* y) {
  kernels::matmul(w, x, m, y, matmul_scratch_, pool_);
}

Result<std::span<const float>> ForwardPass::execute(const ForwardBatch& batch) {
  const auto n_tokens = static_cast<int32_t>(batch.tokens.size());
  const auto n_logits = static_cast<int32_t>(batch.logit_rows.size());
  if (n_tokens == 0) return std::span<const float>();

  int64_t max_ctx = 0;
  token_sequence_.resize(n_tokens);
  token_position_.resize(n_tokens);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const BatchSequence& seq = batch.sequences[s];
    assert(seq.first_token >= 0 && seq.first_token + seq.n_tokens <= n_tokens);
    assert(static_cast<int64_t>(seq.block_table.size()) * kv_.block_size() >=
           seq.start_position + seq.n_tokens);
    for (int32_t i = 0; i < seq.n_tokens; ++i) {
      token_sequence_[seq.first_token + i] = static_cast<int32_t>(s);
      token_position_[seq.first_token + i] = seq.start_position + i;
    }
    max_ctx = std::max(max_ctx, seq.start_position + seq.n_tokens);
  }
  ensure_capacity(n_tokens, n_logits, max_ctx);
  attention_tasks_.clear();
  attention_work_ = 0;
  for (const BatchSequence& seq : batch.sequences) {
    for (int32_t i = 0; i < seq.n_tokens; i += kernels::kAttentionMaxTokens) {
      const int32_t n = std::min(kernels::kAttentionMaxTokens, seq.n_tokens - i);
      for (int32_t h = 0; h < cfg_.n_kv_heads; ++h) attention_tasks_.push_back({seq.first_token + i, n, h});
    }
    attention_work_ += int64_t{seq.n_tokens} * (seq.start_position + seq.n_tokens) * cfg_.q_dim() * 2;
  }

  timed(ForwardProfile::Embed, [&] {
    const kernels::WeightMatrix& embd = weights_->token_embedding();
    const int64_t embd_row_bytes = kernels::row_bytes(embd.type, cfg_.n_embd);
    for (int32_t t = 0; t < n_tokens; ++t) {
      const int32_t id = batch.tokens[t];
      assert(id >= 0 && id < cfg_.n_vocab);
      kernels::dequantize_row(embd.type, static_cast<const uint8_t*>(embd.data) + id * embd_row_bytes,
                              x_.data + size_t(t) * cfg_.n_embd, cfg_.n_embd);
    }
  });

  for (int32_t l = 0; l < cfg_.n_layers; ++l) {
    Result<const LayerWeights*> layer = Error{""};
    timed(ForwardProfile::Weights, [&] { layer = weights_->acquire_layer(l); });
    if (!layer) return layer.error();
    run_layer(l, **layer, batch, n_tokens);
    weights_->release_layer(l);
  }

  if (n_logits == 0) return std::span<const float>();
  timed(ForwardProfile::Logits, [&] {
    for (int32_t r = 0; r < n_logits; ++r) {
      const int32_t t = batch.logit_rows[r];
      assert(t >= 0 && t < n_tokens);
      kernels::rms_norm(x_.data + size_t(t) * cfg_.n_embd, model_.output_norm(),
                        final_rows_.data + size_t(r) * cfg_.n_embd, cfg_.n_embd, cfg_.rms_eps);
    }
    matmul(weights_->output(), final_rows_.data, n_logits, logits_.data);
  });
  return std::span<const float>(logits_.data, size_t(n_logits) * cfg_.n_vocab);
}

void ForwardPass::run_layer(int32_t layer_index, const LayerWeights& w, const ForwardBatch& batch,
                            int32_t n_tokens) {
  using P = ForwardProfile;
  const int32_t d = cfg_.n_embd, q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim();
  const int32_t hd = cfg_.head_dim;

  // RMSNorm of each row fused into the activation pass of the matmul that reads it.
  struct NormRows {
    const float* x;
    const float* weight;
    float* out;
    int32_t d;
    float eps;
  };
  auto norm_row = [](void* ctx, int64_t t) {
    const auto* n = static_cast<const NormRows*>(ctx);
    kernels::rms_norm(n->x + t * n->d, n->weight, n->out + t * n->d, n->d, n->eps);
  };
  NormRows attn_norm{x_.data, w.attn_norm, h_.data, d, cfg_.rms_eps};
  timed(P::Qkv, [&] {
    const kernels::WeightMatrix* ws[] = {&w.wq, &w.wk, &w.wv};
    float* ys[] = {q_.data, k_.data, v_.data};
    kernels::matmul_multi(ws, h_.data, n_tokens, ys, matmul_scratch_, pool_, {norm_row, &attn_norm});
  });

  timed(P::RopeKv, [&] {
    parallel_for(pool_, n_tokens, q_dim + 2 * kv_dim, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        float* q = q_.data + t * q_dim;
        float* k = k_.data + t * kv_dim;
        float* v = v_.data + t * kv_dim;
        if (w.bq) kernels::add_inplace(q, w.bq, q_dim);
        if (w.bk) kernels::add_inplace(k, w.bk, kv_dim);
        if (w.bv) kernels::add_inplace(v, w.bv, kv_dim);
        if (w.q_norm) {
          for (int32_t h = 0; h < cfg_.n_heads; ++h) kernels::rms_norm(q + h * hd, w.q_norm, q + h * hd, hd, cfg_.rms_eps);
          for (int32_t h = 0; h < cfg_.n_kv_heads; ++h) kernels::rms_norm(k + h * hd, w.k_norm, k + h * hd, hd, cfg_.rms_eps);
        }
        const float* factors = cfg_.rope_freq_factors.empty() ? nullptr : cfg_.rope_freq_factors.data();
        const int64_t pos = token_position_[t];
        kernels::rope(q, cfg_.n_heads, hd, cfg_.rope_dim, pos, cfg_.rope_freq_base,
                      cfg_.rope_freq_scale, factors, cfg_.rope_style);
        kernels::rope(k, cfg_.n_kv_heads, hd, cfg_.rope_dim, pos, cfg_.rope_freq_base,
                      cfg_.rope_freq_scale, factors, cfg_.rope_style);
        const BatchSequence& seq = batch.sequences[token_sequence_[t]];
        kv_.write(layer_index, seq.block_table, pos, k, v);
      }
    });
  });

  timed(P::Attention, [&] { attention(layer_index, batch, n_tokens); });

  timed(P::Wo, [&] { matmul(w.wo, attn_.data, n_tokens, h_.data); });
  timed(P::Residual, [&] { kernels::add_inplace(x_.data, h_.data, int64_t(n_tokens) * d); });

  NormRows ffn_norm{x_.data, w.ffn_norm, h_.data, d, cfg_.rms_eps};
  timed(P::GateUp, [&] {
    const kernels::WeightMatrix* ws[] = {&w.w_gate, &w.w_up};
    float* ys[] = {gate_.data, up_.data};
    kernels::matmul_multi(ws, h_.data, n_tokens, ys, matmul_scratch_, pool_, {norm_row, &ffn_norm});
  });
  // SwiGLU of each row (into gate_) fused into the down projection's activation pass.
  struct SiluRows {
    float* gate;
    const float* up;
    int32_t n_ff;
  } silu{gate_.data, up_.data, cfg_.n_ff};
  auto silu_row = [](void* ctx, int64_t t) {
    const auto* s = static_cast<const SiluRows*>(ctx);
    float* g = s->gate + t * s->n_ff;
    kernels::silu_mul(g, s->up + t * s->n_ff, g, s->n_ff);
  };
  timed(P::Down, [&] {
    const kernels::WeightMatrix* ws[] = {&w.w_down};
    float* ys[] = {h_.data};
    kernels::matmul_multi(ws, gate_.data, n_tokens, ys, matmul_scratch_, pool_, {silu_row, &silu});
  });
  timed(P::Residual, [&] { kernels::add_inplace(x_.data, h_.data, int64_t(n_tokens) * d); });
}

void ForwardPass::attention(int32_t layer_index, const ForwardBatch& batch, int32_t n_tokens) {
  const int32_t hd = cfg_.head_dim;
  const int32_t group = cfg_.n_heads / cfg_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t scratch_stride = attention_scratch_stride();
  const auto n_tasks = static_cast<int64_t>(attention_tasks_.size());
  const size_t q_dim = cfg_.q_dim();
  std::atomic<int64_t> next{0};
  auto run = [&](int thread) {
    float* scratch = attention_scratch_.data + thread * scratch_stride;
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_tasks) return;
      const AttentionTask& task = attention_tasks_[i];
      const BatchSequence& seq = batch.sequences[token_sequence_[task.first_token]];
      const kernels::KvView k = kv_.k_view(layer_index, seq.block_table);
      const kernels::KvView v = kv_.v_view(layer_index, seq.block_table);
      const size_t offset = size_t(task.first_token) * q_dim + size_t(task.kv_head) * group * hd;
      kernels::attention(q_.data + offset, q_dim, task.n_tokens, group, hd, k, v, task.kv_head,
                         token_position_[task.first_token], scale, attn_.data + offset, q_dim, scratch);
    }
  };
  if (attention_work_ < kSerialElements * 4) {
    run(0);
  } else {
    pool_.run_on_all(run);
  }
}

}  // namespace spillway::engine
