// The MoE FFN (engine/forward/moe_ffn.h) against a plain double-precision reference written
// here from the formula (softmax router over all experts, top-k, optional renormalisation and
// scale, SwiGLU experts, sigmoid-gated shared expert), on F32 / F16 / Q8_0 expert weights
// built in memory; and its batching contract: a token's output is bit-identical alone and
// in a batch of tokens routed elsewhere. The GGUF side (binder, qwen3moe, residency) is in
// test_moe_model.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "engine/forward/moe_ffn.h"
#include "engine/residency/layer_weight_source.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {
namespace {

using kernels::DType;

constexpr int32_t kEmbd = 64, kExperts = 8, kUsed = 3, kFf = 64, kFfShared = 96;

// A matrix in `type`: its bytes, and the floats the engine reads back (the reference's
// weights, so quantization error is not the reference's error).
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // [rows, cols] dequantized
  int64_t rows = 0, cols = 0;
};

Matrix make_matrix(DType type, int64_t rows, int64_t cols, double stddev, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, static_cast<float>(stddev));
  Matrix m;
  m.rows = rows, m.cols = cols;
  const int64_t rb = kernels::row_bytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rb * rows));
  std::vector<float> row(cols), back(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    kernels::quantize_row(type, row.data(), m.bytes.data() + r * rb, cols);
    kernels::dequantize_row(type, m.bytes.data() + r * rb, back.data(), cols);
    m.values.insert(m.values.end(), back.begin(), back.end());
  }
  return m;
}

kernels::WeightMatrix view(DType type, const Matrix& m) {
  return kernels::WeightMatrix{type, m.bytes.data(), m.rows, m.cols};
}

std::vector<double> matvec(const Matrix& m, const std::vector<double>& x) {
  std::vector<double> y(m.rows, 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) y[r] += m.values[r * m.cols + c] * x[c];
  }
  return y;
}

double silu(double v) { return v / (1.0 + std::exp(-v)); }

// The activations a matmul with `type` weights reads: Q8_0 weights are multiplied with
// activations rounded to Q8_0 blocks (kernels/README.md), float weights with float32 ones.
std::vector<double> as_matmul_input(DType type, const std::vector<double>& x) {
  std::vector<float> f(x.begin(), x.end());
  if (type == DType::Q8_0) {
    std::vector<uint8_t> q(kernels::row_bytes(DType::Q8_0, f.size()));
    kernels::quantize_row(DType::Q8_0, f.data(), q.data(), f.size());
    kernels::dequantize_row(DType::Q8_0, q.data(), f.data(), f.size());
  }
  return std::vector<double>(f.begin(), f.end());
}

// The weights of one MoE layer and the spec that goes with them.
struct MoeLayer {
  DType type;
  LayerSpec spec;
  Matrix router;  // always F32, as in the files
  std::vector<Matrix> gate, up, down;
  Matrix shared_gate, shared_up, shared_down;
  std::vector<float> shared_gate_inp;
  std::vector<float> norm;
  BlockWeights block;  // views of the above

  MoeLayer(DType t, bool shared, bool gated, bool renormalize, float scale, uint32_t seed) : type(t) {
    std::mt19937 rng(seed);
    spec.ffn = FfnKind::Moe;
    spec.n_expert = kExperts;
    spec.n_expert_used = kUsed;
    spec.n_ff_expert = kFf;
    spec.n_ff_shared = shared ? kFfShared : 0;
    spec.moe_renormalize = renormalize;
    spec.expert_weights_scale = scale;
    router = make_matrix(DType::F32, kExperts, kEmbd, 0.4, rng);
    for (int e = 0; e < kExperts; ++e) {
      gate.push_back(make_matrix(t, kFf, kEmbd, 0.15, rng));
      up.push_back(make_matrix(t, kFf, kEmbd, 0.15, rng));
      down.push_back(make_matrix(t, kEmbd, kFf, 0.15, rng));
    }
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (int i = 0; i < kEmbd; ++i) norm.push_back(1.0f + 0.2f * dist(rng));
    MoeFfnWeights w;
    w.router = view(DType::F32, router);
    for (int e = 0; e < kExperts; ++e) w.experts.push_back({view(t, gate[e]), view(t, up[e]), view(t, down[e])});
    if (shared) {
      shared_gate = make_matrix(t, kFfShared, kEmbd, 0.15, rng);
      shared_up = make_matrix(t, kFfShared, kEmbd, 0.15, rng);
      shared_down = make_matrix(t, kEmbd, kFfShared, 0.15, rng);
      w.shared_gate = view(t, shared_gate);
      w.shared_up = view(t, shared_up);
      w.shared_down = view(t, shared_down);
      if (gated) {
        for (int i = 0; i < kEmbd; ++i) shared_gate_inp.push_back(0.3f * dist(rng));
        w.shared_gate_inp = shared_gate_inp.data();
      }
    }
    block.ffn_norm = norm.data();
    block.ffn = std::move(w);
  }
  const MoeFfnWeights& weights() const { return std::get<MoeFfnWeights>(block.ffn); }
};

