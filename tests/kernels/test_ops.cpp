// Row operations, RoPE and paged attention on every ISA against naive double-precision
// references written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstring>
#include <random>

#include "kernel_test_util.h"

namespace spillway::kernels {
namespace {

using testing::random_floats;

constexpr int64_t kLengths[] = {1, 3, 8, 15, 16, 17, 31, 64, 100, 257, 2048};

TEST(RmsNorm, MatchesDoubleReference) {
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int64_t n : kLengths) {
      const std::vector<float> x = random_floats(n, uint32_t(n), 3.0f);
      const std::vector<float> w = random_floats(n, uint32_t(n + 1));
      for (bool with_weight : {true, false}) {
        std::vector<float> y(static_cast<size_t>(n));
        kt.rms_norm(x.data(), with_weight ? w.data() : nullptr, y.data(), n, 1e-5f);
        double ss = 0;
        for (float v : x) ss += double(v) * v;
        const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i) {
          const double expected = x[size_t(i)] * inv * (with_weight ? w[size_t(i)] : 1.0);
          ASSERT_NEAR(y[size_t(i)], expected, 2e-6 * std::fabs(expected) + 1e-7) << isa_name(isa) << " n=" << n;
        }
      }
      // In place.
      std::vector<float> inplace = x;
      kt.rms_norm(inplace.data(), w.data(), inplace.data(), n, 1e-6f);
      std::vector<float> separate(static_cast<size_t>(n));
      kt.rms_norm(x.data(), w.data(), separate.data(), n, 1e-6f);
      EXPECT_EQ(inplace, separate) << isa_name(isa);
    }
  }
}

TEST(Softmax, MatchesDoubleReference) {
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int64_t n : kLengths) {
      std::vector<float> x = random_floats(n, uint32_t(n + 5), 4.0f);
      if (n > 4) x[2] = 80.0f;  // large values must not overflow
      if (n > 6) x[5] = -1e30f;  // and tiny probabilities underflow cleanly
      const std::vector<float> in = x;
      kt.softmax(x.data(), n);
      const double max = *std::max_element(in.begin(), in.end());
      double sum = 0;
      for (float v : in) sum += std::exp(double(v) - max);
      for (int64_t i = 0; i < n; ++i) {
        const double expected = std::exp(double(in[size_t(i)]) - max) / sum;
        ASSERT_NEAR(x[size_t(i)], expected, 4e-6 * expected + 1e-12) << isa_name(isa) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(SiluMul, MatchesDoubleReference) {
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int64_t n : kLengths) {
      std::vector<float> g = random_floats(n, uint32_t(n + 9), 4.0f);
      if (n > 3) {
        g[0] = 100.0f;
        g[1] = -100.0f;
        g[2] = -88.0f;
      }
      const std::vector<float> u = random_floats(n, uint32_t(n + 10));
      std::vector<float> out(static_cast<size_t>(n));
      kt.silu_mul(g.data(), u.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double gv = g[size_t(i)];
        const double expected = gv / (1.0 + std::exp(-gv)) * u[size_t(i)];
        ASSERT_NEAR(out[size_t(i)], expected, 4e-6 * std::fabs(expected) + 1e-30) << isa_name(isa) << " n=" << n;
      }
      std::vector<float> alias = g;
      kt.silu_mul(alias.data(), u.data(), alias.data(), n);
      EXPECT_EQ(alias, out) << isa_name(isa);
    }
  }
}

