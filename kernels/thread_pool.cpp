#include "kernels/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace spillway::kernels {

namespace {
// How long an idle worker (or the waiting caller) spins before blocking. A decode step
// calls the pool every few microseconds; an idle server must not burn CPU.
constexpr auto kSpinTime = std::chrono::microseconds(200);
// Pause-loop iterations (a few microseconds) before polling starts yielding the core.
constexpr int kPauseIterations = 2000;

inline void cpu_relax() { __builtin_ia32_pause(); }
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::run_impl(Task task, void* ctx) {
  if (n_threads_ == 1) {
    task(ctx, 0);
    return;
  }
  // Workers read task_/ctx_ only after observing the new generation (acquire).
  task_ = task;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  // A worker that registered as sleeper did so under mu_ before our increment, so it is
  // seen here; one that registers later re-checks the generation before blocking.
  if (sleepers_.load(std::memory_order_relaxed) > 0) wake_.notify_all();

  task(ctx, 0);

  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kPauseIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      // Busy-wait briefly, then keep polling while yielding the core (so an oversubscribed
      // machine still runs the threads with work), then block.
      const auto spin_until = std::chrono::steady_clock::now() + kSpinTime;
      for (int i = 1; g == seen; ++i) {
        if (i < kPauseIterations) {
          cpu_relax();
        } else {
          std::this_thread::yield();
          if (std::chrono::steady_clock::now() >= spin_until) break;
        }
        g = generation_.load(std::memory_order_acquire);
      }
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1, std::memory_order_relaxed);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_) return;
    task_(ctx_, thread_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int count_physical_cores(const std::string& cpu_root, std::span<const int> cpus) {
  std::set<std::pair<std::string, std::string>> cores;  // (package id, core id)
  for (int cpu : cpus) {
    const std::string dir = cpu_root + "/cpu" + std::to_string(cpu) + "/topology/";
    std::string package, core;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    if (core.empty()) return std::max<int>(1, static_cast<int>(cpus.size()));  // no topology
    cores.emplace(package, core);
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
}

int physical_core_count() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    return std::max(1u, std::thread::hardware_concurrency());
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return count_physical_cores("/sys/devices/system/cpu", cpus);
}

}  // namespace spillway::kernels
