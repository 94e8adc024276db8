#include "engine/platform/read_mode_probe.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "engine/platform/direct_reader.h"

namespace spillway::engine {

namespace {

// Reads [begin, end) of the file through `reader` in chunk_bytes requests on `threads`
// threads; bytes per second, or the first error.
Result<double> timed_parallel_read(const DirectReader& reader, uint64_t begin, uint64_t end, int32_t threads,
                                   uint64_t chunk_bytes) {
  std::atomic<uint64_t> next{begin};
  std::vector<std::string> errors(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      AlignedBytes buffer = AlignedBytes::allocate(chunk_bytes + DirectReader::kAlignment);
      for (;;) {
        const uint64_t at = next.fetch_add(chunk_bytes);
        if (at >= end) return;
        auto r = reader.read(at, std::min(chunk_bytes, end - at), buffer.data.get());
        if (!r) {
          errors[t] = r.error().message;
          return;
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const std::string& e : errors) {
    if (!e.empty()) return Error{e};
  }
  return seconds > 0 ? static_cast<double>(end - begin) / seconds : 0.0;
}

// Pages of [begin, end) of the open file `fd` in the page cache (mincore over a mapping,
// which faults nothing in); 0 when they cannot be counted (mmap or mincore refused).
size_t cached_pages(int fd, uint64_t begin, uint64_t end) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = begin / page * page;
  const size_t length = static_cast<size_t>(end - first);
  if (length == 0) return 0;
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(first));
  if (map == MAP_FAILED) return 0;
  std::vector<unsigned char> resident((length + page - 1) / page);
  const bool ok = ::mincore(map, length, resident.data()) == 0;
  ::munmap(map, length);
  size_t n = 0;
  for (unsigned char r : resident) n += r & 1;
  return ok ? n : 0;
}

// Drops [begin, end) of `path` from the page cache. One DONTNEED is not enough after
// concurrent buffered reads: a reader's asynchronous readahead can bring back pages another
// reader already read and dropped, and pages still under that I/O are locked, so DONTNEED
// skips them. Repeats, 1 ms apart, until mincore finds none of the range, or gives up after
// 20 tries without fewer pages resident (tmpfs keeps every page: DONTNEED drops nothing there).
void evict_from_page_cache(const std::string& path, uint64_t begin, uint64_t end) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t fewest = SIZE_MAX;
  for (int tries_without_progress = 0; tries_without_progress < 20;) {
    ::posix_fadvise(fd, static_cast<off_t>(begin), static_cast<off_t>(end - begin), POSIX_FADV_DONTNEED);
    const size_t resident = cached_pages(fd, begin, end);
    if (resident == 0) break;
    tries_without_progress = resident < fewest ? 0 : tries_without_progress + 1;
    fewest = std::min(fewest, resident);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(fd);
}

}  // namespace

uint64_t device_read_ahead_bytes(const std::string& path) {
  constexpr uint64_t kDefault = 128 << 10;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || major(st.st_dev) == 0) return kDefault;
  const std::string dev = fmt::format("/sys/dev/block/{}:{}", major(st.st_dev), minor(st.st_dev));
  for (const char* queue : {"/queue/read_ahead_kb", "/../queue/read_ahead_kb"}) {
    std::ifstream in(dev + queue);
    uint64_t kb = 0;
    if (in >> kb) return kb << 10;
  }
  return kDefault;
}

uint64_t buffered_read_cache_bytes(const std::string& path, int32_t threads, uint64_t chunk_bytes) {
  const uint64_t bytes = static_cast<uint64_t>(std::max(threads, 1)) * chunk_bytes + 2 * device_read_ahead_bytes(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return std::min(bytes, static_cast<uint64_t>(st.st_size));
  return bytes;
}

bool prefer_direct(bool direct_available, double direct_bytes_per_second, double buffered_bytes_per_second) {
  return direct_available && direct_bytes_per_second > buffered_bytes_per_second * kDirectMargin;
}

std::string ReadModeChoice::summary() const {
  if (!direct_available) {
    return fmt::format("reads: buffered + DONTNEED (the filesystem refuses O_DIRECT), {:.0f} MB/s over {:.0f} MiB",
                       buffered_bytes_per_second / 1e6, probe_bytes / 1048576.0);
  }
  return fmt::format("reads: {} (measured at start over {:.0f} MiB: O_DIRECT {:.0f} MB/s, buffered + DONTNEED {:.0f} MB/s)",
                     direct ? "O_DIRECT" : "buffered + DONTNEED", probe_bytes / 1048576.0,
                     direct_bytes_per_second / 1e6, buffered_bytes_per_second / 1e6);
}

Result<ReadModeChoice> choose_read_mode(const std::string& path, uint64_t bytes, int32_t threads,
                                        uint64_t chunk_bytes, int32_t rounds) {
  threads = std::max(threads, 1);
  chunk_bytes = std::max<uint64_t>(chunk_bytes / DirectReader::kAlignment * DirectReader::kAlignment,
                                   DirectReader::kAlignment);
  ASSIGN_OR_RETURN(std::unique_ptr<DirectReader> direct, DirectReader::open(path, true));
  ASSIGN_OR_RETURN(std::unique_ptr<DirectReader> buffered, DirectReader::open(path, false));
  ReadModeChoice choice;
  const uint64_t size = direct->file_size();
  bytes = std::min(bytes, size);
  choice.probe_bytes = bytes;
  // The tail: the weights there are the least likely to have been read just now (the
  // header and the first tensors were, at load).
  const uint64_t begin = (size - bytes) / DirectReader::kAlignment * DirectReader::kAlignment;
  choice.direct_available = direct->direct();
  for (int32_t round = 0; round < std::max(rounds, 1); ++round) {
    if (choice.direct_available) {
      ASSIGN_OR_RETURN(const double d, timed_parallel_read(*direct, begin, size, threads, chunk_bytes));
      // A filesystem may accept O_DIRECT at open and refuse the reads (DirectReader falls
      // back to buffered reads for good then).
      choice.direct_available = direct->direct();
      if (choice.direct_available) choice.direct_bytes_per_second = std::max(choice.direct_bytes_per_second, d);
    }
    // Evict the range so the buffered round reads the device too (DirectReader drops what
    // it read after each request as well, but readahead can bring some of it back).
    evict_from_page_cache(path, begin, size);
    ASSIGN_OR_RETURN(const double b, timed_parallel_read(*buffered, begin, size, threads, chunk_bytes));
    choice.buffered_bytes_per_second = std::max(choice.buffered_bytes_per_second, b);
  }
  evict_from_page_cache(path, begin, size);
  choice.direct = prefer_direct(choice.direct_available, choice.direct_bytes_per_second,
                                choice.buffered_bytes_per_second);
  return choice;
}

}  // namespace spillway::engine