// Serves the layer's experts as the model mapping does, and records what was asked.
class FakeSource final : public LayerWeightSource {
 public:
  explicit FakeSource(const BlockWeights& block) : block_(block) {}
  Result<const BlockWeights*> acquire_layer(int32_t) override { return &block_; }
  Result<std::vector<const ExpertWeights*>> acquire_experts(int32_t layer, std::span<const int32_t> ids) override {
    requested.assign(ids.begin(), ids.end());
    return experts_of_block(block_, layer, ids);
  }
  void release_layer(int32_t) override {}
  const kernels::WeightMatrix& token_embedding() const override { return dummy_; }
  const kernels::WeightMatrix& output() const override { return dummy_; }

  std::vector<int32_t> requested;

 private:
  const BlockWeights& block_;
  kernels::WeightMatrix dummy_;
};

struct Reference {
  std::vector<double> out;       // [n_embd]
  std::vector<int32_t> experts;  // the top-k, descending
  double kth_gap = 0;            // p(k-th) - p(k+1-th): routing near-tie when tiny
};

Reference reference_moe(const MoeLayer& L, const float* x, double eps, int32_t k) {
  std::vector<double> h(x, x + kEmbd);
  double ss = 0;
  for (double v : h) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / kEmbd + eps);
  for (int i = 0; i < kEmbd; ++i) h[i] *= scale * L.norm[i];

  std::vector<double> p = matvec(L.router, h);
  const double mx = *std::max_element(p.begin(), p.end());
  double z = 0;
  for (double& v : p) z += (v = std::exp(v - mx));
  for (double& v : p) v /= z;
  std::vector<int32_t> order(kExperts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  Reference ref;
  ref.experts.assign(order.begin(), order.begin() + k);
  ref.kth_gap = p[order[k - 1]] - p[order[k]];
  double sum = 0;
  for (int32_t e : ref.experts) sum += p[e];
  ref.out.assign(kEmbd, 0.0);
  const std::vector<double> hq = as_matmul_input(L.type, h);
  for (int32_t e : ref.experts) {
    double w = L.spec.moe_renormalize ? p[e] / std::max(sum, 6.103515625e-5) : p[e];
    w *= L.spec.expert_weights_scale;
    const std::vector<double> g = matvec(L.gate[e], hq), u = matvec(L.up[e], hq);
    std::vector<double> a(kFf);
    for (int i = 0; i < kFf; ++i) a[i] = silu(g[i]) * u[i];
    const std::vector<double> y = matvec(L.down[e], as_matmul_input(L.type, a));
    for (int i = 0; i < kEmbd; ++i) ref.out[i] += w * y[i];
  }
  if (L.spec.n_ff_shared > 0) {
    const std::vector<double> g = matvec(L.shared_gate, hq), u = matvec(L.shared_up, hq);
    std::vector<double> a(kFfShared);
    for (int i = 0; i < kFfShared; ++i) a[i] = silu(g[i]) * u[i];
    const std::vector<double> y = matvec(L.shared_down, as_matmul_input(L.type, a));
    double gate = 1.0;
    if (!L.shared_gate_inp.empty()) {
      double dot = 0;
      for (int i = 0; i < kEmbd; ++i) dot += L.shared_gate_inp[i] * h[i];
      gate = 1.0 / (1.0 + std::exp(-dot));
    }
    for (int i = 0; i < kEmbd; ++i) ref.out[i] += gate * y[i];
  }
  return ref;
}