TEST(ConvSilu, SumsInTapOrderThenTheTablesSilu) {
  // The sums: each product rounded to float (volatile: no fused multiply-add) and added in tap
  // order, the same bits on every ISA; the SiLU: the table's silu_mul with up = 1. Channel
  // ranges that start and end off a vector boundary, and an empty one; K = 1, 2, 4, 5.
  constexpr int64_t C = 53;
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int32_t K : {1, 2, 4, 5}) {
      const std::vector<float> taps = random_floats(K * C, uint32_t(K + 20), 2.0f);
      std::vector<std::vector<float>> window;
      for (int32_t k = 0; k < K; ++k) window.push_back(random_floats(C, uint32_t(100 * K + k), 3.0f));
      std::vector<const float*> rows;
      for (const auto& w : window) rows.push_back(w.data());
      for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, C}, {3, 40}, {17, 18}, {5, 5}}) {
        std::vector<float> sums(C, 0.0f), ones(C, 1.0f), expected(C, -7.0f), got(C, -7.0f);
        for (int64_t ch = c0; ch < c1; ++ch) {
          float acc = 0.0f;
          for (int32_t k = 0; k < K; ++k) {
            volatile float product = taps[size_t(k * C + ch)] * window[size_t(k)][size_t(ch)];
            acc += product;
          }
          sums[size_t(ch)] = acc;
        }
        kt.silu_mul(sums.data() + c0, ones.data() + c0, expected.data() + c0, c1 - c0);
        kt.conv_silu(taps.data(), C, rows.data(), K, c0, c1, got.data());
        EXPECT_EQ(got, expected) << isa_name(isa) << " K=" << K << " [" << c0 << ", " << c1 << ")";
      }
    }
  }
}

TEST(AddInplace, AddsExactly) {
  for (Isa isa : supported_isas()) {
    for (int64_t n : kLengths) {
      std::vector<float> y = random_floats(n, 1), x = random_floats(n, 2);
      std::vector<float> expected(static_cast<size_t>(n));
      for (size_t i = 0; i < expected.size(); ++i) expected[i] = y[i] + x[i];
      kernels_for(isa).add_inplace(y.data(), x.data(), n);
      EXPECT_EQ(y, expected) << isa_name(isa);
    }
  }
}

// ---- RoPE -----------------------------------------------------------------------------

std::vector<double> rope_reference(const std::vector<float>& x, int n_heads, int head_dim, int rot_dim,
                                   int64_t pos, double base, double freq_scale, const float* factors,
                                   RopeStyle style) {
  std::vector<double> y(x.begin(), x.end());
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < rot_dim / 2; ++i) {
      const double theta = pos * freq_scale * std::pow(base, -2.0 * i / rot_dim) / (factors ? factors[i] : 1.0);
      const int a = h * head_dim + (style == RopeStyle::Interleaved ? 2 * i : i);
      const int b = h * head_dim + (style == RopeStyle::Interleaved ? 2 * i + 1 : i + rot_dim / 2);
      const double x0 = x[size_t(a)], x1 = x[size_t(b)];
      y[size_t(a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
      y[size_t(b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
  return y;
}

TEST(Rope, MatchesDoubleReferenceBothStyles) {
  struct Case {
    int n_heads, head_dim, rot_dim;
    int64_t pos;
    float base, freq_scale;
    bool factors;
  };
  const Case cases[] = {{4, 64, 64, 0, 10000, 1, false},     {4, 64, 64, 1, 10000, 1, false},
                        {2, 128, 128, 37, 500000, 1, true},   {3, 64, 32, 100, 10000, 0.25f, false},
                        {1, 80, 80, 511, 10000, 1, true},     {5, 96, 48, 1000, 1e6f, 0.5f, true},
                        {2, 40, 24, 7, 10000, 1, false}};
  for (Isa isa : supported_isas()) {
    for (const Case& c : cases) {
      for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::HalfSplit}) {
        const std::vector<float> x = random_floats(int64_t(c.n_heads) * c.head_dim, uint32_t(c.pos + 3));
        std::vector<float> factors(size_t(c.rot_dim / 2));
        for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + float(i % 5);
        const float* ff = c.factors ? factors.data() : nullptr;
        float cos_sin[kMaxRopeDim];
        rope_table(c.rot_dim, c.pos, c.base, c.freq_scale, ff, cos_sin);
        std::vector<float> y = x;
        kernels_for(isa).rope(y.data(), c.n_heads, c.head_dim, c.rot_dim, cos_sin, style);
        const std::vector<double> ref =
            rope_reference(x, c.n_heads, c.head_dim, c.rot_dim, c.pos, c.base, c.freq_scale, ff, style);
        // The angle is computed in fp32 (as llama.cpp does): its error grows with pos.
        const double tol = 1e-5 + 1e-6 * double(c.pos);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], ref[i], tol) << isa_name(isa) << " case pos=" << c.pos << " i=" << i;
          const int d = int(i) % c.head_dim;
          if (d >= c.rot_dim) {
            ASSERT_EQ(y[i], x[i]);  // dims past rot_dim untouched
          }
        }
      }
    }
  }
}

