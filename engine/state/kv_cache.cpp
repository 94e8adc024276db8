#include "engine/state/kv_cache.h"

#include <cassert>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace spillway::engine {

namespace {
int64_t element_bytes(kernels::DType type) {
  assert(type == kernels::DType::F16 || type == kernels::DType::F32);
  return type == kernels::DType::F16 ? 2 : 4;
}
}  // namespace

KvCache::KvCache(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
                 int32_t n_blocks, kernels::DType type)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      block_size_(block_size),
      n_blocks_(n_blocks),
      type_(type),
      elem_bytes_(element_bytes(type)),
      token_elems_(int64_t{n_kv_heads} * head_dim),
      layer_elems_(int64_t{n_blocks} * block_size * token_elems_) {
  const size_t total = static_cast<size_t>(layer_elems_ * n_layers_ * elem_bytes_);
  // Zeroed so that an unwritten row never holds NaN garbage (it is never read, but a
  // zeroed pool keeps sanitizer and debugging runs deterministic). calloc, not new[]():
  // a large calloc gets fresh zero pages from the kernel without touching them, so a
  // gigabyte of KV costs no start-up time (page faults, measured at ~8 s per GiB on a
  // busy VM) and no resident memory until used.
  k_.reset(static_cast<uint8_t*>(std::calloc(std::max<size_t>(total, 1), 1)));
  v_.reset(static_cast<uint8_t*>(std::calloc(std::max<size_t>(total, 1), 1)));
  if (!k_ || !v_) throw std::bad_alloc();
}

namespace {
// The kv geometry shared by the model's attention layers (zeros when it has none).
LayerSpec attention_geometry(const ModelConfig& config) {
  LayerSpec geometry;
  geometry.n_kv_heads = 0;
  geometry.head_dim = 0;
  for (const LayerSpec& s : config.layers) {
    if (s.mixer != MixerKind::Attention) continue;
    assert(geometry.n_kv_heads == 0 ||
           (geometry.n_kv_heads == s.n_kv_heads && geometry.head_dim == s.head_dim));
    geometry = s;
  }
  return geometry;
}
}  // namespace

KvCache::KvCache(const ModelConfig& config, int32_t block_size, int32_t n_blocks, kernels::DType type)
    : KvCache(config.n_attention_layers(), attention_geometry(config).n_kv_heads,
              attention_geometry(config).head_dim, block_size, n_blocks, type) {}

int64_t KvCache::bytes_per_token(const ModelConfig& config, kernels::DType type) {
  const LayerSpec g = attention_geometry(config);
  return bytes_per_token(config.n_attention_layers(), g.n_kv_heads, g.head_dim, type);
}

void KvCache::Free::operator()(uint8_t* p) const { std::free(p); }

int64_t KvCache::bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                 kernels::DType type) {
  return 2 * int64_t{n_layers} * n_kv_heads * head_dim * element_bytes(type);
}

void KvCache::write(int32_t layer, std::span<const int32_t> block_table, int64_t position,
                    const float* k, const float* v) {
  const int64_t block_index = position / block_size_;
  assert(block_index < static_cast<int64_t>(block_table.size()));
  const int32_t block = block_table[block_index];
  assert(block >= 0 && block < n_blocks_);
  const int64_t block_first = layer * layer_elems_ + int64_t{block} * block_size_ * token_elems_;
  const int64_t r = position % block_size_;
  // K: element (head h, dim d) of block row r at block start + (h * head_dim + d) * block_size
  // + r, i.e. index i = h * head_dim + d. V: head h's row at block start + (h * block_size +
  // r) * head_dim.
  const int64_t k_first = block_first + r;
  const int64_t head_elems = int64_t{block_size_} * head_dim_;
  if (type_ == kernels::DType::F32) {
    auto* v32 = reinterpret_cast<float*>(v_.get()) + block_first + r * head_dim_;
    for (int32_t h = 0; h < n_kv_heads_; ++h) std::memcpy(v32 + h * head_elems, v + h * head_dim_, head_dim_ * sizeof(float));
    auto* k32 = reinterpret_cast<float*>(k_.get()) + k_first;
    for (int64_t i = 0; i < token_elems_; ++i) k32[i * block_size_] = k[i];
    return;
  }
  auto* v16 = reinterpret_cast<uint16_t*>(v_.get()) + block_first + r * head_dim_;
  for (int32_t h = 0; h < n_kv_heads_; ++h) kernels::fp32_to_fp16_row(v + h * head_dim_, v16 + h * head_elems, head_dim_);
  auto* k16 = reinterpret_cast<uint16_t*>(k_.get()) + k_first;
  uint16_t converted[1024];
  for (int64_t i0 = 0; i0 < token_elems_; i0 += 1024) {
    const int64_t n = std::min<int64_t>(1024, token_elems_ - i0);
    kernels::fp32_to_fp16_row(k + i0, converted, n);
    for (int64_t i = 0; i < n; ++i) k16[(i0 + i) * block_size_] = converted[i];
  }
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  assert(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_);
  const int64_t block_bytes = int64_t{block_size_} * token_elems_ * elem_bytes_;
  for (int32_t layer = 0; layer < n_layers_; ++layer) {
    const int64_t base = layer * layer_elems_ * elem_bytes_;
    std::memcpy(k_.get() + base + dst * block_bytes, k_.get() + base + src * block_bytes, block_bytes);
    std::memcpy(v_.get() + base + dst * block_bytes, v_.get() + base + src * block_bytes, block_bytes);
  }
}

kernels::KvView KvCache::view(const uint8_t* base, int32_t layer,
                              std::span<const int32_t> block_table) const {
  kernels::KvView view;
  view.type = type_;
  view.data = base + layer * layer_elems_ * elem_bytes_;
  view.block_table = block_table.data();
  view.block_size = block_size_;
  view.block_stride = int64_t{block_size_} * token_elems_;
  return view;
}

kernels::KvView KvCache::k_view(int32_t layer, std::span<const int32_t> block_table) const {
  kernels::KvView k = view(k_.get(), layer, block_table);
  k.token_stride = 1;
  k.head_stride = int64_t{head_dim_} * block_size_;
  k.dim_stride = block_size_;
  return k;
}

kernels::KvView KvCache::v_view(int32_t layer, std::span<const int32_t> block_table) const {
  kernels::KvView v = view(v_.get(), layer, block_table);
  v.token_stride = head_dim_;
  v.head_stride = int64_t{block_size_} * head_dim_;
  v.dim_stride = 1;
  return v;
}

}  // namespace spillway::engine