// Runs the MoE FFN over tokens [n, n_embd] and returns out [n, n_embd].
struct Runner {
  ModelConfig cfg;
  kernels::ThreadPool pool;
  std::unique_ptr<MoeFfn> ffn;
  std::vector<uint8_t> scratch;

  Runner(const MoeLayer& L, int32_t max_tokens, int threads = 2) : pool(threads) {
    cfg.n_embd = kEmbd;
    cfg.n_layers = 1;
    cfg.rms_eps = 1e-6f;
    cfg.layers = {L.spec};
    ffn = std::make_unique<MoeFfn>(cfg);
    ffn->ensure_capacity(max_tokens);
    size_t need = 0;
    const_cast<BlockWeights&>(L.block).for_each_matrix(
        [&](kernels::WeightMatrix& m) { need = std::max(need, kernels::matmul_scratch_bytes(m, max_tokens)); });
    scratch.assign(need + 64, 0);
  }

  std::vector<float> run(const MoeLayer& L, const std::vector<float>& x, FakeSource& source) {
    const auto n = static_cast<int32_t>(x.size() / kEmbd);
    ForwardBatch batch;
    void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    const StepContext ctx{.batch = batch, .n_tokens = n, .pool = pool, .matmul_scratch = aligned};
    std::vector<float> out(x.size(), std::nanf(""));
    const Status s = ffn->run(ctx, L.spec, L.weights(), L.norm.data(), x.data(), out.data(), source, 0);
    EXPECT_TRUE(s.ok()) << s.error().message;
    return out;
  }
};

std::vector<float> random_tokens(int32_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n) * kEmbd);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(MoeRoute, TopKDescendingTiesToTheLowerIdThenRenormalisedAndScaled) {
  // Experts 1 and 4 tie for the top, 2 and 6 tie for third.
  const float logits[8] = {0.0f, 2.0f, 1.0f, -1.0f, 2.0f, 0.5f, 1.0f, -3.0f};
  float probs[8], w[3];
  int32_t ids[3];
  moe_route(logits, 8, 3, true, 1.0f, probs, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 4);
  EXPECT_EQ(ids[2], 2);
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  EXPECT_NEAR(probs[1], std::exp(2.0) / z, 1e-7);
  const double top = 2 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(w[0], std::exp(2.0) / top, 1e-6);
  EXPECT_NEAR(w[2], std::exp(1.0) / top, 1e-6);
  EXPECT_NEAR(double(w[0]) + w[1] + w[2], 1.0, 1e-6);

  moe_route(logits, 8, 3, false, 2.5f, probs, ids, w);
  EXPECT_FLOAT_EQ(w[0], probs[1] * 2.5f);
  EXPECT_FLOAT_EQ(w[2], probs[2] * 2.5f);
  // k = n: every expert, most probable first.
  int32_t all[8];
  float wall[8];
  moe_route(logits, 8, 8, true, 1.0f, probs, all, wall);
  EXPECT_EQ(std::vector<int32_t>(all, all + 8), (std::vector<int32_t>{1, 4, 2, 6, 5, 0, 3, 7}));
}

struct Variant {
  bool shared, gated, renormalize;
  float scale;
};

class MoeFfnReferenceTest : public ::testing::TestWithParam<DType> {};

