// Heap buffers backed by transparent huge pages where the kernel allows it.
//
// Weights are streamed through once per token; with 4 KiB pages every 4 KiB of a
// multi-gigabyte sweep costs a TLB miss (a two-level page walk inside a VM), which shows at
// the DRAM bound. Debian's default THP mode is `madvise`, so buffers of 2 MiB or more are
// aligned to 2 MiB, rounded up to whole huge pages and advised MADV_HUGEPAGE. Where THP is
// off (`never`) the advice is a no-op and the buffer is an ordinary one.
//
// SPILLWAY_HUGE_PAGES=0 in the environment turns the advice off (for A/B measurements and
// for kernels where THP misbehaves). Thread-safe; the returned memory is freed with
// std::free.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace spillway {

inline bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SPILLWAY_HUGE_PAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

// size bytes (at least one byte is allocated) aligned to `alignment` (a power of two); nullptr
// when the allocation fails. *allocated_bytes, when given, receives the bytes really reserved
// (size rounded up to the alignment, or to 2 MiB for huge-page buffers).
inline void* allocate_maybe_huge(uint64_t size, uint64_t alignment, uint64_t* allocated_bytes = nullptr) {
  constexpr uint64_t kHugePage = uint64_t{2} << 20;
  const bool huge = size >= kHugePage && huge_pages_enabled();
  const uint64_t align = huge && alignment < kHugePage ? kHugePage : alignment;
  const uint64_t bytes = size == 0 ? align : (size + align - 1) / align * align;
  void* p = std::aligned_alloc(align, bytes);
  if (p != nullptr && huge) ::madvise(p, bytes, MADV_HUGEPAGE);
  if (allocated_bytes != nullptr) *allocated_bytes = p != nullptr ? bytes : 0;
  return p;
}

}  // namespace spillway
