// DirectReader returns exactly the bytes of the file for arbitrary (unaligned) ranges,
// through O_DIRECT and through the buffered fallback, and leaves nothing in the page cache.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "engine/platform/direct_reader.h"
#include "engine/platform/read_mode_probe.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;

class DirectReaderTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    // Next to the build tree rather than /tmp: /tmp may be tmpfs, which refuses O_DIRECT.
    path_ = fs::path(spillway::test_paths::binary()) / ("spillway-direct-" + std::to_string(getpid()));
    std::mt19937_64 rng(1);
    bytes_.resize(3 * 1024 * 1024 + 1234);  // not a multiple of the block size
    for (auto& b : bytes_) b = static_cast<uint8_t>(rng());
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes_.data()), static_cast<std::streamsize>(bytes_.size()));
    drop_from_page_cache();
  }
  void TearDown() override { fs::remove(path_); }

  void drop_from_page_cache() {
    const int fd = ::open(path_.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }

  // Pages of the file currently in the page cache (mincore over a fresh mapping).
  size_t cached_pages() {
    const int fd = ::open(path_.c_str(), O_RDONLY);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* map = ::mmap(nullptr, bytes_.size(), PROT_READ, MAP_SHARED, fd, 0);
    std::vector<unsigned char> vec((bytes_.size() + page - 1) / page);
    ::mincore(map, bytes_.size(), vec.data());
    ::munmap(map, bytes_.size());
    ::close(fd);
    size_t n = 0;
    for (unsigned char v : vec) n += v & 1;
    return n;
  }

  fs::path path_;
  std::vector<uint8_t> bytes_;
};

TEST_P(DirectReaderTest, ReadsExactBytesOfUnalignedRanges) {
  auto reader = DirectReader::open(path_.string(), GetParam());
  ASSERT_TRUE(reader.ok()) << reader.error().message;
  std::mt19937_64 rng(2);
  const uint64_t n = bytes_.size();
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, n}, {0, 1}, {n - 1, 1}, {4095, 2},
                                                       {4096, 4096}, {n - 5000, 5000}};
  for (int i = 0; i < 50; ++i) {
    const uint64_t off = rng() % n;
    ranges.emplace_back(off, 1 + rng() % (n - off));
  }
  for (auto [off, size] : ranges) {
    AlignedBytes buf = AlignedBytes::allocate(DirectReader::span_bytes(off, size));
    auto p = (*reader)->read(off, size, buf.data.get());
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_EQ(std::memcmp(*p, bytes_.data() + off, size), 0) << "offset " << off << " size " << size;
  }
}

TEST_P(DirectReaderTest, LeavesNothingInThePageCache) {
  auto reader = DirectReader::open(path_.string(), GetParam());
  ASSERT_TRUE(reader.ok());
  const size_t before = cached_pages();
  AlignedBytes buf = AlignedBytes::allocate(DirectReader::span_bytes(0, bytes_.size()));
  ASSERT_TRUE((*reader)->read(0, bytes_.size(), buf.data.get()).ok());
  // The whole file is ~770 pages; allow a handful of pages of noise.
  EXPECT_LE(cached_pages(), before + 4) << "direct=" << (*reader)->direct();
}

TEST_P(DirectReaderTest, RangePastTheEndIsAnErrorNamingTheFile) {
  auto reader = DirectReader::open(path_.string(), GetParam());
  ASSERT_TRUE(reader.ok());
  AlignedBytes buf = AlignedBytes::allocate(DirectReader::span_bytes(bytes_.size() - 10, 20));
  auto p = (*reader)->read(bytes_.size() - 10, 20, buf.data.get());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find(path_.filename().string()), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Paths, DirectReaderTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Direct" : "Buffered"; });

// The start-up measurement of the read mode: both modes read the file's tail (no bytes
// left in the page cache by the buffered rounds), the choice follows the figures, and the
// log line names it.
TEST_P(DirectReaderTest, TheReadModeProbeMeasuresBothModesAndLeavesNoCache) {
  if (!GetParam()) GTEST_SKIP() << "one instance is enough";
  auto choice = choose_read_mode(path_.string(), 1 << 20, 3, 64 << 10, 2);
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  EXPECT_EQ(choice->probe_bytes, 1u << 20);
  auto reader = DirectReader::open(path_.string());
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(choice->direct_available, (*reader)->direct());
  EXPECT_GT(choice->buffered_bytes_per_second, 0);
  if (choice->direct_available) {
    EXPECT_GT(choice->direct_bytes_per_second, 0);
    EXPECT_EQ(choice->direct, prefer_direct(true, choice->direct_bytes_per_second, choice->buffered_bytes_per_second));
  } else {
    EXPECT_FALSE(choice->direct);
  }
  const std::string line = choice->summary();
  EXPECT_NE(line.find(choice->direct ? "reads: O_DIRECT" : "reads: buffered"), std::string::npos) << line;
  EXPECT_EQ(cached_pages(), 0u);
  // A whole file smaller than the probe is read once per round; a missing one is an error.
  auto whole = choose_read_mode(path_.string(), 1ull << 30);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->probe_bytes, bytes_.size());
  EXPECT_FALSE(choose_read_mode("/nonexistent/spillway-model.gguf", 1 << 20).ok());
}

// The decision: buffered reads (kernel readahead) unless O_DIRECT measured clearly faster;
// never O_DIRECT where the filesystem refuses it.
TEST(ReadModeChoice, BufferedUnlessDirectIsClearlyFaster) {
  EXPECT_FALSE(prefer_direct(true, 1.0e9, 1.0e9));                    // a tie: buffered
  EXPECT_FALSE(prefer_direct(true, 1.0e9, 2.0e9));                    // buffered faster
  EXPECT_FALSE(prefer_direct(true, 1.0e9 * kDirectMargin, 1.0e9));    // within the margin
  EXPECT_TRUE(prefer_direct(true, 1.0e9 * kDirectMargin * 1.01, 1.0e9));
  EXPECT_FALSE(prefer_direct(false, 9.0e9, 1.0e9));                   // not available
}

// The page cache buffered streaming may hold: the requests in flight plus two of the
// device's readahead windows (its sysfs read_ahead_kb), at most the file.
TEST_P(DirectReaderTest, TheBufferedReadCacheIsRequestsInFlightPlusTwoReadaheadWindows) {
  if (!GetParam()) GTEST_SKIP() << "one instance is enough";
  const uint64_t ra = device_read_ahead_bytes(path_.string());
  EXPECT_GE(ra, 4096u);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  std::ifstream sysfs("/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) +
                      "/queue/read_ahead_kb");
  uint64_t kb = 0;
  if (sysfs >> kb) {
    EXPECT_EQ(ra, kb * 1024);
  }
  // At most the file (3 MiB here): a readahead window does not read past its end.
  EXPECT_EQ(buffered_read_cache_bytes(path_.string(), 4, 2 << 20), std::min<uint64_t>(4 * (2u << 20) + 2 * ra, bytes_.size()));
  EXPECT_EQ(buffered_read_cache_bytes(path_.string(), 1, 4096), std::min<uint64_t>(4096 + 2 * ra, bytes_.size()));
  EXPECT_EQ(device_read_ahead_bytes("/nonexistent/spillway-model.gguf"), 128u << 10);
}

TEST(DirectReader, MissingFileIsAnError) {
  auto r = DirectReader::open("/nonexistent/spillway-model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("spillway-model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace spillway::engine
