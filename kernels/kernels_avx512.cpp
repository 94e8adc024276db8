// Avx512 kernel table. Entries without a Avx512 implementation yet use the scalar ones.
#include "kernels/kernel_table.h"

namespace spillway::kernels {

const KernelTable& avx512_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = scalar_kernel_table();
    t.isa = Isa::Avx512;
    return t;
  }();
  return table;
}

}  // namespace spillway::kernels
