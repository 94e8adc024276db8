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

// Reads the last `bytes` of `path` (at most its size) `rounds` times in each mode,
// alternating, with `threads` requests of `chunk_bytes` in flight (the streamer's shape);
// before every buffered round the range is dropped from the page cache (DONTNEED), so
// both modes read the device. Picks O_DIRECT unless buffered reads were more than 1.25x
// faster. An Error when the file cannot be opened or read.
Result<ReadModeChoice> choose_read_mode(const std::string& path, uint64_t bytes, int32_t threads = 4,
                                        uint64_t chunk_bytes = 2ull << 20, int32_t rounds = 2);

}  // namespace spillway::engine
