// Buffers backed by transparent huge pages where the kernel allows it: allocate_maybe_huge
// (heap, freed with std::free), HugePageAllocator (the same for standard containers) and
// ZeroedPages (zeroed and lazily resident, from an anonymous mapping).
//
// Weights are streamed through once per token; with 4 KiB pages every 4 KiB of a
// multi-gigabyte sweep costs a TLB miss (a two-level page walk inside a VM), which shows at
// the DRAM bound. And every first write of a 4 KiB page is a page fault (3-15 us each on the
// development VM's hypervisor). Debian's default THP mode is `madvise`, so buffers of 2 MiB
// or more are aligned to 2 MiB and their whole huge pages advised MADV_HUGEPAGE. Where THP is
// off (`never`) the advice is a no-op and the buffer is an ordinary one.
//
// SPILLWAY_HUGE_PAGES=0 in the environment turns the advice off (for A/B measurements and
// for kernels where THP misbehaves). Thread-safe.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

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

// std::allocator's contract on allocate_maybe_huge: for containers that are written whole once
// allocated (a recurrent-state snapshot: ~20 MB at the Qwen3.5-0.8B shape, ~5,000 page faults
// on 4 KiB pages). Throws std::bad_alloc when the allocation fails.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly
  T* allocate(size_t n) {
    void* p = allocate_maybe_huge(uint64_t{n} * sizeof(T), alignof(T) < 64 ? 64 : alignof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
};

// `size` bytes of zeros from an anonymous mapping: nothing is resident until written (as a
// large calloc gives them), and a buffer of 2 MiB or more starts on a 2 MiB boundary with its
// whole huge pages advised, so its first write faults once per 2 MiB instead of once per
// 4 KiB. For buffers that are written whole once in use (a hybrid sequence's recurrent state:
// ~40 MB a slot at the Qwen3.5-0.8B shape took ~115 ms of page faults on 4 KiB pages on the
// development VM, ~4 ms on huge pages), not for pools used piecemeal, where a 2 MiB page
// would make resident what 4 KiB pages leave untouched. Move-only; unmaps on destruction.
// Throws std::bad_alloc when the mapping fails.
class ZeroedPages {
 public:
  ZeroedPages() = default;
  explicit ZeroedPages(uint64_t size) : size_(size) {
    constexpr uint64_t kHugePage = uint64_t{2} << 20;
    const bool huge = size >= kHugePage && huge_pages_enabled();
    map_size_ = (size == 0 ? 1 : size) + (huge ? kHugePage : 0);
    map_ = ::mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      throw std::bad_alloc();
    }
    const auto base = reinterpret_cast<uintptr_t>(map_);
    data_ = reinterpret_cast<void*>(huge ? (base + kHugePage - 1) / kHugePage * kHugePage : base);
    if (huge) ::madvise(data_, size / kHugePage * kHugePage, MADV_HUGEPAGE);
  }
  ZeroedPages(ZeroedPages&& o) noexcept { swap(o); }
  ZeroedPages& operator=(ZeroedPages&& o) noexcept {
    ZeroedPages(std::move(o)).swap(*this);
    return *this;
  }
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;
  ~ZeroedPages() {
    if (map_) ::munmap(map_, map_size_);
  }

  void* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void swap(ZeroedPages& o) noexcept {
    std::swap(map_, o.map_);
    std::swap(map_size_, o.map_size_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }

  void* map_ = nullptr;  // the whole mapping (page-aligned, up to 2 MiB more than size)
  uint64_t map_size_ = 0;
  void* data_ = nullptr;  // inside it: 2 MiB-aligned where huge, else map_
  uint64_t size_ = 0;
};

}  // namespace spillway
