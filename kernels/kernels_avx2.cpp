// The AVX2 (+FMA +F16C) kernel table. Built on first use, which kernels_for() allows only
// on a CPU that supports AVX2.
#include "kernels/kernel_registry.h"

namespace spillway::kernels {

const KernelTable& avx2_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = scalar_kernel_table();
    t.isa = Isa::Avx2;
    add_avx2_dot_kernels(t);
    add_avx2_kquant_tile_kernels(t);
    add_avx2_float_kernels(t);
    add_avx2_kquant_unpacked_kernels(t);
    add_avx2_row_kernels(t);
    add_avx2_gdn_kernels(t);
    add_avx2_exp_kernels(t);
    add_avx2_sample_scan_kernels(t);
    return t;
  }();
  return table;
}

}  // namespace spillway::kernels
