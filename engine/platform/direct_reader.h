// Reads byte ranges of a model file into caller-owned buffers without leaving the bytes in
// the page cache (page cache counts against a cgroup's memory limit, NOTES.md): O_DIRECT
// with block-aligned requests, or, where the filesystem refuses O_DIRECT (tmpfs, some
// overlay setups), buffered pread followed by posix_fadvise(POSIX_FADV_DONTNEED).
//
// Thread contract: read() is safe to call from several threads at once (pread has no file
// position); the usual caller is the weight-streaming I/O thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace spillway::engine {

class DirectReader {
 public:
  // Alignment of destination buffers, file offsets and lengths of direct reads.
  static constexpr uint64_t kAlignment = 4096;

  // Bytes a destination buffer needs to receive [offset, offset + size).
  static uint64_t span_bytes(uint64_t offset, uint64_t size);

  // prefer_direct = false forces the buffered + DONTNEED path (tests, benchmarks).
  static Result<std::unique_ptr<DirectReader>> open(const std::string& path,
                                                    bool prefer_direct = true);
  ~DirectReader();
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;

  // Reads [offset, offset + size) into dst, which must be kAlignment-aligned and hold
  // span_bytes(offset, size) bytes. Returns where the byte at `offset` landed inside dst.
  Result<const uint8_t*> read(uint64_t offset, uint64_t size, uint8_t* dst) const;

  // Reads exactly [offset, offset + size) into dst (any alignment) through the page cache,
  // and leaves the pages there: for small ranges read again and again (token-embedding
  // rows), whose cache the kernel reclaims under pressure like any file cache.
  Status read_cached(uint64_t offset, uint64_t size, uint8_t* dst) const;

  // Drops the whole file from the page cache (POSIX_FADV_DONTNEED; pages some process maps
  // stay). For bytes other paths left there, e.g. the readahead around tensors read through
  // a mapping.
  void drop_cached() const;

  // Whether reads bypass the page cache through O_DIRECT (else buffered + DONTNEED).
  bool direct() const { return direct_fd_ >= 0 && !direct_refused_.load(); }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }

 private:
  DirectReader() = default;
  // Reads until size bytes or end of file (*got: the bytes read); 0 or an errno value.
  static int pread_all(int fd, uint64_t offset, uint64_t size, uint8_t* dst, uint64_t* got);

  std::string path_;
  int direct_fd_ = -1;    // O_DIRECT descriptor, or -1
  int buffered_fd_ = -1;  // always open: the fallback, and the unaligned tail on some kernels
  uint64_t file_size_ = 0;
  mutable std::atomic<bool> direct_refused_{false};
};

// An aligned heap buffer for DirectReader destinations; buffers of 2 MiB or more are
// advised onto transparent huge pages (common/huge_pages.h).
struct AlignedBytes {
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data;
  uint64_t size = 0;
  static AlignedBytes allocate(uint64_t size, uint64_t alignment = DirectReader::kAlignment);
};

}  // namespace spillway::engine