TEST(Rope, PublicEntryPointRotates) {
  std::vector<float> x = {1, 0, 0, 1};
  rope(x.data(), 1, 4, 4, 1, 10000.0f, 1.0f, nullptr, RopeStyle::Interleaved);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.01), 1e-6);
}

// ---- attention ----------------------------------------------------------------------------

// A paged K and V cache of n_ctx random tokens in scattered blocks, stored row-major
// (token, head, dim) or, with `transposed`, as the engine keeps them inside each block:
// K (head, dim, token), V (head, token, dim); with `v_transposed` as well, V like K (dims
// block_size apart: the kernels' strided-V path, which the engine does not use).
struct PagedKv {
  DType type;
  int n_kv_heads, head_dim, block_size;
  bool transposed;
  std::vector<int32_t> table;
  std::vector<uint8_t> k, v;
  std::vector<float> k_values, v_values;  // [token][head][dim] as stored (after fp16 rounding)
  bool v_transposed = false;

  KvView view(const std::vector<uint8_t>& data) const {
    KvView kv;
    kv.type = type;
    kv.data = data.data();
    kv.block_table = table.data();
    kv.block_size = block_size;
    kv.block_stride = int64_t(n_kv_heads) * head_dim * block_size;
    if (transposed && &data == &v && !v_transposed) {
      kv.token_stride = head_dim;
      kv.head_stride = int64_t(head_dim) * block_size;
      kv.dim_stride = 1;
    } else if (transposed) {
      kv.token_stride = 1;
      kv.head_stride = int64_t(head_dim) * block_size;
      kv.dim_stride = block_size;
    } else {
      kv.token_stride = int64_t(n_kv_heads) * head_dim;
      kv.head_stride = head_dim;
      kv.dim_stride = 1;
    }
    return kv;
  }
};

PagedKv make_paged_kv(DType type, int n_kv_heads, int head_dim, int block_size, int64_t n_ctx, uint32_t seed,
                      bool transposed = false, bool v_transposed = false) {
  PagedKv kv{type, n_kv_heads, head_dim, block_size, transposed, {}, {}, {}, {}, {}, transposed && v_transposed};
  const int64_t n_blocks = (n_ctx + block_size - 1) / block_size;
  const int64_t pool_blocks = n_blocks + 3;
  kv.table.resize(size_t(n_blocks));
  std::vector<int32_t> order(static_cast<size_t>(pool_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t b = 0; b < n_blocks; ++b) kv.table[size_t(b)] = order[size_t(b)];
  const int64_t token_elems = int64_t(n_kv_heads) * head_dim;
  const size_t elem = type == DType::F16 ? 2 : 4;
  kv.k.assign(size_t(pool_blocks * block_size * token_elems) * elem, 0xFF);  // NaN garbage elsewhere
  kv.v.assign(kv.k.size(), 0xFF);
  const std::vector<float> kvals = random_floats(n_ctx * token_elems, seed + 1);
  const std::vector<float> vvals = random_floats(n_ctx * token_elems, seed + 2);
  kv.k_values.resize(kvals.size());
  kv.v_values.resize(vvals.size());
  const KvView k_layout = kv.view(kv.k), v_layout = kv.view(kv.v);
  auto at = [&](const KvView& l, int64_t t, int64_t h, int64_t d) {
    return size_t(kv.table[size_t(t / block_size)] * l.block_stride + (t % block_size) * l.token_stride +
                  h * l.head_stride + d * l.dim_stride);
  };
  for (int64_t t = 0; t < n_ctx; ++t) {
    for (int64_t e = 0; e < token_elems; ++e) {
      const int64_t h = e / head_dim, d = e % head_dim;
      const size_t src = size_t(t * token_elems + e);
      const size_t kd = at(k_layout, t, h, d), vd = at(v_layout, t, h, d);
      if (type == DType::F16) {
        const uint16_t kh = fp32_to_fp16(kvals[src]), vh = fp32_to_fp16(vvals[src]);
        std::memcpy(kv.k.data() + kd * 2, &kh, 2);
        std::memcpy(kv.v.data() + vd * 2, &vh, 2);
        kv.k_values[src] = fp16_to_fp32(kh);
        kv.v_values[src] = fp16_to_fp32(vh);
      } else {
        std::memcpy(kv.k.data() + kd * 4, &kvals[src], 4);
        std::memcpy(kv.v.data() + vd * 4, &vvals[src], 4);
        kv.k_values[src] = kvals[src];
        kv.v_values[src] = vvals[src];
      }
    }
  }
  return kv;
}

// Double-precision attention of a query head over context [0, n_ctx).
std::vector<double> reference_attention(const PagedKv& kv, const float* q, int head_dim, int kv_head, int64_t n_ctx,
                                        float scale) {
  const int n_kv_heads = kv.n_kv_heads;
  std::vector<double> s(static_cast<size_t>(n_ctx)), out(static_cast<size_t>(head_dim));
  for (int64_t t = 0; t < n_ctx; ++t) {
    double acc = 0;
    for (int d = 0; d < head_dim; ++d) acc += double(q[d]) * kv.k_values[size_t((t * n_kv_heads + kv_head) * head_dim + d)];
    s[size_t(t)] = acc * scale;
  }
  const double max = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& v : s) sum += (v = std::exp(v - max));
  for (int d = 0; d < head_dim; ++d) {
    double acc = 0;
    for (int64_t t = 0; t < n_ctx; ++t) {
      acc += s[size_t(t)] / sum * kv.v_values[size_t((t * n_kv_heads + kv_head) * head_dim + d)];
    }
    out[size_t(d)] = acc;
  }
  return out;
}

