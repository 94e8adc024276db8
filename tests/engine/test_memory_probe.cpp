// LinuxMemorySource on fake /proc and /sys/fs/cgroup trees (cgroup v1, v2, unlimited),
// and the byte-size parser.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/platform/memory_probe.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;

class FakeTree {
 public:
  FakeTree() : root_(fs::temp_directory_path() / ("spillway-memprobe-" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    write("proc/meminfo",
          "MemTotal:       24000000 kB\nMemFree:         1000000 kB\n"
          "MemAvailable:   20000000 kB\n");
    write("proc/pressure/memory",
          "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\n"
          "full avg10=0.50 avg60=0.00 avg300=0.00 total=45\n");
  }
  ~FakeTree() { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  std::string proc() const { return (root_ / "proc").string(); }
  std::string cgroup() const { return (root_ / "cgroup").string(); }

 private:
  fs::path root_;
};

constexpr int64_t kMiB = 1024 * 1024;

// Without an anonymous count in memory.stat: kubelet's working set, usage - inactive_file.
TEST(MemoryProbe, CgroupV1WithoutRssFallsBackToUsageMinusInactiveFile) {
  FakeTree t;
  t.write("proc/self/cgroup", "5:devices:/\n4:memory:/job/42\n0::/\n");
  t.write("cgroup/memory/job/42/memory.limit_in_bytes", std::to_string(1024 * kMiB) + "\n");
  t.write("cgroup/memory/job/42/memory.usage_in_bytes", std::to_string(700 * kMiB) + "\n");
  t.write("cgroup/memory/job/42/memory.stat",
          "cache 300\ninactive_file 1\ntotal_inactive_file " + std::to_string(200 * kMiB) + "\n");
  LinuxMemorySource src(t.proc(), t.cgroup());
  EXPECT_FALSE(src.cgroup_v2());
  const MemoryReading r = src.read();
  EXPECT_TRUE(r.cgroup_limited);
  EXPECT_EQ(r.limit_bytes, 1024 * kMiB);
  EXPECT_EQ(r.usage_bytes, 700 * kMiB);
  EXPECT_EQ(r.reclaimable_bytes, 200 * kMiB);
  EXPECT_EQ(r.available_bytes, (1024 - 500) * kMiB);  // limit - (usage - inactive_file)
  EXPECT_DOUBLE_EQ(r.pressure_some_avg10, 1.5);
}

// Issue #21: page cache of the model file, active and inactive, charged to the cgroup by an
// earlier reader is reclaimable; anonymous, shmem, unevictable and kernel memory are not.
TEST(MemoryProbe, CgroupV1CountsFileCacheAsReclaimable) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:memory:/bench\n");
  const std::string d = "cgroup/memory/bench/";
  t.write(d + "memory.limit_in_bytes", std::to_string(557 * kMiB) + "\n");
  t.write(d + "memory.usage_in_bytes", std::to_string(520 * kMiB) + "\n");
  t.write(d + "memory.kmem.usage_in_bytes", std::to_string(15 * kMiB) + "\n");
  // The plain fields are this cgroup's alone and are ignored for the hierarchical totals.
  t.write(d + "memory.stat",
          "cache 1\nrss 1\nrss_huge 1\nshmem 1\nactive_file 1\n"
          "total_cache " + std::to_string(434 * kMiB) + "\n"
          "total_rss " + std::to_string(60 * kMiB) + "\n"
          "total_rss_huge " + std::to_string(20 * kMiB) + "\n"
          "total_shmem " + std::to_string(4 * kMiB) + "\n"
          "total_unevictable " + std::to_string(1 * kMiB) + "\n"
          "total_inactive_file " + std::to_string(120 * kMiB) + "\n"
          "total_active_file " + std::to_string(310 * kMiB) + "\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_TRUE(r.cgroup_limited);
  // rss already holds rss_huge: 60 + 4 + 1 + 15 (kmem).
  EXPECT_EQ(r.unreclaimable_bytes, 80 * kMiB);
  EXPECT_EQ(r.reclaimable_bytes, 440 * kMiB);
  EXPECT_EQ(r.available_bytes, (557 - 80) * kMiB);
  // The old arithmetic (usage - inactive_file) would have said 557 - 400 = 157 MiB.
}

TEST(MemoryProbe, CgroupV1PlainFieldsWithoutTotalsAndNoKmemFile) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:memory:/\n");
  t.write("cgroup/memory/memory.limit_in_bytes", std::to_string(1000 * kMiB));
  t.write("cgroup/memory/memory.usage_in_bytes", std::to_string(700 * kMiB));
  t.write("cgroup/memory/memory.stat", "rss " + std::to_string(100 * kMiB) + "\nunevictable " +
                                           std::to_string(50 * kMiB) + "\nactive_file " +
                                           std::to_string(550 * kMiB) + "\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_EQ(r.unreclaimable_bytes, 150 * kMiB);
  EXPECT_EQ(r.available_bytes, 850 * kMiB);
}

TEST(MemoryProbe, UnreclaimableNeverExceedsUsage) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:memory:/\n");
  t.write("cgroup/memory/memory.limit_in_bytes", std::to_string(1000 * kMiB));
  t.write("cgroup/memory/memory.usage_in_bytes", std::to_string(300 * kMiB));
  // mlocked anonymous pages are in both rss and unevictable.
  t.write("cgroup/memory/memory.stat", "total_rss " + std::to_string(250 * kMiB) + "\ntotal_unevictable " +
                                           std::to_string(200 * kMiB) + "\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_EQ(r.unreclaimable_bytes, 300 * kMiB);
  EXPECT_EQ(r.reclaimable_bytes, 0);
  EXPECT_EQ(r.available_bytes, 700 * kMiB);
}

TEST(MemoryProbe, CgroupV1PathMissingFallsBackToTheMountRoot) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:memory:/not/mounted/here\n");
  t.write("cgroup/memory/memory.limit_in_bytes", std::to_string(512 * kMiB));
  t.write("cgroup/memory/memory.usage_in_bytes", std::to_string(100 * kMiB));
  t.write("cgroup/memory/memory.stat", "total_inactive_file 0\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_TRUE(r.cgroup_limited);
  EXPECT_EQ(r.available_bytes, 412 * kMiB);
}

TEST(MemoryProbe, CgroupV2) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/app.slice/x\n");
  t.write("cgroup/app.slice/x/memory.max", std::to_string(2048 * kMiB) + "\n");
  t.write("cgroup/app.slice/x/memory.current", std::to_string(1000 * kMiB) + "\n");
  // Linux 5.18+: "kernel" sums the kernel's parts (which are then not added again).
  t.write("cgroup/app.slice/x/memory.stat",
          "anon " + std::to_string(200 * kMiB) + "\nfile " + std::to_string(700 * kMiB) +
              "\nkernel " + std::to_string(30 * kMiB) + "\nslab " + std::to_string(20 * kMiB) +
              "\nshmem " + std::to_string(8 * kMiB) + "\nunevictable " + std::to_string(2 * kMiB) +
              "\nactive_file " + std::to_string(600 * kMiB) + "\ninactive_file " +
              std::to_string(100 * kMiB) + "\n");
  LinuxMemorySource src(t.proc(), t.cgroup());
  EXPECT_TRUE(src.cgroup_v2());
  const MemoryReading r = src.read();
  EXPECT_TRUE(r.cgroup_limited);
  EXPECT_EQ(r.unreclaimable_bytes, 240 * kMiB);
  EXPECT_EQ(r.reclaimable_bytes, 760 * kMiB);
  EXPECT_EQ(r.available_bytes, (2048 - 240) * kMiB);
}

TEST(MemoryProbe, CgroupV2BeforeTheKernelFieldSumsItsParts) {
  FakeTree t;
  t.write("proc/self/cgroup", "0::/x\n");
  t.write("cgroup/x/memory.max", std::to_string(1024 * kMiB));
  t.write("cgroup/x/memory.current", std::to_string(900 * kMiB));
  t.write("cgroup/x/memory.stat",
          "anon " + std::to_string(100 * kMiB) + "\nslab_reclaimable 7\nslab " + std::to_string(10 * kMiB) +
              "\nkernel_stack " + std::to_string(1 * kMiB) + "\npagetables " + std::to_string(2 * kMiB) +
              "\npercpu " + std::to_string(3 * kMiB) + "\nsock " + std::to_string(4 * kMiB) +
              "\nvmalloc " + std::to_string(5 * kMiB) + "\nactive_file " + std::to_string(700 * kMiB) + "\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_EQ(r.unreclaimable_bytes, 125 * kMiB);
  EXPECT_EQ(r.available_bytes, (1024 - 125) * kMiB);
}

TEST(MemoryProbe, AvailableNeverExceedsMemAvailable) {
  FakeTree t;
  t.write("proc/meminfo", "MemTotal: 24000000 kB\nMemAvailable: 100000 kB\n");
  t.write("proc/self/cgroup", "0::/\n");
  t.write("cgroup/memory.max", std::to_string(8192 * kMiB));
  t.write("cgroup/memory.current", "0");
  t.write("cgroup/memory.stat", "inactive_file 0\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_EQ(r.available_bytes, 100000 * 1024);
}

TEST(MemoryProbe, UnlimitedCgroupUsesMemAvailable) {
  FakeTree t;
  t.write("proc/self/cgroup", "4:memory:/\n");
  t.write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  t.write("cgroup/memory/memory.usage_in_bytes", "5000\n");
  const MemoryReading r = LinuxMemorySource(t.proc(), t.cgroup()).read();
  EXPECT_FALSE(r.cgroup_limited);
  EXPECT_EQ(r.limit_bytes, 24000000LL * 1024);
  EXPECT_EQ(r.available_bytes, 20000000LL * 1024);
  t.write("proc/self/cgroup", "0::/\n");
  t.write("cgroup/memory.max", "max\n");
  EXPECT_FALSE(LinuxMemorySource(t.proc(), t.cgroup()).read().cgroup_limited);
}

TEST(MemoryProbe, ThisMachineGivesPlausibleNumbers) {
  const MemoryReading r = LinuxMemorySource().read();
  EXPECT_GT(r.limit_bytes, 0);
  EXPECT_GT(r.available_bytes, 0);
  EXPECT_LE(r.available_bytes, r.limit_bytes);
  EXPECT_GE(r.pressure_some_avg10, 0.0);
}

TEST(ByteSize, Parses) {
  EXPECT_EQ(parse_byte_size("1048576"), 1048576);
  EXPECT_EQ(parse_byte_size("512M"), 512 * kMiB);
  EXPECT_EQ(parse_byte_size("512MiB"), 512 * kMiB);
  EXPECT_EQ(parse_byte_size("4G"), 4096 * kMiB);
  EXPECT_EQ(parse_byte_size("1.5g"), 1536 * kMiB);
  EXPECT_EQ(parse_byte_size("2K"), 2048);
  EXPECT_EQ(parse_byte_size("10B"), 10);
  EXPECT_EQ(parse_byte_size(""), std::nullopt);
  EXPECT_EQ(parse_byte_size("G"), std::nullopt);
  EXPECT_EQ(parse_byte_size("12X"), std::nullopt);
  EXPECT_EQ(parse_byte_size("-5M"), std::nullopt);
  EXPECT_EQ(parse_byte_size("1e30"), std::nullopt);
  EXPECT_EQ(parse_byte_size("1.5"), std::nullopt);   // fractional bytes
  EXPECT_EQ(parse_byte_size("1..5G"), std::nullopt);
  EXPECT_EQ(parse_byte_size("16MB"), 16 * kMiB);
}

}  // namespace
}  // namespace spillway::engine
