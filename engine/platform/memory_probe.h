// Reads how much memory this process may use and how much is left: the cgroup limit and
// usage (v1 memory.limit_in_bytes / memory.usage_in_bytes, v2 memory.max /
// memory.current), the reclaimable page cache inside it (inactive file pages), the
// system's MemAvailable, and PSI memory pressure (/proc/pressure/memory, "some avg10").
//
// "Available" is what can still be allocated without the kernel having to evict anything
// it cannot drop cheaply: min(limit - (usage - inactive_file), MemAvailable). This is the
// working-set arithmetic kubelet and docker use; page cache counts against a cgroup limit
// (NOTES.md), so an mmap'd model looks "used" until it is reclaimed.
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
  int64_t reclaimable_bytes = 0;  // inactive file pages inside the cgroup
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
