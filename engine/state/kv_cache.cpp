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
      layer_elems_(int64_t{n_blocks} * block_size * n_kv_heads * head_dim) {
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
  const int64_t r = position % block_size_;
  // Head h's part of the block starts at head_start(layer, h, block); K element (dim d, row
  // r) is at + d * block_size + r, V's at + r * head_dim + d.
  if (type_ == kernels::DType::F32) {
    auto* k32 = reinterpret_cast<float*>(k_.get());
    auto* v32 = reinterpret_cast<float*>(v_.get());
    for (int32_t h = 0; h < n_kv_heads_; ++h) {
      const int64_t start = head_start(layer, h, block);
      std::memcpy(v32 + start + r * head_dim_, v + h * head_dim_, head_dim_ * sizeof(float));
      for (int32_t d = 0; d < head_dim_; ++d) k32[start + d * block_size_ + r] = k[h * head_dim_ + d];
    }
    return;
  }
  auto* k16 = reinterpret_cast<uint16_t*>(k_.get());
  auto* v16 = reinterpret_cast<uint16_t*>(v_.get());
  uint16_t converted[1024];
  for (int32_t h = 0; h < n_kv_heads_; ++h) {
    const int64_t start = head_start(layer, h, block);
    kernels::fp32_to_fp16_row(v + h * head_dim_, v16 + start + r * head_dim_, head_dim_);
    for (int32_t d0 = 0; d0 < head_dim_; d0 += 1024) {
      const int32_t n = std::min<int32_t>(1024, head_dim_ - d0);
      kernels::fp32_to_fp16_row(k + h * head_dim_ + d0, converted, n);
      for (int32_t d = 0; d < n; ++d) k16[start + (d0 + d) * block_size_ + r] = converted[d];
    }
  }
}

void KvCache::copy_block(int32_t src, int32_t dst) {
  assert(src >= 0 && src < n_blocks_ && dst >= 0 && dst < n_blocks_);
  const size_t head_block_bytes = size_t(head_block_elems()) * size_t(elem_bytes_);
  for (int32_t layer = 0; layer < n_layers_; ++layer) {
    for (int32_t h = 0; h < n_kv_heads_; ++h) {
      const size_t from = size_t(head_start(layer, h, src)) * size_t(elem_bytes_);
      const size_t to = size_t(head_start(layer, h, dst)) * size_t(elem_bytes_);
      std::memcpy(k_.get() + to, k_.get() + from, head_block_bytes);
      std::memcpy(v_.get() + to, v_.get() + from, head_block_bytes);
    }
  }
}

kernels::KvView KvCache::view(const uint8_t* base, int32_t layer,
                              std::span<const int32_t> block_table) const {
  kernels::KvView view;
  view.type = type_;
  view.data = base + layer * layer_elems_ * elem_bytes_;
  view.block_table = block_table.data();
  view.block_size = block_size_;
  view.block_stride = head_block_elems();
  view.head_stride = int64_t{n_blocks_} * head_block_elems();
  return view;
}

kernels::KvView KvCache::k_view(int32_t layer, std::span<const int32_t> block_table) const {
  kernels::KvView k = view(k_.get(), layer, block_table);
  k.token_stride = 1;
  k.dim_stride = block_size_;
  return k;
}

kernels::KvView KvCache::v_view(int32_t layer, std::span<const int32_t> block_table) const {
  kernels::KvView v = view(v_.get(), layer, block_table);
  v.token_stride = head_dim_;
  v.dim_stride = 1;
  return v;
}

}  // namespace spillway::engine
