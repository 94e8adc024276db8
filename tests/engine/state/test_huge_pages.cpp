// common/huge_pages.h: ZeroedPages gives zeroed, writable memory that is not resident until
// written, on a 2 MiB boundary where it may take huge pages; HugePageAllocator's containers
// hold their values and start on the boundaries the header promises.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <utility>
#include <vector>

#include "common/huge_pages.h"

namespace spillway {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

uint64_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Resident bytes of this process (/proc/self/statm, second field, in pages).
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

TEST(ZeroedPages, IsZeroedWritableAndAligned) {
  for (const uint64_t size : {uint64_t{100}, 5 * kMiB + 123}) {
    ZeroedPages pages(size);
    ASSERT_NE(pages.data(), nullptr);
    EXPECT_EQ(pages.size(), size);
    const uint64_t alignment = size >= 2 * kMiB && huge_pages_enabled() ? 2 * kMiB : 4096;
    EXPECT_EQ(address(pages.data()) % alignment, 0u) << size;
    auto* bytes = static_cast<uint8_t*>(pages.data());
    for (uint64_t i = 0; i < size; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i << " of " << size;
    for (uint64_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    for (uint64_t i = 0; i < size; i += 4093) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i * 7 + 1));
    ASSERT_EQ(bytes[size - 1], static_cast<uint8_t>((size - 1) * 7 + 1));
  }
}

TEST(ZeroedPages, NothingIsResidentUntilWritten) {
  const uint64_t before = resident_bytes();
  ZeroedPages pages(256 * kMiB);
  const uint64_t after_map = resident_bytes();
  EXPECT_LT(after_map, before + 16 * kMiB) << "mapping 256 MiB made it resident";
  auto* bytes = static_cast<uint8_t*>(pages.data());
  for (uint64_t i = 0; i < 64 * kMiB; i += 4096) bytes[i] = 1;  // a quarter of it
  const uint64_t after_write = resident_bytes();
  EXPECT_GE(after_write, after_map + 60 * kMiB) << "the written quarter is resident";
  EXPECT_LT(after_write, after_map + 100 * kMiB) << "only the written quarter (a sanitizer adds its shadow)";
}

TEST(ZeroedPages, MovesOwnership) {
  ZeroedPages a(3 * kMiB);
  void* data = a.data();
  static_cast<uint8_t*>(data)[42] = 9;
  ZeroedPages b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 3 * kMiB);
  ZeroedPages c;
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
  EXPECT_EQ(static_cast<uint8_t*>(c.data())[42], 9);
}

TEST(HugePageAllocator, HoldsValuesOnItsBoundaries) {
  std::vector<float, HugePageAllocator<float>> big(3 * kMiB / sizeof(float) + 5);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  const uint64_t alignment = huge_pages_enabled() ? 2 * kMiB : 64;
  EXPECT_EQ(address(big.data()) % alignment, 0u);
  for (size_t i = 0; i < big.size(); i += 997) ASSERT_EQ(big[i], static_cast<float>(i));
  std::vector<float, HugePageAllocator<float>> small(10, 2.5f);
  EXPECT_EQ(address(small.data()) % 64, 0u);
  small.assign(big.begin(), big.begin() + 1000);  // grows: a reallocation through the allocator
  EXPECT_EQ(small[999], 999.0f);
}

}  // namespace
}  // namespace spillway