TEST_P(MoeFfnReferenceTest, MatchesTheDoubleReference) {
  const DType type = GetParam();
  // The reference rounds the activations of Q8_0 matmuls as the engine does, so only
  // float32 accumulation differs (measured ~3e-7 of the output's scale), plus for Q8_0 a
  // value that may land on the other side of a rounding boundary after float32 vs double
  // (one step of one element: < 1e-4 of the output). A wrong expert, weight or slot moves
  // outputs by tens of percent; a weight off by 0.1% already fails.
  const double tol = type == DType::Q8_0 ? 1e-4 : 1e-5;
  const Variant variants[] = {
      {false, false, true, 1.0f},  // qwen3moe
      {true, true, true, 1.0f},    // qwen35moe / qwen3next
      {false, false, false, 1.0f}, // llada-moe
      {true, false, false, 2.5f},  // ungated shared expert, scaled weights
  };
  uint32_t seed = 11;
  for (const Variant& v : variants) {
    const MoeLayer L(type, v.shared, v.gated, v.renormalize, v.scale, seed++);
    const int32_t n = 9;
    const std::vector<float> x = random_tokens(n, seed++);
    Runner runner(L, n);
    FakeSource source(L.block);
    const std::vector<float> out = runner.run(L, x, source);
    const std::span<const int32_t> routing = runner.ffn->last_routing();
    ASSERT_EQ(routing.size(), size_t(n) * kUsed);

    std::set<int32_t> used;
    double max_ref = 0, max_err = 0;
    for (int32_t t = 0; t < n; ++t) {
      const Reference ref = reference_moe(L, x.data() + size_t(t) * kEmbd, runner.cfg.rms_eps, kUsed);
      ASSERT_GT(ref.kth_gap, 1e-4) << "routing near-tie: pick another seed";
      EXPECT_EQ(std::vector<int32_t>(routing.begin() + t * kUsed, routing.begin() + (t + 1) * kUsed), ref.experts)
          << "token " << t;
      used.insert(ref.experts.begin(), ref.experts.end());
      for (int i = 0; i < kEmbd; ++i) {
        max_ref = std::max(max_ref, std::abs(ref.out[i]));
        max_err = std::max(max_err, std::abs(ref.out[i] - out[size_t(t) * kEmbd + i]));
      }
    }
    EXPECT_LE(max_err, tol * max_ref) << kernels::dtype_name(type) << " shared " << v.shared << " gated " << v.gated
                                      << " renorm " << v.renormalize << " scale " << v.scale;
    EXPECT_GT(max_ref, 0.05);
    // The experts acquired: exactly the step's union, ascending.
    EXPECT_EQ(source.requested, std::vector<int32_t>(used.begin(), used.end()));
  }
}

TEST_P(MoeFfnReferenceTest, ExpertsUsedOverrideRoutesToTheTopKOfTheSameRouter) {
  const DType type = GetParam();
  const MoeLayer L(type, true, true, true, 1.0f, 77);
  const int32_t n = 5;
  const std::vector<float> x = random_tokens(n, 78);
  Runner runner(L, n);
  FakeSource source(L.block);
  runner.ffn->set_experts_used_override(1);
  const std::vector<float> out = runner.run(L, x, source);
  ASSERT_EQ(runner.ffn->last_experts_used(), 1);
  const double tol = type == DType::Q8_0 ? 1e-4 : 1e-5;
  for (int32_t t = 0; t < n; ++t) {
    const Reference ref = reference_moe(L, x.data() + size_t(t) * kEmbd, runner.cfg.rms_eps, 1);
    EXPECT_EQ(runner.ffn->last_routing()[t], ref.experts[0]);
    double max_ref = 0, max_err = 0;
    for (int i = 0; i < kEmbd; ++i) {
      max_ref = std::max(max_ref, std::abs(ref.out[i]));
      max_err = std::max(max_err, std::abs(ref.out[i] - out[size_t(t) * kEmbd + i]));
    }
    EXPECT_LE(max_err, tol * max_ref) << "token " << t;
  }
}

// A token's output does not depend on what it is batched with: alone, and at position 3 of
// 8 tokens that route elsewhere, on 1 or 2 threads, its row is the same bits.
TEST_P(MoeFfnReferenceTest, ATokenAloneAndInABatchIsBitIdentical) {
  const DType type = GetParam();
  const MoeLayer L(type, true, true, true, 1.0f, 5);
  const std::vector<float> batch_x = random_tokens(8, 6);
  const std::vector<float> alone_x(batch_x.begin() + 3 * kEmbd, batch_x.begin() + 4 * kEmbd);
  Runner runner(L, 8);
  FakeSource source(L.block);
  const std::vector<float> alone = runner.run(L, alone_x, source);
  const std::set<int32_t> alone_experts(source.requested.begin(), source.requested.end());
  const std::vector<float> batched = runner.run(L, batch_x, source);
  ASSERT_GT(source.requested.size(), alone_experts.size()) << "the other tokens should route elsewhere too";
  EXPECT_EQ(std::memcmp(alone.data(), batched.data() + 3 * kEmbd, sizeof(float) * kEmbd), 0);

  Runner one_thread(L, 8, 1);
  const std::vector<float> serial = one_thread.run(L, batch_x, source);
  EXPECT_EQ(std::memcmp(serial.data(), batched.data(), sizeof(float) * batched.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(Types, MoeFfnReferenceTest, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const auto& info) { return std::string(kernels::dtype_name(info.param)); });

}  // namespace
}  // namespace spillway::engine
