// Picks how to read a model file at the device's bandwidth: O_DIRECT, or buffered reads
// followed by POSIX_FADV_DONTNEED (some virtual disks and filesystems serve buffered reads
// faster, e.g. when the host caches). Measured once at start on the file itself.
//
// Thread contract: a free function; it spawns and joins its own reader threads.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace spillway::engine {

struct ReadModeChoice {
  bool direct = true;                    // use O_DIRECT (else buffered + DONTNEED)
  bool direct_available = false;         // the filesystem accepts O_DIRECT reads of this file
  double direct_bytes_per_second = 0;    // best of the rounds; 0 when not available
  double buffered_bytes_per_second = 0;  // best of the rounds, the range evicted before each
  uint64_t probe_bytes = 0;              // bytes read per round and mode
  std::string summary() const;           // one line for the start-up log
};

// The decision from the figures: O_DIRECT where it is available and measured more than
// kDirectMargin (1.1x) faster than buffered reads; otherwise buffered + DONTNEED (a disk
// the host caches, where buffered reads win the probe). The margin was 1.5 while buffered
// decode beat O_DIRECT on the dev VM although this pure-read probe favoured O_DIRECT; since
// streaming reads row pieces (weight_residency.h), O_DIRECT decode won every arm measured,
// on AMD and Intel VMs, by 1.1-1.4x, where the probe measured it 1.2-1.75x faster
// (bench/README.md, "Read modes after the row pieces"). The page cache buffered reads use is
// bounded (requests in flight + two readahead windows, dropped after each request) and
// counted by the plan (buffered_read_cache_bytes).
inline constexpr double kDirectMargin = 1.1;
bool prefer_direct(bool direct_available, double direct_bytes_per_second, double buffered_bytes_per_second);

// The kernel's readahead window for the block device holding `path` (its queue's
// read_ahead_kb, or the whole disk's for a partition), in bytes; 128 KiB, the kernel's
// default, when sysfs does not say (virtual filesystems, no sysfs).
uint64_t device_read_ahead_bytes(const std::string& path);

// Page cache that buffered + DONTNEED reads of `path` hold at once, at most: the requests
// in flight (threads x chunk_bytes, dropped as each completes) and two readahead windows
// the kernel reads ahead of them (the current one and the asynchronous next), at most the
// file's size. Charged to the cgroup like anonymous memory until dropped, so the residency
// plan counts it.
uint64_t buffered_read_cache_bytes(const std::string& path, int32_t threads, uint64_t chunk_bytes);

// Reads the last `bytes` of `path` (at most its size) `rounds` times in each mode,
// alternating, with `threads` requests of `chunk_bytes` in flight (the streamer's shape);
// before every buffered round and at the end the range is dropped from the page cache
// (DONTNEED until none of it is resident), so both modes read the device and the probe
// leaves nothing cached. Picks by prefer_direct() on the best round of each mode.
// An Error when the file cannot be opened or read.
Result<ReadModeChoice> choose_read_mode(const std::string& path, uint64_t bytes, int32_t threads = 4,
                                        uint64_t chunk_bytes = 2ull << 20, int32_t rounds = 2);

}  // namespace spillway::engine
