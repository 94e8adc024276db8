// The sampler's row scans (kernels/ops/sample_scan.h): the scalar reference against the contract
// written out here (a plain scan, the 16-lane double order), and every ISA against the scalar
// reference bit for bit (the sampler's seeded draws must not depend on the ISA), on rows with
// ties, -inf, NaN, +inf and every tail length.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/exp_sum.h"
#include "kernels/ops/sample_scan.h"

namespace spillway::kernels {
namespace {

using testing::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kLengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257, 4000, 151936};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// kind 0: normal; 1: coarse (multiples of 0.5, many ties) with -inf; 2: all -inf; 3: a NaN,
// a +inf and -0.0 / +0.0 ties as the maximum.
std::vector<float> scan_row(int64_t n, uint32_t seed, int kind) {
  std::vector<float> x = random_floats(n, seed, 3.0f);
  std::mt19937 g(seed);
  for (int64_t i = 0; i < n; ++i) {
    if (kind == 1) {
      x[size_t(i)] = std::round(x[size_t(i)] * 2.0f) / 2.0f;
      if (g() % 10 == 0) x[size_t(i)] = -kInf;
    }
    if (kind == 2) x[size_t(i)] = -kInf;
  }
  if (kind == 3 && n > 4) {
    for (float& v : x) v = -std::fabs(v) - 1.0f;
    x[size_t(n / 2)] = 0.0f;
    x[size_t(n / 3)] = -0.0f;  // ties with +0.0; the lower index wins
    x[size_t(n - 1)] = std::numeric_limits<float>::quiet_NaN();
    x[1] = -kInf;
  }
  return x;
}

TEST(RowRange, ScalarReferenceIsAPlainScan) {
  const KernelTable& kt = kernels_for(Isa::Scalar);
  for (int64_t n : kLengths) {
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<float> x = scan_row(n, uint32_t(n * 4 + kind), kind);
      const RowRange r = kt.row_range(x.data(), n);
      float mx = -kInf, mn = kInf;
      int64_t finite = 0;
      for (float v : x) {
        if (!std::isnan(v)) mx = std::max(mx, v);
        if (v != -kInf) ++finite;
        if (v != -kInf && !std::isnan(v)) mn = std::min(mn, v);
      }
      int64_t arg = 0;
      if (mx != -kInf) {
        while (!(x[size_t(arg)] == mx)) ++arg;
      }
      EXPECT_EQ(r.max, mx) << "n=" << n << " kind=" << kind;
      EXPECT_EQ(r.argmax, arg) << "n=" << n << " kind=" << kind;
      EXPECT_EQ(r.min, mn) << "n=" << n << " kind=" << kind;
      EXPECT_EQ(r.n_finite, finite) << "n=" << n << " kind=" << kind;
      if (n > 0 && mx != -kInf) {
        EXPECT_EQ(std::memcmp(&r.max, &x[size_t(arg)], 4), 0);
      }
    }
  }
}

TEST(RowRange, EveryIsaGivesTheScalarResult) {
  const KernelTable& ref = kernels_for(Isa::Scalar);
  for (Isa isa : supported_isas()) {
    const KernelTable& kt = kernels_for(isa);
    for (int64_t n : kLengths) {
      for (int kind = 0; kind < 4; ++kind) {
        const std::vector<float> x = scan_row(n, uint32_t(n * 4 + kind + 1), kind);
        const RowRange want = ref.row_range(x.data(), n), got = kt.row_range(x.data(), n);
        EXPECT_EQ(std::memcmp(&got.max, &want.max, 4), 0) << isa_name(isa) << " n=" << n << " kind=" << kind;
        EXPECT_EQ(got.argmax, want.argmax) << isa_name(isa) << " n=" << n << " kind=" << kind;
        EXPECT_EQ(std::memcmp(&got.min, &want.min, 4), 0) << isa_name(isa) << " n=" << n << " kind=" << kind;
        EXPECT_EQ(got.n_finite, want.n_finite) << isa_name(isa) << " n=" << n << " kind=" << kind;
      }
      // The maximum in the last lane of a full vector, in the tail, and tied across lanes.
      for (int64_t at : {n - 1, n / 2, int64_t{0}}) {
        if (at < 0 || at >= n) continue;
        std::vector<float> x = random_floats(n, uint32_t(n), 1.0f);
        x[size_t(at)] = 50.0f;
        if (n > 20) x[size_t(n - 3)] = 50.0f;
        const RowRange want = ref.row_range(x.data(), n), got = kt.row_range(x.data(), n);
        EXPECT_EQ(got.argmax, want.argmax) << isa_name(isa) << " n=" << n << " at=" << at;
        EXPECT_EQ(got.max, want.max) << isa_name(isa) << " n=" << n;
      }
    }
  }
}

