// Internal: how the per-ISA files contribute their kernels to a KernelTable. Plain
// declarations only (no inline code), so the header is safe in every translation unit.
#pragma once

#include "kernels/kernel_table.h"

namespace spillway::kernels {

void add_avx2_dot_kernels(KernelTable& t);   // dot_avx2.cpp
void add_avx2_kquant_tile_kernels(KernelTable& t);  // matmul/kquant_tiles_avx2.cpp
void add_avx2_float_kernels(KernelTable& t);        // matmul/float_tiles_avx2.cpp
void add_avx2_row_kernels(KernelTable& t);   // ops_avx2.cpp
void add_avx2_kquant_unpacked_kernels(KernelTable& t);  // matmul/kquant_unpacked_avx2.cpp
void add_avx512_dot_kernels(KernelTable& t); // dot_avx512.cpp
void add_avx512_q8_tile_kernels(KernelTable& t);  // matmul/q8_tiles_avx512.cpp
void add_avx512_float_kernels(KernelTable& t);    // matmul/float_tiles_avx512.cpp
void add_avx512_row_kernels(KernelTable& t); // ops_avx512.cpp
void add_avx512_kquant_unpacked_kernels(KernelTable& t);  // matmul/kquant_unpacked_avx512.cpp
void add_avx2_gdn_kernels(KernelTable& t);   // gdn_avx2.cpp
void add_avx512_gdn_kernels(KernelTable& t); // gdn_avx512.cpp
// The calling thread's work buffer for the SIMD gated delta net kernels: at least `floats`
// floats, 64-byte aligned, valid until the thread's next call (dispatch.cpp: compiled without
// ISA flags, so its std::vector code is not an AVX-512 instantiation other files could link).
float* gdn_thread_work(size_t floats);
void add_avx2_exp_kernels(KernelTable& t);   // exp_sum_avx2.cpp
void add_avx512_exp_kernels(KernelTable& t); // exp_sum_avx512.cpp
void add_avx2_sample_scan_kernels(KernelTable& t);   // sample_scan_avx2.cpp
void add_avx512_sample_scan_kernels(KernelTable& t); // sample_scan_avx512.cpp
// The scalar references (sample_scan.cpp), for the scalar table.
RowRange row_range_scalar(const float* x, int64_t n);
double band_masses_scalar(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                          double* band, float* p_out);
int64_t band_pack_scalar(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                         float* out_x, float* out_p, int32_t* out_ids);
double exp_band_sums_scalar(const float* x, float shift, float scale, int64_t n, const float* lower, double* above,
                            float* top_x, int32_t* top_ids, int64_t* n_top);

}  // namespace spillway::kernels