struct AttentionCase {
  int n_group, head_dim, block_size;
  int64_t n_ctx;  // context of the last token
};
constexpr AttentionCase kAttentionCases[] = {{1, 64, 16, 1},  {4, 64, 16, 5},   {2, 128, 16, 16}, {8, 64, 32, 100},
                                             {3, 80, 8, 33},  {1, 40, 4, 13},   {2, 256, 64, 300}, {8, 64, 16, 47},
                                             {7, 96, 16, 70}, {16, 64, 16, 21}, {2, 8, 4, 9}};

// Key counts per query row: causal (the last n_tokens positions of n_ctx), the whole
// context for every row (bidirectional), or counts in no particular order.
enum class KeyRanges { Causal, Whole, Scattered };
std::vector<int64_t> key_counts_for(KeyRanges ranges, int64_t n_ctx, int n_tokens) {
  std::vector<int64_t> counts(static_cast<size_t>(n_tokens));
  for (int j = 0; j < n_tokens; ++j) {
    switch (ranges) {
      case KeyRanges::Causal: counts[size_t(j)] = n_ctx - n_tokens + j + 1; break;
      case KeyRanges::Whole: counts[size_t(j)] = n_ctx; break;
      case KeyRanges::Scattered: counts[size_t(j)] = 1 + (int64_t(j) * 7 + n_ctx / 2) % n_ctx; break;
    }
  }
  return counts;
}

