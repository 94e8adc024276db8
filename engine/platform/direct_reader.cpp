#include "engine/platform/direct_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "common/huge_pages.h"
#include "engine/platform/read_fault_injection.h"

namespace spillway::engine {

namespace {
constexpr uint64_t kA = DirectReader::kAlignment;
uint64_t align_down(uint64_t x) { return x / kA * kA; }
uint64_t align_up(uint64_t x) { return (x + kA - 1) / kA * kA; }
}  // namespace

uint64_t DirectReader::span_bytes(uint64_t offset, uint64_t size) {
  return align_up(offset + size) - align_down(offset);
}

Result<std::unique_ptr<DirectReader>> DirectReader::open(const std::string& path,
                                                         bool prefer_direct) {
  std::unique_ptr<DirectReader> r(new DirectReader());
  r->path_ = path;
  r->buffered_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r->buffered_fd_ < 0) {
    return Error{fmt::format("{}: cannot open: {}", path, std::strerror(errno))};
  }
  struct stat st {};
  if (::fstat(r->buffered_fd_, &st) != 0) {
    return Error{fmt::format("{}: cannot stat: {}", path, std::strerror(errno))};
  }
  r->file_size_ = static_cast<uint64_t>(st.st_size);
  if (prefer_direct) {
    r->direct_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);  // -1: refused
  }
  return r;
}

DirectReader::~DirectReader() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (buffered_fd_ >= 0) ::close(buffered_fd_);
}

int DirectReader::pread_all(int fd, uint64_t offset, uint64_t size, uint8_t* dst, uint64_t* got) {
  uint64_t& done = *got;
  done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, dst + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;  // end of file: the aligned span may extend past it
    done += static_cast<uint64_t>(n);
  }
  return 0;
}

Result<const uint8_t*> DirectReader::read(uint64_t offset, uint64_t size, uint8_t* dst) const {
  if (offset > file_size_ || size > file_size_ - offset) {
    return Error{fmt::format("{}: range of {} bytes at offset {} is past the end of the file ({} "
                             "bytes)",
                             path_, size, offset, file_size_)};
  }
  const uint64_t start = align_down(offset);
  // Never ask for bytes past the end of the file: direct reads there are short anyway.
  const uint64_t span = std::min(align_up(offset + size), align_up(file_size_)) - start;
  const uint8_t* result = dst + (offset - start);
  // The file ended before the range did: it shrank since it was opened.
  const uint64_t needed = offset + size - start;
  auto short_read = [&](uint64_t got) {
    return Error{fmt::format("{}: read of {} bytes at offset {} ended after {}: the file is shorter than when "
                             "it was opened ({} bytes)",
                             path_, span, start, got, file_size_)};
  };
  uint64_t got = 0;
  switch (injected_read_fault()) {  // debug only: read_fault_injection.h (off: one flag load)
    case ReadFault::None: break;
    case ReadFault::Eio:
      return Error{fmt::format("{}: read of {} bytes at offset {} failed: {} (injected fault)", path_, span,
                               start, std::strerror(EIO))};
    case ReadFault::Short: {
      const int err = pread_all(buffered_fd_, start, span / 2, dst, &got);
      if (err != 0) {
        return Error{fmt::format("{}: read of {} bytes at offset {} failed: {}", path_, span, start,
                                 std::strerror(err))};
      }
      return Error{short_read(got).message + " (injected fault)"};
    }
  }
  if (direct_fd_ >= 0 && !direct_refused_.load(std::memory_order_relaxed)) {
    const int err = pread_all(direct_fd_, start, span, dst, &got);
    if (err == 0) return got >= needed ? Result<const uint8_t*>(result) : Result<const uint8_t*>(short_read(got));
    // EINVAL: the filesystem accepted O_DIRECT at open but refuses the reads: fall back
    // for good.
    if (err != EINVAL) {
      return Error{fmt::format("{}: read of {} bytes at offset {} failed: {}", path_, span, start,
                               std::strerror(err))};
    }
    direct_refused_.store(true, std::memory_order_relaxed);
  }
  const int err = pread_all(buffered_fd_, start, span, dst, &got);
  if (err != 0) {
    return Error{fmt::format("{}: read of {} bytes at offset {} failed: {}", path_, span, start,
                             std::strerror(err))};
  }
  if (got < needed) return short_read(got);
  ::posix_fadvise(buffered_fd_, static_cast<off_t>(start), static_cast<off_t>(span),
                  POSIX_FADV_DONTNEED);
  return result;
}

Status DirectReader::read_cached(uint64_t offset, uint64_t size, uint8_t* dst) const {
  if (offset > file_size_ || size > file_size_ - offset) {
    return Error{fmt::format("{}: range of {} bytes at offset {} is past the end of the file ({} bytes)", path_,
                             size, offset, file_size_)};
  }
  const ReadFault fault = injected_read_fault();  // debug only: read_fault_injection.h
  const char* injected = fault == ReadFault::None ? "" : " (injected fault)";
  uint64_t got = 0;
  const int err = fault == ReadFault::Eio ? EIO
                                          : pread_all(buffered_fd_, offset, fault == ReadFault::Short ? size / 2 : size,
                                                      dst, &got);
  if (err != 0) {
    return Error{fmt::format("{}: read of {} bytes at offset {} failed: {}{}", path_, size, offset,
                             std::strerror(err), injected)};
  }
  if (got < size) {
    return Error{fmt::format("{}: read of {} bytes at offset {} ended after {}: the file is shorter than when it "
                             "was opened ({} bytes){}",
                             path_, size, offset, got, file_size_, injected)};
  }
  return {};
}

void DirectReader::drop_cached() const { ::posix_fadvise(buffered_fd_, 0, 0, POSIX_FADV_DONTNEED); }

void AlignedBytes::Free::operator()(uint8_t* p) const { std::free(p); }

AlignedBytes AlignedBytes::allocate(uint64_t size, uint64_t alignment) {
  AlignedBytes b;
  void* p = allocate_maybe_huge(size, alignment);
  if (!p) throw std::bad_alloc();
  b.data.reset(static_cast<uint8_t*>(p));
  b.size = size;
  return b;
}

}  // namespace spillway::engine
