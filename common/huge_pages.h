// Heap buffers backed by transparent huge pages where the kernel allows it.
//
// Weights are streamed through once per token; with 4 KiB pages every 4 KiB of a
// multi-gigabyte sweep costs a TLB miss (a two-level page walk inside a VM), which shows at
// the DRAM bound. Debian's default THP mode is `madvise`, so buffers of 2 MiB or more are
// aligned to 2 MiB and their whole huge pages advised MADV_HUGEPAGE. Where THP is off
// (`never`) the advice is a no-op and the buffer is an ordinary one.
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

// size bytes (at least one byte is allocated) aligned to `alignment` (a power of two, at
// least sizeof(void*)); nullptr when the allocation fails. A buffer of 2 MiB or more starts on
// a 2 MiB boundary and the whole huge pages inside it are advised; the part past the last
// whole huge page keeps 4 KiB pages. So a buffer costs its size, not its size rounded up to
// 2 MiB: rounding every expert-cache slot (4.5 MiB at the MoE cgroup test's shape) to 6 MiB
// put the cache a third above its plan, and the test's process was OOM-killed where the
// kernel granted the huge pages.
inline void* allocate_maybe_huge(uint64_t size, uint64_t alignment) {
  constexpr uint64_t kHugePage = uint64_t{2} << 20;
  const bool huge = size >= kHugePage && huge_pages_enabled();
  const uint64_t align = huge && alignment < kHugePage ? kHugePage : alignment;
  void* p = nullptr;
  if (::posix_memalign(&p, align, size == 0 ? 1 : size) != 0) return nullptr;
  if (huge) ::madvise(p, size / kHugePage * kHugePage, MADV_HUGEPAGE);
  return p;
}

}  // namespace spillway
