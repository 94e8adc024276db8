// The scalar references of the sampler's row scans (sample_scan.h) and their public entry
// points (the active ISA's table). The AVX2 / AVX-512 versions are in sample_scan_avx2.cpp /
// sample_scan_avx512.cpp and give the same bits.
#include "kernels/ops/sample_scan.h"

#include <cmath>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/exp_sum.h"
#include "kernels/kernel_table.h"

namespace spillway::kernels {

RowRange row_range_scalar(const float* x, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  RowRange r{-kInf, kInf, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v > r.max) {  // strict: the lowest index keeps a tie; NaN never enters
      r.max = v;
      r.argmax = i;
    }
    if (v != -kInf) {
      ++r.n_finite;
      if (v < r.min) r.min = v;  // NaN never enters
    }
  }
  return r;
}

double band_masses_scalar(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                          double* above, float* p_out) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double a[kMassBands + 1][16] = {};  // the cumulative bands, then the total
  for (int64_t i = 0; i < n; ++i) {
    const float pf = static_cast<float>(static_cast<double>(e[i]) * inv_sum);
    if (p_out) p_out[i] = pf;
    const double p = pf;
    const int l = static_cast<int>(i % 16);
    a[kMassBands][l] += p;
    for (int j = 0; j < kMassBands; ++j) a[j][l] += (x[i] >= lower[j] && x[i] < kInf) ? p : 0.0;
  }
  double sums[kMassBands + 1];
  for (int j = 0; j <= kMassBands; ++j) {
    double s8[8], s4[4], s2[2];
    for (int l = 0; l < 8; ++l) s8[l] = a[j][l] + a[j][l + 8];
    for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
    for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
    sums[j] = s2[0] + s2[1];
  }
  for (int j = 0; j < kMassBands; ++j) above[j] = sums[j];
  return sums[kMassBands];
}

int64_t band_pack_scalar(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                         float* out_x, float* out_p, int32_t* out_ids) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v >= lo && v < hi) {
      const int32_t id = ids ? ids[i] : static_cast<int32_t>(i);
      if (p) {
        const float pv = p[i];
        out_p[c] = pv;
      }
      out_x[c] = v;
      out_ids[c] = id;
      ++c;
    }
  }
  return c;
}

double exp_band_sums_scalar(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                            float* top_x, int32_t* top_ids, int64_t* n_top) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  double a[kMassBands + 1][16] = {};  // the cumulative bands, then the total
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (top_x && x[i] >= lower[0] && x[i] < kInf) {
      top_x[c] = x[i];
      top_ids[c] = static_cast<int32_t>(i);
      ++c;
    }
    const double e = exp_poly((x[i] - shift) * scale);
    const int l = static_cast<int>(i % 16);
    a[kMassBands][l] += e;
    for (int j = 0; j + 1 < kMassBands; ++j) {
      if (x[i] >= lower[j] && x[i] < kInf) a[j][l] += e;
    }
  }
  double sums[kMassBands + 1];
  for (int j = 0; j <= kMassBands; ++j) {
    double s8[8], s4[4], s2[2];
    for (int l = 0; l < 8; ++l) s8[l] = a[j][l] + a[j][l + 8];
    for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
    for (int l = 0; l < 2; ++l) s2[l] = s4[l] + s4[l + 2];
    sums[j] = s2[0] + s2[1];
  }
  for (int j = 0; j + 1 < kMassBands; ++j) above[j] = sums[j];
  above[kMassBands - 1] = sums[kMassBands];
  if (top_x) *n_top = c;
  return sums[kMassBands];
}

namespace {
const KernelTable& table() {
  static const KernelTable& t = kernels_for(active_isa());
  return t;
}
}  // namespace

RowRange row_range(const float* x, int64_t n) { return table().row_range(x, n); }

double band_masses(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                   double* above, float* p_out) {
  return table().band_masses(x, e, n, inv_sum, lower, above, p_out);
}

int64_t band_pack(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                  float* out_x, float* out_p, int32_t* out_ids) {
  return table().band_pack(x, p, ids, n, lo, hi, out_x, out_p, out_ids);
}

double exp_band_sums(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                     float* top_x, int32_t* top_ids, int64_t* n_top) {
  return table().exp_band_sums(x, shift, scale, n, lower, above, top_x, top_ids, n_top);
}

}  // namespace spillway::kernels
