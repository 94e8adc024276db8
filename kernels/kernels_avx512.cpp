// The AVX-512 kernel table: the AVX2 table (every AVX-512 CPU has AVX2) with the AVX-512
// kernels on top. Built on first use, which kernels_for() allows only on a CPU that
// supports AVX-512 F/BW/VL/DQ/VNNI.
#include "kernels/kernel_registry.h"

namespace spillway::kernels {

const KernelTable& avx512_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = avx2_kernel_table();
    t.isa = Isa::Avx512;
    add_avx512_dot_kernels(t);
    add_avx512_q8_tile_kernels(t);
    add_avx512_float_kernels(t);
    add_avx512_kquant_unpacked_kernels(t);
    add_avx512_row_kernels(t);
    add_avx512_gdn_kernels(t);
    add_avx512_exp_kernels(t);
    add_avx512_sample_scan_kernels(t);
    return t;
  }();
  return table;
}

}  // namespace spillway::kernels
