// The public kernel entry points: each forwards to the table of active_isa().
#include <cassert>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kernel_registry.h"
#include "kernels/kernel_table.h"

namespace spillway::kernels {

namespace {
const KernelTable& active_table() {
  static const KernelTable& table = kernels_for(active_isa());
  return table;
}
}  // namespace

const KernelTable& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return scalar_kernel_table();
    case Isa::Avx2: {
      const std::vector<Isa>& s = supported_isas();
      assert(s.size() > 1 && "kernels_for: AVX2 is not supported on this CPU");
      (void)s;
      return avx2_kernel_table();
    }
    case Isa::Avx512:
      assert(supported_isas().back() == Isa::Avx512 && "kernels_for: AVX-512 is not supported");
      return avx512_kernel_table();
  }
  return scalar_kernel_table();
}

DotKind dot_kind(DType t) {
  switch (t) {
    case DType::F32: return {DotFamily::Float, 0};
    case DType::F16: return {DotFamily::Float, 1};
    case DType::BF16: return {DotFamily::Float, 2};
    case DType::Q8_0: return {DotFamily::Tile, 0};
    case DType::Q4_0: return {DotFamily::Tile, 1};
    case DType::Q4_K: return {DotFamily::KQuant, 0};
    case DType::Q6_K: return {DotFamily::KQuant, 1};
    case DType::Q5_K: return {DotFamily::KQuant, 2};
    case DType::Q3_K: return {DotFamily::KQuant, 3};
    case DType::Q2_K: return {DotFamily::KQuant, 4};
    case DType::Q4_1: return {DotFamily::KQuant, 5};
    case DType::Q5_0: return {DotFamily::KQuant, 6};
    case DType::Q5_1: return {DotFamily::KQuant, 7};
  }
  assert(false && "dot_kind: unsupported type");
  return {DotFamily::Float, 0};
}

ActivationFormat activation_format(DType t) {
  switch (dot_kind(t).family) {
    case DotFamily::Tile: return ActivationFormat::Q8;
    case DotFamily::KQuant: return ActivationFormat::Q8_K;
    case DotFamily::Float: break;
  }
  return ActivationFormat::F32;
}

void rope_table(int rot_dim, int64_t pos, float freq_base, float freq_scale,
                const float* freq_factors, float* cos_sin) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(rot_dim));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < rot_dim / 2; ++i) {
    const float factor = freq_factors ? freq_factors[i] : 1.0f;
    const float angle = freq_scale * (theta / factor);
    cos_sin[2 * i] = std::cos(angle);
    cos_sin[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void matmul(const WeightMatrix& w, const float* x, int64_t m, float* y, void* scratch,
            ThreadPool& pool) {
  matmul(active_table(), w, x, m, y, scratch, pool);
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) { active_table().to_fp16(x, y, n); }

void matmul_multi(std::span<const WeightMatrix* const> ws, const float* x, int64_t m,
                  std::span<float* const> ys, void* scratch, ThreadPool& pool, RowPrologue prologue) {
  matmul_multi(active_table(), ws, x, m, ys, scratch, pool, prologue);
}

void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
  active_table().rms_norm(x, weight, y, n, eps);
}

void softmax(float* x, int64_t n) { active_table().softmax(x, n); }

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  active_table().silu_mul(gate, up, out, n);
}

void add_inplace(float* y, const float* x, int64_t n) { active_table().add_inplace(y, x, n); }

void conv_silu(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1, float* out) {
  active_table().conv_silu(taps, C, rows, K, c0, c1, out);
}

double exp_scaled_sum(const float* x, float shift, float scale, float* out, int64_t n) {
  return active_table().exp_scaled_sum(x, shift, scale, out, n);
}

void rope(float* x, int n_heads, int head_dim, int rot_dim, int64_t pos, float freq_base,
          float freq_scale, const float* freq_factors, RopeStyle style) {
  assert(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim && rot_dim <= kMaxRopeDim);
  float cos_sin[kMaxRopeDim];
  rope_table(rot_dim, pos, freq_base, freq_scale, freq_factors, cos_sin);
  active_table().rope(x, n_heads, head_dim, rot_dim, cos_sin, style);
}

size_t attention_scratch_floats(int n_tokens, int n_group, int64_t n_ctx) {
  return size_t(n_tokens) * size_t(n_group) * size_t((n_ctx + 15) / 16 * 16);
}

void attention(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim,
               const KvView& k, const KvView& v, int kv_head, const int64_t* key_counts, float scale,
               float* out, size_t out_stride, float* scratch) {
  assert(n_tokens >= 1 && n_tokens <= kAttentionMaxTokens);
  active_table().attention(q, q_stride, n_tokens, n_group, head_dim, k, v, kv_head, key_counts, scale, out,
                           out_stride, scratch);
}

void gated_delta_net(const GatedDeltaNetArgs& args) {
  assert(args.dk > 0 && args.dv > 0 && args.n_tokens >= 0);
  active_table().gated_delta_net(args);
}

float* gdn_thread_work(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats + 16) buffer.resize(floats + 16);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (64 - address % 64) % 64 / sizeof(float);
}

}  // namespace spillway::kernels
