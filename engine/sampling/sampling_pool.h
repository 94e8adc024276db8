// Sampling the rows of one step in parallel on the kernel pool.
//
// Rows are independent (each has its own Sampler), so each pool thread pulls the next row
// index from a shared counter and samples it with that thread's SamplerScratch: uneven
// rows (logprobs, top-p) balance themselves, and nothing is allocated once every scratch
// has grown to the vocabulary. A single row stays on the calling thread (no wake-up).
//
// Thread contract: for_each_row is called from the pool's calling thread (the engine
// thread), one call at a time, like ThreadPool::parallel_for; fn runs concurrently on pool
// threads for different rows and must only touch that row's Sampler and output.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

#include "engine/sampling/sampler_stages.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {

class SamplingPool {
 public:
  // pool: not owned; must outlive this object.
  explicit SamplingPool(kernels::ThreadPool& pool) : pool_(pool), scratch_(pool.size()) {}

  // Calls fn(row, scratch) once for every row < n_rows.
  template <class Fn>
  void for_each_row(size_t n_rows, Fn&& fn) {
    if (n_rows <= 1 || pool_.size() == 1) {
      for (size_t r = 0; r < n_rows; ++r) fn(r, scratch_[0]);
      return;
    }
    std::atomic<size_t> next{0};
    pool_.run_on_all([&](int t) {
      for (size_t r = next.fetch_add(1, std::memory_order_relaxed); r < n_rows;
           r = next.fetch_add(1, std::memory_order_relaxed)) {
        fn(r, scratch_[static_cast<size_t>(t)]);
      }
    });
  }

 private:
  kernels::ThreadPool& pool_;
  std::vector<SamplerScratch> scratch_;  // one per pool thread index
};

}  // namespace spillway::engine