TEST(Attention, MatchesDoubleReferenceOverPagedCache) {
  const int n_kv_heads = 3, kv_head = 1;
  for (DType type : {DType::F16, DType::F32}) {
    for (int layout = 0; layout < 3; ++layout) {  // row-major, the engine's, K and V both transposed
      const bool transposed = layout >= 1, v_transposed = layout == 2;
      for (const AttentionCase& c : kAttentionCases) {
        const PagedKv kv = make_paged_kv(type, n_kv_heads, c.head_dim, c.block_size, c.n_ctx,
                                         uint32_t(c.n_ctx * 3 + c.head_dim), transposed, v_transposed);
        const float scale = 1.0f / std::sqrt(float(c.head_dim));
        for (int n_tokens = 1; n_tokens <= kAttentionMaxTokens && n_tokens <= c.n_ctx; ++n_tokens) {
         for (KeyRanges ranges : {KeyRanges::Causal, KeyRanges::Whole, KeyRanges::Scattered}) {
          // Causal: tokens at positions n_ctx - n_tokens .. n_ctx - 1; Whole: every query sees
          // all n_ctx keys (a canvas); Scattered: key counts in no order. Queries 2 tokens
          // apart in memory.
          const std::vector<int64_t> counts = key_counts_for(ranges, c.n_ctx, n_tokens);
          const size_t q_stride = size_t(c.n_group) * c.head_dim * 2;
          const std::vector<float> q = random_floats(int64_t(q_stride) * n_tokens, uint32_t(c.n_ctx + 77 + n_tokens));
          for (Isa isa : supported_isas()) {
            std::vector<float> out(q.size(), NAN);
            std::vector<float> scratch(attention_scratch_floats(n_tokens, c.n_group, c.n_ctx), NAN);
            kernels_for(isa).attention(q.data(), q_stride, n_tokens, c.n_group, c.head_dim, kv.view(kv.k),
                                       kv.view(kv.v), kv_head, counts.data(), scale, out.data(), q_stride,
                                       scratch.data());
            for (int j = 0; j < n_tokens; ++j) {
              for (int g = 0; g < c.n_group; ++g) {
                const size_t at = j * q_stride + size_t(g) * c.head_dim;
                const std::vector<double> expected =
                    reference_attention(kv, q.data() + at, c.head_dim, kv_head, counts[size_t(j)], scale);
                for (int d = 0; d < c.head_dim; ++d) {
                  ASSERT_NEAR(out[at + d], expected[size_t(d)], 2e-5)
                      << isa_name(isa) << " " << dtype_name(type) << (transposed ? " transposed" : "") << (v_transposed ? " v_transposed" : "")
                      << " n_ctx=" << c.n_ctx << " head_dim=" << c.head_dim << " tokens=" << n_tokens << " j=" << j
                      << " g=" << g << " d=" << d << " ranges=" << int(ranges);
                }
              }
            }
          }
         }
        }
      }
    }
  }
}

TEST(Attention, ATokensOutputDoesNotDependOnTheTokensComputedWithIt) {
  // Each (token, head) follows one fixed arithmetic order: computing 4 tokens at once gives
  // each token the bits it gets alone, on every ISA and for both K layouts.
  const int n_kv_heads = 2, kv_head = 1;
  for (bool transposed : {false, true}) {
    for (const AttentionCase& c : kAttentionCases) {
      if (c.n_ctx < kAttentionMaxTokens) continue;
      const PagedKv kv = make_paged_kv(DType::F16, n_kv_heads, c.head_dim, c.block_size, c.n_ctx, 5, transposed);
      const int n_tokens = kAttentionMaxTokens;
      const std::vector<int64_t> counts = key_counts_for(KeyRanges::Causal, c.n_ctx, n_tokens);
      const size_t q_stride = size_t(c.n_group) * c.head_dim;
      const std::vector<float> q = random_floats(int64_t(q_stride) * n_tokens, 9);
      for (Isa isa : supported_isas()) {
        const KernelTable& kt = kernels_for(isa);
        std::vector<float> together(q.size()), scratch(attention_scratch_floats(n_tokens, c.n_group, c.n_ctx));
        kt.attention(q.data(), q_stride, n_tokens, c.n_group, c.head_dim, kv.view(kv.k), kv.view(kv.v), kv_head,
                     counts.data(), 0.125f, together.data(), q_stride, scratch.data());
        for (int j = 0; j < n_tokens; ++j) {
          std::vector<float> alone(q_stride);
          kt.attention(q.data() + j * q_stride, q_stride, 1, c.n_group, c.head_dim, kv.view(kv.k), kv.view(kv.v),
                       kv_head, &counts[size_t(j)], 0.125f, alone.data(), q_stride, scratch.data());
          ASSERT_EQ(std::memcmp(alone.data(), together.data() + j * q_stride, q_stride * sizeof(float)), 0)
              << isa_name(isa) << (transposed ? " transposed" : "") << " n_ctx=" << c.n_ctx << " j=" << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace spillway::kernels
