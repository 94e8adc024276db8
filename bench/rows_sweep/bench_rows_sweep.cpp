// Rows-vs-time sweep of the engine's GEMM (issue #17, shape buckets): how the cost of one
// matmul grows with the number of activation rows M, so that the bucket ladder
// (scheduler/step_plans.h) is chosen from measurement.
//
//   build/rel/bench/bench_rows_sweep [--types f16,q8_0] [--rounds 3] [--reps 3] [--threads N]
//
// For every weight type and shape (2048x2048 attention projection, 5632x2048 MLP up/gate, the
// TinyLlama shapes of bench_kernels) and every M of the sweep, `reps` matmuls on weights in the
// engine's Tiled layout, cycling 8 copies so that weights stream from DRAM as in a real step.
// Rounds alternate the order of M (ascending, then descending) so that drift of a noisy shared
// machine hits every M alike. Reported per M: median process CPU time and wall time per matmul
// (microseconds), and CPU time per row. Then, for the ladder of scheduler::StepPlans at budget
// 256 (and any --ladder a,b,c), the padding cost: for every swept M, cpu(bucket(M)) / cpu(M),
// its mean and maximum. One thread calls; the kernels fan out on the pool (CPU time counts
// every pool thread). Output: a plain table on stdout.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "scheduler/step_plans.h"

namespace {

using namespace spillway::kernels;  // NOLINT: a bench

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
double wall_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Free {
  void operator()(void* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, Free>;
Bytes aligned(size_t n) { return Bytes(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64))); }

std::vector<int64_t> sweep_rows() {
  std::vector<int64_t> m;
  for (int64_t i = 1; i <= 16; ++i) m.push_back(i);
  for (int64_t i = 20; i <= 64; i += 4) m.push_back(i);
  for (int64_t i = 72; i <= 256; i += 8) m.push_back(i);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Ladder {
  std::string name;
  std::vector<int32_t> sizes;
  int32_t bucket(int64_t m) const {
    for (int32_t s : sizes) {
      if (s >= m) return s;
    }
    return sizes.back();
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<DType> types = {DType::F16, DType::Q8_0};
  int rounds = 3, reps = 3, threads = physical_core_count();
  std::vector<Ladder> ladders;
  {
    spillway::scheduler::StepPlans plans(256);
    Ladder l{"StepPlans(256)", {}};
    for (int32_t s : plans.sizes()) l.sizes.push_back(s);
    ladders.push_back(l);
    ladders.push_back({"pow2", {1, 2, 4, 8, 16, 32, 64, 128, 256}});
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--rounds" && v) {
      rounds = std::atoi(v), ++i;
    } else if (a == "--reps" && v) {
      reps = std::atoi(v), ++i;
    } else if (a == "--threads" && v) {
      threads = std::atoi(v), ++i;
    } else if (a == "--types" && v) {
      types.clear();
      const std::string s = v;
      if (s.find("f16") != std::string::npos) types.push_back(DType::F16);
      if (s.find("q8_0") != std::string::npos) types.push_back(DType::Q8_0);
      if (s.find("q4_0") != std::string::npos) types.push_back(DType::Q4_0);
      ++i;
    } else if (a == "--ladder" && v) {
      Ladder l{std::string("--ladder ") + v, {}};
      for (const char* p = v; *p;) {
        l.sizes.push_back(static_cast<int32_t>(std::strtol(p, const_cast<char**>(&p), 10)));
        if (*p == ',') ++p;
      }
      ladders.push_back(l);
      ++i;
    } else {
      std::fprintf(stderr, "usage: %s [--types f16,q8_0,q4_0] [--rounds N] [--reps N] [--threads N] [--ladder a,b,...]\n",
                   argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  const std::vector<int64_t> ms = sweep_rows();
  const int64_t max_m = ms.back();
  constexpr int64_t kShapes[][2] = {{2048, 2048}, {5632, 2048}};
  constexpr int kCopies = 8;
  std::printf("threads %d, rounds %d (alternating M order), reps %d, %d weight copies; CPU time of the process\n",
              threads, rounds, reps, kCopies);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(max_m) * 2048);
  for (float& f : x) f = dist(rng);
  for (DType type : types) {
    for (const auto& shape : kShapes) {
      const int64_t rows = shape[0], cols = shape[1];
      const WeightLayout layout = has_tiled_layout(type, cols) ? WeightLayout::Tiled : WeightLayout::Rows;
      const size_t bytes = size_t(row_bytes(type, cols) * rows);
      std::vector<Bytes> copies;
      {
        std::vector<float> w(size_t(rows * cols));
        for (float& f : w) f = dist(rng) * 0.02f;
        Bytes first = aligned(bytes);
        for (int64_t r = 0; r < rows; ++r) quantize_row(type, w.data() + r * cols, first.get() + r * row_bytes(type, cols), cols);
        if (layout == WeightLayout::Tiled) {
          std::vector<uint8_t> scratch(retile_scratch_bytes(type, cols));
          retile_in_place(type, first.get(), rows, cols, scratch.data());
        }
        for (int c = 1; c < kCopies; ++c) {
          Bytes b = aligned(bytes);
          std::memcpy(b.get(), first.get(), bytes);
          copies.push_back(std::move(b));
        }
        copies.push_back(std::move(first));
      }
      WeightMatrix wm{type, nullptr, rows, cols, layout};
      Bytes scratch = aligned(matmul_scratch_bytes(wm, max_m));
      std::vector<float> y(size_t(max_m) * rows);
      std::vector<std::vector<double>> cpu(ms.size()), wall(ms.size());
      size_t next = 0;
      for (int r = 0; r < rounds; ++r) {
        for (size_t k = 0; k < ms.size(); ++k) {
          const size_t i = r % 2 == 0 ? k : ms.size() - 1 - k;
          for (int rep = 0; rep < reps; ++rep) {
            wm.data = copies[next++ % copies.size()].get();
            const double c0 = cpu_seconds(), w0 = wall_seconds();
            matmul(wm, x.data(), ms[i], y.data(), scratch.get(), pool);
            cpu[i].push_back(cpu_seconds() - c0);
            wall[i].push_back(wall_seconds() - w0);
          }
        }
      }
      std::printf("\n%s %lldx%lld (%s layout)\n%6s %12s %12s %12s\n", std::string(dtype_name(type)).c_str(), (long long)rows,
                  (long long)cols, layout == WeightLayout::Tiled ? "tiled" : "rows", "M", "cpu_us", "wall_us",
                  "cpu_us/row");
      std::vector<double> med(ms.size());
      for (size_t i = 0; i < ms.size(); ++i) {
        med[i] = median(cpu[i]);
        std::printf("%6lld %12.1f %12.1f %12.2f\n", (long long)ms[i], 1e6 * med[i], 1e6 * median(wall[i]),
                    1e6 * med[i] / double(ms[i]));
      }
      for (const Ladder& l : ladders) {
        double sum = 0, worst = 0;
        int64_t worst_m = 0;
        for (size_t i = 0; i < ms.size(); ++i) {
          const int32_t b = l.bucket(ms[i]);
          const auto it = std::find(ms.begin(), ms.end(), int64_t{b});
          if (it == ms.end()) continue;  // bucket not swept
          const double ratio = med[it - ms.begin()] / med[i];
          sum += ratio;
          if (ratio > worst) worst = ratio, worst_m = ms[i];
        }
        std::printf("ladder %-40s padding cost cpu(bucket(M))/cpu(M): mean %.3f, max %.3f at M=%lld\n",
                    l.name.c_str(), sum / double(ms.size()), worst, (long long)worst_m);
      }
    }
  }
  return 0;
}
