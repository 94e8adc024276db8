// A fixed pool of kernel worker threads (physical-core sized) for data-parallel loops.
//
// Thread contract: parallel_for is called from one thread at a time (the engine
// thread); it blocks until every chunk has run. The caller runs chunk 0 itself.
// Workers sleep on a condition variable when idle (short spin first), so an idle server
// burns no CPU. No allocation per call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace spillway::kernels {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread: n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on each of the size() threads (thread_index < size()),
  // and returns when all have returned. fn must not throw.
  template <class Fn>
  void run_on_all(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_impl([](void* ctx, int t) { (*static_cast<F*>(ctx))(t); }, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into size() contiguous ranges (some may be empty) and calls
  // fn(begin, end) for each, in parallel.
  template <class Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    const int64_t nt = n_threads_;
    run_on_all([&](int t) {
      const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  using Task = void (*)(void* ctx, int thread_index);
  void run_impl(Task task, void* ctx);
  void worker_loop(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  bool stop_ = false;
  std::atomic<int> sleepers_{0};  // workers blocked on wake_ (changed under mu_)
};

// Physical cores this process may run on (distinct cores among its CPU affinity set,
// SMT siblings counted once); at least 1. The default ThreadPool size: `serve`, `run` and
// `bench` all default to default_thread_count().
int physical_core_count();

// The counting behind physical_core_count(), for any sysfs-shaped tree: cpus are the
// logical CPU numbers allowed; cpu_root holds cpu<N>/topology/{physical_package_id,
// core_id}. A CPU without topology files makes the answer the number of CPUs (no SMT
// information: count them all). At least 1.
int count_physical_cores(const std::string& cpu_root, std::span<const int> cpus);

// Kernel threads when the user names none: physical_core_count().
inline int default_thread_count() { return physical_core_count(); }

}  // namespace spillway::kernels
