// Helpers shared by the kernel tests: random data, weight matrices, ISA iteration.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/dtype.h"
#include "kernels/kernel_table.h"
#include "kernels/kernels.h"

namespace spillway::kernels::testing {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A row-major weight matrix of random values stored as `type`.
struct TestMatrix {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  WeightMatrix view() const { return WeightMatrix{type, bytes.data(), rows, cols}; }
};

inline TestMatrix random_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestMatrix m{type, rows, cols, {}};
  const int64_t rb = row_bytes(type, cols);
  m.bytes.resize(static_cast<size_t>(rb * rows));
  const std::vector<float> values = random_floats(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, values.data() + r * cols, m.bytes.data() + r * rb, cols);
  return m;
}

// 64-byte aligned float / byte buffers.
template <class T>
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : n_(n), p_(static_cast<T*>(std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64 + 1) * 64))) {}
  ~AlignedBuffer() { std::free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  T* data() { return p_; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  T* p_;
};

constexpr DType kAllWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                                     DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                                     DType::Q4_K, DType::Q5_K, DType::Q6_K};
// The types whose dot kernels read Q8_K activations (kernel_table.h's KQuant family).
constexpr DType kKQuantTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,
                                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};

inline std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

}  // namespace spillway::kernels::testing