// Band lower bounds over a row: spaced over its range, the last -FLT_MAX.
std::vector<float> lowers_for(const std::vector<float>& x) {
  float mx = -kInf, mn = kInf;
  for (float v : x) {
    if (std::isfinite(v)) mx = std::max(mx, v), mn = std::min(mn, v);
  }
  if (!std::isfinite(mx)) mx = mn = 0.0f;
  std::vector<float> lower(kMassBands);
  for (int j = 0; j < kMassBands; ++j) lower[size_t(j)] = mx - (mx - mn) * float(j + 1) / kMassBands * 0.7f;
  lower[2] = lower[1];  // an empty band
  lower[kMassBands - 1] = -FLT_MAX;
  return lower;
}

// The contract written out: p = float(e * inv_sum); bands 0..band (band < 0: every id); 16
// lanes; the fixed tree.
double contract_mass(const std::vector<float>& x, const std::vector<float>& e, double inv_sum,
                     const std::vector<float>& lower, int band) {
  double a[16] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    const double p = static_cast<float>(static_cast<double>(e[i]) * inv_sum);
    const bool in = band < 0 || (x[i] >= lower[size_t(band)] && x[i] < kInf);
    if (in) a[i % 16] += p;
  }
  double s8[8], s4[4], s2[2];
  for (int l = 0; l < 8; ++l) s8[l] = a[l] + a[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
  return s2[0] + s2[1];
}

