#include "kernels/dtype.h"

namespace spillway::kernels {

bool is_supported(uint32_t ggml_type) {
  switch (static_cast<DType>(ggml_type)) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return true;
  }
  return false;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::Q8_0: return "Q8_0";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
  }
  return "unknown";
}

int64_t block_elems(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q8_0: return kQK8_0;
    case DType::Q4_0: return kQK4_0;
    case DType::Q4_1: return kQK4_1;
    case DType::Q5_0: return kQK5_0;
    case DType::Q5_1: return kQK5_1;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return kQK_K;
  }
  return 1;
}

int64_t block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q8_0: return 2 + kQK8_0;
    case DType::Q4_0: return 2 + kQK4_0 / 2;
    case DType::Q4_1: return 4 + kQK4_1 / 2;
    case DType::Q5_0: return 2 + 4 + kQK5_0 / 2;
    case DType::Q5_1: return 4 + 4 + kQK5_1 / 2;
    case DType::Q2_K: return kQK_K / 16 + kQK_K / 4 + 4;
    case DType::Q3_K: return kQK_K / 8 + kQK_K / 4 + 12 + 2;
    case DType::Q4_K: return 4 + 12 + kQK_K / 2;
    case DType::Q5_K: return 4 + 12 + kQK_K / 8 + kQK_K / 2;
    case DType::Q6_K: return kQK_K / 2 + kQK_K / 4 + kQK_K / 16 + 2;
  }
  return 4;
}

}  // namespace spillway::kernels
