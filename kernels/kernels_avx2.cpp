// Avx2 kernel table. Entries without a Avx2 implementation yet use the scalar ones.
#include "kernels/kernel_table.h"

namespace spillway::kernels {

const KernelTable& avx2_kernel_table() {
  static const KernelTable table = [] {
    KernelTable t = scalar_kernel_table();
    t.isa = Isa::Avx2;
    return t;
  }();
  return table;
}

}  // namespace spillway::kernels
