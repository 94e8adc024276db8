// kernels::gated_delta_net: every ISA's kernel against an independent double-precision
// reference of the recurrence (within tolerance), against the scalar reference (the same
// bits: the contract fixes each column's arithmetic), and split into calls of any token
// count (the same bits as one call).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"

namespace spillway::kernels {
namespace {

using testing::random_floats;

struct Problem {
  int dk, dv, n;
  std::vector<float> q, k, v, g, beta, state;
};

void l2_normalise(float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  const float inv = 1.0f / std::max(float(std::sqrt(s)), 1e-6f);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

Problem make_problem(int dk, int dv, int n, uint32_t seed) {
  Problem p{dk, dv, n, random_floats(n * dk, seed), random_floats(n * dk, seed + 1),
            random_floats(n * dv, seed + 2), random_floats(n, seed + 3), random_floats(n, seed + 4),
            random_floats(dk * dv, seed + 5, 0.3f)};
  for (int t = 0; t < n; ++t) {
    l2_normalise(p.q.data() + t * dk, dk);
    l2_normalise(p.k.data() + t * dk, dk);
    p.g[t] = -std::abs(p.g[t]);                      // log-decay <= 0
    p.beta[t] = 1.0f / (1.0f + std::exp(-p.beta[t]));  // sigmoid
  }
  return p;
}

GatedDeltaNetArgs args_for(const Problem& p, const float* in, float* out_state, float* out, int t0, int n) {
  GatedDeltaNetArgs a;
  a.state_in = in;
  a.state_out = out_state;
  a.dk = p.dk;
  a.dv = p.dv;
  a.n_tokens = n;
  a.q = p.q.data() + t0 * p.dk;
  a.k = p.k.data() + t0 * p.dk;
  a.qk_stride = p.dk;
  a.v = p.v.data() + t0 * p.dv;
  a.v_stride = p.dv;
  a.g = p.g.data() + t0;
  a.beta = p.beta.data() + t0;
  a.gb_stride = 1;
  a.scale = 1.0f / std::sqrt(float(p.dk));
  a.out = out + t0 * p.dv;
  a.out_stride = p.dv;
  return a;
}

// The recurrence in double, written from the math (not the kernel's loop order).
void reference(const Problem& p, bool zero_start, std::vector<double>& state, std::vector<double>& out) {
  state.assign(p.state.begin(), p.state.end());
  if (zero_start) std::fill(state.begin(), state.end(), 0.0);
  out.assign(size_t(p.n) * p.dv, 0.0);
  for (int t = 0; t < p.n; ++t) {
    const double e = std::exp(double(p.g[t]));
    for (double& s : state) s *= e;
    for (int c = 0; c < p.dv; ++c) {
      double sk = 0;
      for (int i = 0; i < p.dk; ++i) sk += state[i * p.dv + c] * p.k[t * p.dk + i];
      const double d = p.beta[t] * (p.v[t * p.dv + c] - sk);
      for (int i = 0; i < p.dk; ++i) state[i * p.dv + c] += p.k[t * p.dk + i] * d;
      double o = 0;
      for (int i = 0; i < p.dk; ++i) o += state[i * p.dv + c] * p.q[t * p.dk + i];
      out[t * p.dv + c] = o / std::sqrt(double(p.dk));
    }
  }
}

TEST(GatedDeltaNet, EveryIsaMatchesDoubleReferenceAndScalarBits) {
  for (auto [dk, dv, n] : {std::tuple{64, 64, 1}, {64, 64, 37}, {128, 128, 9}, {32, 80, 5}, {16, 24, 3}}) {
    for (bool zero_start : {false, true}) {
      const Problem p = make_problem(dk, dv, n, 100 + dk + dv + n);
      std::vector<double> ref_state, ref_out;
      reference(p, zero_start, ref_state, ref_out);
      std::vector<float> scalar_state(dk * dv), scalar_out(n * dv);
      scalar_kernel_table().gated_delta_net(
          args_for(p, zero_start ? nullptr : p.state.data(), scalar_state.data(), scalar_out.data(), 0, n));
      for (Isa isa : supported_isas()) {
        SCOPED_TRACE(::testing::Message() << isa_name(isa) << " dk " << dk << " dv " << dv << " n " << n
                                          << (zero_start ? " zero start" : ""));
        std::vector<float> state(dk * dv, -7.0f), out(n * dv, -7.0f);
        kernels_for(isa).gated_delta_net(
            args_for(p, zero_start ? nullptr : p.state.data(), state.data(), out.data(), 0, n));
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], ref_out[i], 1e-4 * (1 + std::abs(ref_out[i]))) << "out " << i;
          ASSERT_EQ(out[i], scalar_out[i]) << "out " << i;
        }
        for (size_t i = 0; i < state.size(); ++i) {
          ASSERT_NEAR(state[i], ref_state[i], 1e-4 * (1 + std::abs(ref_state[i]))) << "state " << i;
          ASSERT_EQ(state[i], scalar_state[i]) << "state " << i;
        }
      }
    }
  }
}

TEST(GatedDeltaNet, SplittingTheTokensIntoCallsGivesTheSameBits) {
  const int dk = 64, dv = 64, n = 11;
  const Problem p = make_problem(dk, dv, n, 7);
  for (Isa isa : supported_isas()) {
    SCOPED_TRACE(isa_name(isa));
    std::vector<float> whole_state(dk * dv), whole_out(n * dv);
    kernels_for(isa).gated_delta_net(args_for(p, p.state.data(), whole_state.data(), whole_out.data(), 0, n));
    // 1 + 4 + 1 + 5 tokens, alternating between two state buffers, then in place (a decode
    // token, which has its own code path, and a chunk).
    std::vector<float> a(dk * dv), b(dk * dv), out(n * dv);
    kernels_for(isa).gated_delta_net(args_for(p, p.state.data(), a.data(), out.data(), 0, 1));
    kernels_for(isa).gated_delta_net(args_for(p, a.data(), b.data(), out.data(), 1, 4));
    kernels_for(isa).gated_delta_net(args_for(p, b.data(), b.data(), out.data(), 5, 1));
    kernels_for(isa).gated_delta_net(args_for(p, b.data(), b.data(), out.data(), 6, 5));
    EXPECT_EQ(out, whole_out);
    EXPECT_EQ(b, whole_state);
  }
}

}  // namespace
}  // namespace spillway::kernels
