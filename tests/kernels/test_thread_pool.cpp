#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/thread_pool.h"

namespace spillway::kernels {
namespace {

TEST(ThreadPool, RunOnAllCallsEveryIndexOnce) {
  for (int size = 1; size <= 4; ++size) {
    ThreadPool pool(size);
    EXPECT_EQ(pool.size(), size);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(size));
    for (int call = 0; call < 3000; ++call) {
      pool.run_on_all([&](int t) {
        ASSERT_GE(t, 0);
        ASSERT_LT(t, size);
        hits[size_t(t)].fetch_add(1);
      });
    }
    for (int t = 0; t < size; ++t) EXPECT_EQ(hits[size_t(t)].load(), 3000) << "size " << size;
  }
}

TEST(ThreadPool, CallerRunsIndexZero) {
  ThreadPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id seen;
  pool.run_on_all([&](int t) {
    if (t == 0) seen = std::this_thread::get_id();
  });
  EXPECT_EQ(seen, caller);
}

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  for (int size = 1; size <= 4; ++size) {
    ThreadPool pool(size);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 64, 1001}) {
      for (int rep = 0; rep < 200; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t begin, int64_t end) {
          ASSERT_LT(begin, end);
          for (int64_t i = begin; i < end; ++i) hits[size_t(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "size " << size << " n " << n;
      }
    }
  }
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  for (int round = 0; round < 5; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // long enough for workers to block
    pool.run_on_all([&](int) { total.fetch_add(1); });
  }
  EXPECT_EQ(total.load(), 15);
}

TEST(ThreadPool, ResultsAreVisibleToTheCaller) {
  ThreadPool pool(4);
  std::vector<int64_t> out(4000);
  for (int call = 0; call < 500; ++call) {
    pool.parallel_for(int64_t(out.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[size_t(i)] = i * call;
    });
    for (size_t i = 0; i < out.size(); i += 97) ASSERT_EQ(out[i], int64_t(i) * call);
  }
}

TEST(ThreadPool, PhysicalCoreCountIsPositive) { EXPECT_GE(physical_core_count(), 1); }

// A sysfs-shaped tree in a temporary folder: cpu<N>/topology/{physical_package_id,core_id}.
class FakeCpuTree {
 public:
  FakeCpuTree() {
    root_ = std::filesystem::temp_directory_path() /
            ("spillway-cpus-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(root_);
  }
  ~FakeCpuTree() { std::filesystem::remove_all(root_); }
  void add(int cpu, int package, int core) {
    const auto dir = root_ / ("cpu" + std::to_string(cpu)) / "topology";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "physical_package_id") << package << "\n";
    std::ofstream(dir / "core_id") << core << "\n";
  }
  std::string root() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
};

TEST(ThreadPool, PhysicalCoresCountSmtSiblingsOnce) {
  FakeCpuTree tree;
  // 4 cores x 2 SMT threads, Linux numbering: cpu N and N + 4 are siblings.
  for (int cpu = 0; cpu < 8; ++cpu) tree.add(cpu, 0, cpu % 4);
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(count_physical_cores(tree.root(), all), 4);
  // An affinity set of two siblings is one core; of cpus on three cores, three.
  const std::vector<int> siblings = {1, 5};
  EXPECT_EQ(count_physical_cores(tree.root(), siblings), 1);
  const std::vector<int> three = {0, 4, 2, 7};
  EXPECT_EQ(count_physical_cores(tree.root(), three), 3);
}

TEST(ThreadPool, PhysicalCoresAreDistinctAcrossPackages) {
  FakeCpuTree tree;
  // Two sockets whose core ids restart at 0.
  tree.add(0, 0, 0);
  tree.add(1, 0, 1);
  tree.add(2, 1, 0);
  tree.add(3, 1, 1);
  const std::vector<int> all = {0, 1, 2, 3};
  EXPECT_EQ(count_physical_cores(tree.root(), all), 4);
}

TEST(ThreadPool, WithoutTopologyEveryCpuCounts) {
  FakeCpuTree tree;
  tree.add(0, 0, 0);  // cpu1 and cpu2 have no topology files
  const std::vector<int> cpus = {0, 1, 2};
  EXPECT_EQ(count_physical_cores(tree.root(), cpus), 3);
  EXPECT_EQ(count_physical_cores(tree.root(), std::span<const int>()), 1);
}

}  // namespace
}  // namespace spillway::kernels
