// Row scans for the sampler (engine/sampling): the range of a logit row with its argmax, the
// probability masses of a row in a few logit bands, and the packed entries of one band. Dispatched
// through KernelTable::row_range / band_masses / band_pack like exp_scaled_sum (exp_sum.h).
//
// All three are pure functions of their inputs, single thread, no allocation; every ISA
// gives bit-identical results (tests/kernels/test_sample_scan.cpp checks each ISA against
// the scalar reference in sample_scan.cpp).
#pragma once

#include <cstdint>

namespace spillway::kernels {

// The range of a row of n floats.
//   max:     the largest value that is not NaN; -inf when there is none (n == 0, all -inf / NaN)
//   argmax:  the lowest index i with x[i] == max (0 when max is -inf); max == x[argmax] then
//   min:     the smallest value that is neither -inf nor NaN; +inf when there is none
//   n_finite: how many x[i] != -inf (NaN counts, as the sampler always counted it)
struct RowRange {
  float max;
  float min;
  int64_t argmax;
  int64_t n_finite;
};
RowRange row_range(const float* x, int64_t n);

// Logit bands over a row: band j holds the ids with lower[j] <= x[i] < lower[j - 1] (band 0:
// lower[0] <= x[i] < +inf); lower[] is non-increasing, kMassBands entries. -inf, +inf and
// NaN logits are in no band (lower[kMassBands - 1] = -FLT_MAX takes every other value).
constexpr int kMassBands = 4;

// With p[i] = float(double(e[i]) * inv_sum) (the sampler's probability of id i: e its
// exp, inv_sum 1 / the sum of the exps), writes above[j] = the sum of p[i] over the ids of
// bands 0..j (lower[j] <= x[i] < +inf) and returns the sum of p[i] over every i < n, all in
// double, each in exp_scaled_sum's fixed order: 16 lanes, lane l adding the terms of
// i = l (mod 16) in increasing i from +0 (a term outside the range adds +0), then
// s8[l] = a[l] + a[l + 8], s4[l] = s8[l] + s8[l + 4], s2[l] = s4[l] + s4[l + 2], s2[0] + s2[1].
// p_out (optional, may alias e): receives p[i] for i < n. With inv_sum = 1 and e = p, the
// masses of given probabilities (float(p * 1.0) == p).
double band_masses(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                   double* above, float* p_out);

// Packs the entries i < n with lo <= x[i] < hi, in increasing i: out_x[c] = x[i],
// out_p[c] = p[i], out_ids[c] = ids ? ids[i] : i, for c = 0, 1, ...; returns how many (band
// j of band_masses: lo = lower[j], hi = lower[j - 1] or +inf). Each output has room for n and
// may alias its input (in place); nothing past the returned count is meaningful, nothing past
// n is written. p may be nullptr: then out_p is not touched (may be nullptr too).
int64_t band_pack(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                  float* out_x, float* out_p, int32_t* out_ids);

// The exp pass of exp_scaled_sum fused with unnormalised band sums and band 0's entries,
// storing no exps: with e[i] = exp_poly((x[i] - shift) * scale) (exp_sum.h), returns the sum
// of the e[i] with the same bits as exp_scaled_sum(x, shift, scale, nullptr, n), and writes
// above[j] = the sum of e[i] over the ids of bands 0..j (lower[j] <= x[i] < +inf; lower[] as
// for band_masses), in exp_scaled_sum's 16-lane double order (a term outside the band adds
// nothing to its lane), for j < kMassBands - 1; the last band is every id: above[kMassBands
// - 1] = the returned sum (lower[kMassBands - 1] is not read; with lower = -FLT_MAX the band
// sum would differ only by NaN or +inf logits, whose exps are NaN / +inf). top_x (optional; then top_ids and n_top too, each with room for n):
// band 0's entries as band_pack(x, nullptr, nullptr, n, lower[0], +inf, ...) packs them
// (x[i] and i in increasing i; nothing past *n_top is meaningful), their count in *n_top.
// Bit-identical on every ISA (tests/kernels/test_sample_scan.cpp).
double exp_band_sums(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                     float* top_x = nullptr, int32_t* top_ids = nullptr, int64_t* n_top = nullptr);

}  // namespace spillway::kernels
