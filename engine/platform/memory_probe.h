// Reads how much memory this process may use and how much is left: the cgroup limit and
// usage (v1 memory.limit_in_bytes / memory.usage_in_bytes, v2 memory.max /
// memory.current), what inside it the kernel cannot reclaim (memory.stat), the system's
// MemAvailable, and PSI memory pressure (/proc/pressure/memory, "some avg10").
//
// "Available" is what can still be allocated before the kernel would have to OOM-kill:
//   min(limit - unreclaimable, MemAvailable), unreclaimable = anonymous + shmem +
//   unevictable + kernel memory
// cgroup v1: total_rss (anonymous incl. transparent huge pages; total_rss_huge is part of
// it) + total_shmem + total_unevictable + memory.kmem.usage_in_bytes. v2: anon + shmem +
// unevictable + kernel (or, before Linux 5.18, its parts: slab, kernel_stack, pagetables,
// percpu, sock, vmalloc). File cache, active and inactive, is reclaimable: the kernel drops
// it before it OOM-kills, so a model file another reader left in the page cache of this
// cgroup does not shrink the budget (issue #21). Where memory.stat lacks the anonymous
// count (old kernels, odd mounts) it falls back to usage - inactive_file (kubelet's
// working set), which counts active file pages as used.
//
// Thread contract: read() may be called from any thread; implementations keep no state
// other than their paths.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace spillway::engine {

struct MemoryReading {
  int64_t limit_bytes = 0;        // cgroup limit, or MemTotal when no limit is set
  int64_t usage_bytes = 0;        // cgroup usage incl. page cache, or MemTotal - MemAvailable
  int64_t reclaimable_bytes = 0;  // usage the kernel can reclaim: file cache (active + inactive)
  int64_t unreclaimable_bytes = 0;  // anonymous + shmem + unevictable + kernel (cgroup only)
  int64_t available_bytes = 0;    // see the header comment
  double pressure_some_avg10 = 0; // PSI: % of the last 10 s some task stalled on memory (0-100)
  bool cgroup_limited = false;    // a finite cgroup limit below MemTotal applies
};

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  virtual MemoryReading read() const = 0;
};

// The real source. proc_root / sys_root are "/proc" and "/sys/fs/cgroup" except in tests,
// which point them at fake trees.
class LinuxMemorySource final : public MemorySource {
 public:
  explicit LinuxMemorySource(std::string proc_root = "/proc",
                             std::string cgroup_root = "/sys/fs/cgroup");
  MemoryReading read() const override;

  // The cgroup directory whose files are read ("" when none was found), for logs.
  const std::string& cgroup_dir() const { return cgroup_dir_; }
  bool cgroup_v2() const { return v2_; }

 private:
  std::string proc_root_;
  std::string cgroup_dir_;
  bool v2_ = false;
};

// Parses "512M", "4G", "1.5GiB", "16MB", "1048576" (bytes; K/M/G/T are powers of 1024, an
// optional B or iB follows). nullopt when malformed, negative, fractional bytes or >= 2^63.
std::optional<int64_t> parse_byte_size(std::string_view text);

}  // namespace spillway::engine
