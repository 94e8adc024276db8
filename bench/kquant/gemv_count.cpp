// One matmul shape run a fixed number of times on one thread, for instruction counts and
// single-thread CPU time of the weight-type kernels without Google Benchmark's timing loop:
//
//   bench_gemv_count TYPE LAYOUT ROWS COLS M ITERS [MIB]   (LAYOUT: tiled | rows; TYPE F16 or a quant type)
//   SPILLWAY_ISA=avx2 valgrind --tool=callgrind --callgrind-out-file=cg.out
//       build/rel/bench/bench_gemv_count Q6_K tiled 2048 2048 1 4      (one command line)
//   callgrind_annotate cg.out | grep kernels::matmul     # inclusive Ir of the ITERS calls
//
// Weights are random bytes with finite fp16 scales (the integer work does not depend on the
// values), so setup costs almost nothing under valgrind. Prints the CPU time per call
// (CLOCK_PROCESS_CPUTIME_ID over all ITERS calls; one thread, so it is that thread's time).
// MIB > 0: copies of the matrix filling about that many MiB are cycled, call after call, so
// the weights stream from DRAM (as bench_kernels' GEMV rows); 0 (default): one copy, which
// stays in cache if it fits.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/kernels.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/thread_pool.h"

using namespace spillway::kernels;

namespace {

bool parse_type(const std::string& s, DType& t) {
  for (DType c : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::Q2_K}) {
    if (s == dtype_name(c)) {
      t = c;
      return true;
    }
  }
  return false;
}

// Random weight rows from quantizing random floats one row (cheap: rows * cols values once).
std::vector<uint8_t> random_rows(DType t, int64_t rows, int64_t cols) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t rb = size_t(row_bytes(t, cols));
  std::vector<uint8_t> out(rb * size_t(rows) + 64);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 16) {
      for (float& f : row) f = dist(rng);
      quantize_row(t, row.data(), out.data() + r * rb, cols);
    } else {
      std::memcpy(out.data() + r * rb, out.data() + (r % 16) * rb, rb);
    }
  }
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  DType t{};
  if ((argc != 7 && argc != 8) || !parse_type(argv[1], t) || (std::string(argv[2]) != "tiled" && std::string(argv[2]) != "rows")) {
    std::fprintf(stderr, "usage: %s TYPE tiled|rows ROWS COLS M ITERS [MIB]\n", argv[0]);
    return 2;
  }
  const bool tiled = std::string(argv[2]) == "tiled";
  const int64_t rows = std::atoll(argv[3]), cols = std::atoll(argv[4]), m = std::atoll(argv[5]);
  const int iters = std::atoi(argv[6]);
  if (tiled && !has_tiled_layout(t, cols)) {
    std::fprintf(stderr, "%s has no tiled layout at %lld columns\n", argv[1], static_cast<long long>(cols));
    return 2;
  }
  std::vector<uint8_t> w = random_rows(t, rows, cols);
  if (tiled) {
    std::vector<uint8_t> scratch(retile_scratch_bytes(t, cols));
    retile_in_place(t, w.data(), rows, cols, scratch.data());
  }
  const size_t stream_bytes = argc == 8 ? size_t(std::atoll(argv[7])) << 20 : 0;
  const size_t n_copies = std::max<size_t>(1, stream_bytes / w.size());
  // 64-byte aligned copies (as a model's tensors), plus SPILLWAY_BENCH_MISALIGN bytes if set.
  const char* mis = std::getenv("SPILLWAY_BENCH_MISALIGN");
  const size_t misalign = mis ? size_t(std::atoi(mis)) % 64 : 0;
  std::vector<std::vector<uint8_t>> buffers(n_copies, std::vector<uint8_t>(w.size() + 128));
  std::vector<uint8_t*> copies;
  for (auto& b : buffers) {
    auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(b.data()) + 63) / 64 * 64) + misalign;
    std::memcpy(p, w.data(), w.size());
    copies.push_back(p);
  }
  WeightMatrix wm{t, copies[0], rows, cols, tiled ? WeightLayout::Tiled : WeightLayout::Rows};
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(m * cols)), y(size_t(m * rows));
  for (float& f : x) f = dist(rng);
  std::vector<uint8_t> scratch(matmul_scratch_bytes(wm, m) + 64);
  ThreadPool pool(1);
  const KernelTable& kt = kernels_for(active_isa());
  matmul(kt, wm, x.data(), m, y.data(), scratch.data(), pool);  // warm-up
  const double t0 = cpu_seconds();
  for (int i = 0; i < iters; ++i) {
    wm.data = copies[size_t(i) % n_copies];
    matmul(kt, wm, x.data(), m, y.data(), scratch.data(), pool);
  }
  const double per_call = (cpu_seconds() - t0) / iters;
  double check = 0;
  for (float v : y) check += v;
  std::printf("%s %s %s %lldx%lld m=%lld copies=%zu: %.1f us CPU per call (checksum %g)\n", std::string(isa_name(active_isa())).c_str(), argv[1],
              argv[2], static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(m),
              n_copies, per_call * 1e6, check);
  return 0;
}