TEST(BandMasses, ScalarReferenceFollowsTheContractAndEveryIsaGivesItsBits) {
  const KernelTable& ref = kernels_for(Isa::Scalar);
  for (int64_t n : kLengths) {
    for (int kind = 0; kind < 2; ++kind) {
      const std::vector<float> x = scan_row(n, uint32_t(n + 11 + kind), kind);
      const RowRange range = ref.row_range(x.data(), n);
      const float mx = range.max == -kInf ? 0.0f : range.max;
      std::vector<float> e(static_cast<size_t>(n));
      const double sum = ref.exp_scaled_sum(x.data(), mx, 1.3f, e.data(), n);
      const double inv_sum = sum > 0.0 ? 1.0 / sum : 1.0;
      const std::vector<float> lower = lowers_for(x);
      double want[kMassBands];
      std::vector<float> want_p(static_cast<size_t>(n), -1.0f);
      const double want_total = ref.band_masses(x.data(), e.data(), n, inv_sum, lower.data(), want, want_p.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(want_p[size_t(i)], static_cast<float>(static_cast<double>(e[size_t(i)]) * inv_sum)) << "n=" << n;
      }
      EXPECT_TRUE(same_bits(want_total, contract_mass(x, e, inv_sum, lower, -1))) << "n=" << n;
      for (int j = 0; j < kMassBands; ++j) {
        EXPECT_TRUE(same_bits(want[j], contract_mass(x, e, inv_sum, lower, j))) << "n=" << n << " band " << j;
        if (j > 0) {
          EXPECT_GE(want[j], want[j - 1]) << "n=" << n;
        }
      }
      // The last band reaches -FLT_MAX: every finite id, the whole mass (-inf ids have p = 0).
      EXPECT_NEAR(want[kMassBands - 1], want_total, 1e-12) << "n=" << n;
      if (n > 100) {
        EXPECT_NEAR(want_total, 1.0, 1e-5) << "n=" << n;
      }
      for (Isa isa : supported_isas()) {
        // Without p, with p, and with p over the exps in place.
        for (int mode = 0; mode < 3; ++mode) {
          double got[kMassBands];
          std::vector<float> got_p(static_cast<size_t>(n), -1.0f), inplace = e;
          float* p_out = mode == 0 ? nullptr : mode == 1 ? got_p.data() : inplace.data();
          const float* e_in = mode == 2 ? inplace.data() : e.data();
          const double got_total = kernels_for(isa).band_masses(x.data(), e_in, n, inv_sum, lower.data(), got, p_out);
          EXPECT_TRUE(same_bits(got_total, want_total)) << isa_name(isa) << " n=" << n << ": " << got_total
                                                        << " vs " << want_total << " mode " << mode;
          for (int j = 0; j < kMassBands; ++j) {
            EXPECT_TRUE(same_bits(got[j], want[j])) << isa_name(isa) << " n=" << n << " band " << j;
          }
          if (mode == 0) continue;
          const std::vector<float>& p = mode == 1 ? got_p : inplace;
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(std::memcmp(&p[size_t(i)], &want_p[size_t(i)], 4), 0) << isa_name(isa) << " n=" << n << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(BandPack, EveryIsaPacksTheBandInOrderAlsoInPlace) {
  for (int64_t n : kLengths) {
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<float> x = scan_row(n, uint32_t(n + 5 * kind), kind);
      const std::vector<float> p = random_floats(n, uint32_t(n + 1), 1.0f);
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(1000 + 3 * i);
      const std::vector<float> lower = lowers_for(x);
      for (auto [lo, hi] : {std::pair{lower[0], kInf}, std::pair{lower[2], lower[0]},
                            std::pair{lower[kMassBands - 1], lower[kMassBands - 2]},
                            std::pair{-FLT_MAX, kInf}}) {
        for (bool given_ids : {false, true}) {
          std::vector<float> want_x, want_p;
          std::vector<int32_t> want_id;
          for (int64_t i = 0; i < n; ++i) {
            if (x[size_t(i)] >= lo && x[size_t(i)] < hi) {
              want_x.push_back(x[size_t(i)]);
              want_p.push_back(p[size_t(i)]);
              want_id.push_back(given_ids ? ids[size_t(i)] : int32_t(i));
            }
          }
          const int32_t* in_ids = given_ids ? ids.data() : nullptr;
          for (Isa isa : supported_isas()) {
            const KernelTable& kt = kernels_for(isa);
            // Into fresh outputs with guard entries past n (nothing may be written there).
            std::vector<float> ox(size_t(n) + 16, -7.0f), op(size_t(n) + 16, -7.0f);
            std::vector<int32_t> oi(size_t(n) + 16, -7);
            const int64_t c = kt.band_pack(x.data(), p.data(), in_ids, n, lo, hi, ox.data(), op.data(), oi.data());
            ASSERT_EQ(c, int64_t(want_x.size())) << isa_name(isa) << " n=" << n << " kind=" << kind;
            EXPECT_TRUE(std::equal(want_x.begin(), want_x.end(), ox.begin())) << isa_name(isa) << " n=" << n;
            EXPECT_TRUE(std::equal(want_p.begin(), want_p.end(), op.begin())) << isa_name(isa) << " n=" << n;
            EXPECT_TRUE(std::equal(want_id.begin(), want_id.end(), oi.begin())) << isa_name(isa) << " n=" << n;
            for (size_t i = size_t(n); i < ox.size(); ++i) {
              ASSERT_EQ(ox[i], -7.0f) << isa_name(isa) << " n=" << n;
              ASSERT_EQ(op[i], -7.0f) << isa_name(isa) << " n=" << n;
              ASSERT_EQ(oi[i], -7) << isa_name(isa) << " n=" << n;
            }
            // In place: the outputs are the inputs.
            std::vector<float> ix = x, ip = p;
            std::vector<int32_t> ii = ids;
            const int64_t c2 = kt.band_pack(ix.data(), ip.data(), given_ids ? ii.data() : nullptr, n, lo, hi,
                                            ix.data(), ip.data(), ii.data());
            ASSERT_EQ(c2, c) << isa_name(isa) << " in place, n=" << n;
            EXPECT_TRUE(std::equal(want_x.begin(), want_x.end(), ix.begin())) << isa_name(isa) << " in place";
            EXPECT_TRUE(std::equal(want_p.begin(), want_p.end(), ip.begin())) << isa_name(isa) << " in place";
            EXPECT_TRUE(std::equal(want_id.begin(), want_id.end(), ii.begin())) << isa_name(isa) << " in place";
          }
        }
      }
    }
  }
}

// The SIMD exps compute results that round to subnormals in integers (no microcode assist):
// every float argument from -104.5 to -86 (results zero, subnormal or the smallest normals:
// about 2.4 million values) and around the clamp, on every ISA, against exp_poly's bits.
TEST(ExpScaledSumSubnormals, EveryIsaGivesExpPolyBitsOverTheWholeSubnormalRange) {
  std::vector<float> x;
  for (float v = -104.5f; v <= -86.0f; v = std::nextafter(v, 0.0f)) x.push_back(v);
  x.push_back(-kInf);
  x.push_back(-1e30f);
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = exp_poly(x[i]);
  for (Isa isa : supported_isas()) {
    std::vector<float> got(x.size());
    kernels_for(isa).exp_scaled_sum(x.data(), 0.0f, 1.0f, got.data(), int64_t(x.size()));
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ < 5) {
        ADD_FAILURE() << isa_name(isa) << " x=" << x[i] << " got " << got[i] << " want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0u) << isa_name(isa);
  }
}

// exp_band_sums: the scalar reference against the contract written out (the exps of
// exp_poly, the total with exp_scaled_sum's bits, the unnormalised band sums in the 16-lane
// order), and every ISA against it bit for bit; rows with ties and -inf, all -inf, and wide
// rows whose exps are subnormal or zero (the SIMD exps' integer path).
TEST(ExpBandSums, ScalarReferenceFollowsTheContractAndEveryIsaGivesItsBits) {
  const KernelTable& ref = kernels_for(Isa::Scalar);
  for (int64_t n : kLengths) {
    for (int kind = 0; kind < 4; ++kind) {
      std::vector<float> x = scan_row(n, uint32_t(3 * n + 7 + kind), kind == 3 ? 0 : kind);
      if (kind == 3) {
        for (float& v : x) v *= 12.0f;  // sd 36: many exps below 2^-126, some 0
      }
      const RowRange range = ref.row_range(x.data(), n);
      const float mx = range.max == -kInf ? 0.0f : range.max;
      const std::vector<float> lower = lowers_for(x);
      std::vector<float> e(static_cast<size_t>(n));
      const double want_sum = ref.exp_scaled_sum(x.data(), mx, 1.3f, e.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float want_e = exp_poly((x[size_t(i)] - mx) * 1.3f);
        ASSERT_EQ(std::memcmp(&e[size_t(i)], &want_e, 4), 0) << "n=" << n << " i=" << i;
      }
      double want[kMassBands];
      const double got_sum = ref.exp_band_sums(x.data(), mx, 1.3f, n, lower.data(), want, nullptr, nullptr, nullptr);
      EXPECT_TRUE(same_bits(got_sum, want_sum)) << "n=" << n << " kind=" << kind;
      EXPECT_TRUE(same_bits(got_sum, contract_mass(x, e, 1.0, lower, -1))) << "n=" << n << " kind=" << kind;
      for (int j = 0; j < kMassBands; ++j) {
        // With inv_sum 1 the contract's masses are the exps' sums (float(e * 1.0) == e); the
        // last band is every id.
        const int band = j + 1 < kMassBands ? j : -1;
        EXPECT_TRUE(same_bits(want[j], contract_mass(x, e, 1.0, lower, band))) << "n=" << n << " band " << j;
      }
      // Band 0's entries, as band_pack packs them.
      std::vector<float> want_top_x(static_cast<size_t>(n));
      std::vector<int32_t> want_top_id(static_cast<size_t>(n));
      const int64_t want_top = ref.band_pack(x.data(), nullptr, nullptr, n, lower[0], kInf, want_top_x.data(),
                                             nullptr, want_top_id.data());
      for (Isa isa : supported_isas()) {
        for (bool top : {false, true}) {
          double got[kMassBands];
          std::vector<float> top_x(size_t(n) + 16, -7.0f);
          std::vector<int32_t> top_id(size_t(n) + 16, -7);
          int64_t n_top = -1;
          const double s = top ? kernels_for(isa).exp_band_sums(x.data(), mx, 1.3f, n, lower.data(), got, top_x.data(),
                                                                top_id.data(), &n_top)
                               : kernels_for(isa).exp_band_sums(x.data(), mx, 1.3f, n, lower.data(), got, nullptr,
                                                                nullptr, nullptr);
          EXPECT_TRUE(same_bits(s, want_sum)) << isa_name(isa) << " n=" << n << " kind=" << kind;
          for (int j = 0; j < kMassBands; ++j) {
            EXPECT_TRUE(same_bits(got[j], want[j])) << isa_name(isa) << " n=" << n << " kind=" << kind << " band " << j;
          }
          if (!top) continue;
          ASSERT_EQ(n_top, want_top) << isa_name(isa) << " n=" << n << " kind=" << kind;
          EXPECT_TRUE(std::equal(want_top_x.begin(), want_top_x.begin() + want_top, top_x.begin())) << isa_name(isa);
          EXPECT_TRUE(std::equal(want_top_id.begin(), want_top_id.begin() + want_top, top_id.begin())) << isa_name(isa);
          for (size_t i = size_t(n); i < top_x.size(); ++i) {
            ASSERT_EQ(top_x[i], -7.0f) << isa_name(isa) << " n=" << n;
            ASSERT_EQ(top_id[i], -7) << isa_name(isa) << " n=" << n;
          }
        }
      }
    }
  }
}

// band_pack without probabilities (p == nullptr): the same logits and ids as with them, and
// nothing written to out_p.
TEST(BandPack, WithoutProbabilitiesPacksLogitsAndIdsOnly) {
  for (int64_t n : kLengths) {
    const std::vector<float> x = scan_row(n, uint32_t(n + 77), 1);
    const std::vector<float> p = random_floats(n, uint32_t(n + 2), 1.0f);
    const std::vector<float> lower = lowers_for(x);
    for (Isa isa : supported_isas()) {
      const KernelTable& kt = kernels_for(isa);
      std::vector<float> wx(size_t(n) + 16), wp(size_t(n) + 16), gx(size_t(n) + 16, -7.0f);
      std::vector<int32_t> wi(size_t(n) + 16), gi(size_t(n) + 16, -7);
      const int64_t want = kt.band_pack(x.data(), p.data(), nullptr, n, lower[1], lower[0], wx.data(), wp.data(), wi.data());
      const int64_t got = kt.band_pack(x.data(), nullptr, nullptr, n, lower[1], lower[0], gx.data(), nullptr, gi.data());
      ASSERT_EQ(got, want) << isa_name(isa) << " n=" << n;
      EXPECT_TRUE(std::equal(wx.begin(), wx.begin() + want, gx.begin())) << isa_name(isa) << " n=" << n;
      EXPECT_TRUE(std::equal(wi.begin(), wi.begin() + want, gi.begin())) << isa_name(isa) << " n=" << n;
      for (size_t i = size_t(n); i < gx.size(); ++i) ASSERT_EQ(gx[i], -7.0f) << isa_name(isa) << " n=" << n;
      // In place over a copy, ids given.
      std::vector<float> ix = x;
      std::vector<int32_t> ii(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ii[size_t(i)] = int32_t(i);
      const int64_t c2 = kt.band_pack(ix.data(), nullptr, ii.data(), n, lower[1], lower[0], ix.data(), nullptr, ii.data());
      ASSERT_EQ(c2, want) << isa_name(isa) << " in place, n=" << n;
      EXPECT_TRUE(std::equal(wx.begin(), wx.begin() + want, ix.begin())) << isa_name(isa) << " in place";
      EXPECT_TRUE(std::equal(wi.begin(), wi.begin() + want, ii.begin())) << isa_name(isa) << " in place";
    }
  }
}

// exp_band_sums' exps over the whole subnormal range (as the test above for exp_scaled_sum):
// every float from -104.5 to -86 in rows of 16 (full vectors; a 16-term sum of multiples of
// 2^-149 below 2^-120 is exact in double, so a wrong lane shows in the total).
TEST(ExpBandSums, EveryIsaGivesExpPolyBitsOverTheWholeSubnormalRange) {
  std::vector<float> x;
  for (float v = -104.5f; v <= -86.0f; v = std::nextafter(v, 0.0f)) x.push_back(v);
  while (x.size() % 16) x.push_back(-kInf);
  const float lower[kMassBands] = {-95.0f, -95.0f, -90.0f, -FLT_MAX};
  for (Isa isa : supported_isas()) {
    size_t bad = 0;
    for (size_t i = 0; i < x.size(); i += 16) {
      double want = 0.0;
      for (size_t j = i; j < i + 16; ++j) want += exp_poly(x[j]);
      double above[kMassBands];
      const double got = kernels_for(isa).exp_band_sums(x.data() + i, 0.0f, 1.0f, 16, lower, above, nullptr, nullptr, nullptr);
      if (got != want && bad++ < 5) ADD_FAILURE() << isa_name(isa) << " x from " << x[i] << " got " << got << " want " << want;
    }
    EXPECT_EQ(bad, 0u) << isa_name(isa);
  }
}

}  // namespace
}  // namespace spillway::kernels
