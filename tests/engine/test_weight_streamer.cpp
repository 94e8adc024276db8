// WeightStreamer delivers exactly the file bytes of each unit, in the cyclic order the
// forward consumes them, with any number of slots, across schedule changes and out-of-order
// requests; read errors come back as values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/residency/weight_streamer.h"
#include "support/paths.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kA = DirectReader::kAlignment;

class WeightStreamerTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    path_ = fs::path(spillway::test_paths::binary()) / ("spillway-streamer-" + std::to_string(getpid()));
    std::mt19937_64 rng(7);
    bytes_.resize(2 * 1024 * 1024 + 77);
    for (auto& b : bytes_) b = static_cast<uint8_t>(rng());
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes_.data()), static_cast<std::streamsize>(bytes_.size()));
    auto reader = DirectReader::open(path_.string());
    ASSERT_TRUE(reader.ok());
    reader_ = std::move(*reader);
    // Six units of one to three unaligned ranges each.
    for (int32_t id = 0; id < 6; ++id) {
      StreamUnit u;
      u.id = id;
      const int n_ranges = 1 + id % 3;
      for (int r = 0; r < n_ranges; ++r) {
        UnitRange range;
        range.bytes = 1 + rng() % 100000;
        range.file_offset = rng() % (bytes_.size() - range.bytes);
        range.buffer_offset = u.buffer_bytes;
        u.buffer_bytes += (DirectReader::span_bytes(range.file_offset, range.bytes) + kA - 1) / kA * kA;
        u.ranges.push_back(range);
      }
      max_unit_bytes_ = std::max(max_unit_bytes_, u.buffer_bytes);
      units_.push_back(u);
    }
  }
  void TearDown() override { fs::remove(path_); }

  void expect_unit_bytes(const StreamUnit& u, const uint8_t* buffer) {
    for (const UnitRange& r : u.ranges) {
      const uint8_t* p = buffer + r.buffer_offset + r.file_offset % kA;
      ASSERT_EQ(std::memcmp(p, bytes_.data() + r.file_offset, r.bytes), 0) << "unit " << u.id;
    }
  }

  fs::path path_;
  std::vector<uint8_t> bytes_;
  std::unique_ptr<DirectReader> reader_;
  std::vector<StreamUnit> units_;
  uint64_t max_unit_bytes_ = 0;
};

TEST_P(WeightStreamerTest, CyclesThroughTheScheduleStepAfterStep) {
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  s.set_schedule({&units_[1], &units_[3], &units_[4]});
  uint64_t expected_bytes = 0;
  for (int step = 0; step < 5; ++step) {
    for (int id : {1, 3, 4}) {
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
      for (const auto& r : units_[id].ranges) expected_bytes += r.bytes;
    }
  }
  // Prefetch may have read ahead into the next cycle, never less than what was consumed.
  EXPECT_GE(s.stats().bytes_read, expected_bytes);
  EXPECT_GE(s.stats().units_read, 15u);
}

TEST_P(WeightStreamerTest, OutOfOrderRequestsAndScheduleChangesRestartCleanly) {
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  s.set_schedule({&units_[0], &units_[1], &units_[2], &units_[5]});
  std::mt19937 rng(3);
  for (int i = 0; i < 20; ++i) {
    const int id = std::vector<int>{0, 1, 2, 5}[rng() % 4];
    auto p = s.acquire(id);
    ASSERT_TRUE(p.ok()) << p.error().message;
    expect_unit_bytes(units_[id], *p);
    s.release(id);
  }
  s.set_schedule({&units_[4], &units_[2]});
  for (int i = 0; i < 10; ++i) {
    for (int id : {4, 2}) {
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
    }
  }
  EXPECT_FALSE(s.acquire(0).ok()) << "unit 0 is no longer scheduled";
}

TEST_P(WeightStreamerTest, TwoUnitsHeldAtOnce) {
  if (GetParam() < 2) GTEST_SKIP() << "needs two slots";
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  s.set_schedule({&units_[2], &units_[3]});
  for (int step = 0; step < 3; ++step) {
    auto a = s.acquire(2);
    auto b = s.acquire(3);
    ASSERT_TRUE(a.ok() && b.ok());
    expect_unit_bytes(units_[2], *a);
    expect_unit_bytes(units_[3], *b);
    s.release(2);
    s.release(3);
  }
}

TEST_P(WeightStreamerTest, ReadErrorsAreValuesNamingTheFile) {
  StreamUnit bad;
  bad.id = 9;
  bad.ranges.push_back({0, bytes_.size() - 10, 100, 0});  // past the end of the file
  bad.buffer_bytes = 2 * kA;
  WeightStreamer s({reader_.get()}, GetParam(), std::max<uint64_t>(max_unit_bytes_, bad.buffer_bytes));
  s.set_schedule({&units_[0], &bad});
  auto ok = s.acquire(0);
  ASSERT_TRUE(ok.ok());
  s.release(0);
  auto p = s.acquire(9);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find(path_.filename().string()), std::string::npos) << p.error().message;
  auto again = s.acquire(0);  // the streamer keeps working
  ASSERT_TRUE(again.ok());
  expect_unit_bytes(units_[0], *again);
  s.release(0);
}

// A demanded unit whose read fails is read once more (acquire's retry restarts the
// demand from it): the demanded units after it, possibly issued already, still come in
// order with their bytes, and the cycle resumes.
TEST_P(WeightStreamerTest, AFailedDemandedReadKeepsTheRestOfTheDemand) {
  StreamUnit bad;
  bad.id = 9;
  bad.ranges.push_back({0, bytes_.size() - 10, 100, 0});  // past the end of the file
  bad.buffer_bytes = 2 * kA;
  WeightStreamer s({reader_.get()}, GetParam(), std::max<uint64_t>(max_unit_bytes_, bad.buffer_bytes));
  s.set_schedule({&units_[0], &units_[1], &units_[2]});
  auto first = s.acquire(0);
  ASSERT_TRUE(first.ok()) << first.error().message;
  s.release(0);
  s.demand({&bad, &units_[5], &units_[3]});
  auto p = s.acquire(9);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find(path_.filename().string()), std::string::npos) << p.error().message;
  for (int id : {5, 3, 1, 2}) {
    auto q = s.acquire(id);
    ASSERT_TRUE(q.ok()) << id << ": " << q.error().message;
    expect_unit_bytes(units_[id], *q);
    s.release(id);
  }
}

TEST_P(WeightStreamerTest, DemandedUnitsComeBeforeTheCycleWhichThenResumes) {
  // Units 0..2 cycle (layers); 3..5 stand for experts the router chose, demanded per step.
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  s.set_schedule({&units_[0], &units_[1], &units_[2]});
  for (int step = 0; step < 3; ++step) {
    auto first = s.acquire(0);
    ASSERT_TRUE(first.ok()) << first.error().message;
    expect_unit_bytes(units_[0], *first);
    s.release(0);
    // The demand arrives while layer 1 may already be prefetched: demanded units first...
    s.demand({&units_[5], &units_[3]});
    for (int id : {5, 3}) {
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
    }
    // ...then the cycle where it was.
    for (int id : {1, 2}) {
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
    }
  }
  // Asking for a later demanded unit first skips the earlier one; an unknown id is an error.
  s.demand({&units_[3], &units_[4]});
  auto later = s.acquire(4);
  ASSERT_TRUE(later.ok()) << later.error().message;
  expect_unit_bytes(units_[4], *later);
  s.release(4);
  EXPECT_FALSE(s.acquire(3).ok());
}

TEST_P(WeightStreamerTest, AUnitInsideTheReadAheadWindowIsHandedOutWithoutARestart) {
  if (GetParam() < 3) GTEST_SKIP() << "needs units 1 and 2 read ahead while 0 is held";
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  s.set_schedule({&units_[0], &units_[1], &units_[2], &units_[3]});
  for (int step = 0; step < 4; ++step) {
    for (int id : {0, 2, 1, 3}) {  // 2 before 1: both were issued already
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
    }
  }
  EXPECT_EQ(s.stats().restarts, 0u);
  // A unit outside the window (3 when the stream is at 0) restarts the stream there.
  s.set_schedule({&units_[0], &units_[1], &units_[2], &units_[3], &units_[4], &units_[5]});
  auto far = s.acquire(5);
  ASSERT_TRUE(far.ok()) << far.error().message;
  expect_unit_bytes(units_[5], *far);
  s.release(5);
  EXPECT_EQ(s.stats().restarts, GetParam() >= 6 ? 0u : 1u);
}

TEST_P(WeightStreamerTest, HoldingEverySlotAndAskingForMoreIsAnErrorNotAHang) {
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_);
  std::vector<const StreamUnit*> all;
  for (const StreamUnit& u : units_) all.push_back(&u);
  s.set_schedule(all);
  const int held = GetParam();  // <= 5: units 0 .. held - 1, then unit `held` has no slot
  for (int id = 0; id < held; ++id) ASSERT_TRUE(s.acquire(id).ok());
  auto more = s.acquire(held);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.error().message.find("held"), std::string::npos) << more.error().message;
  for (int id = 0; id < held; ++id) s.release(id);
  auto p = s.acquire(held);
  ASSERT_TRUE(p.ok()) << p.error().message;
  expect_unit_bytes(units_[held], *p);
  s.release(held);
}

TEST_P(WeightStreamerTest, SmallRequestsOnSeveralThreadsDeliverTheSameBytesAndPrepareOnce) {
  StreamerOptions o;
  o.read_threads = 3;
  o.chunk_bytes = 3 * kA;  // ranges of up to 100 kB: up to 9 requests each
  std::atomic<int> prepared{0};
  // The prepare step runs after the whole unit landed: it checks the bytes and counts.
  WeightStreamer s({reader_.get()}, GetParam(), max_unit_bytes_,
                   [&](const StreamUnit& u, uint8_t* buffer) {
                     for (const UnitRange& r : u.ranges) {
                       if (std::memcmp(buffer + r.buffer_offset + r.file_offset % kA, bytes_.data() + r.file_offset,
                                       r.bytes) != 0) {
                         return;
                       }
                     }
                     prepared.fetch_add(1);
                   },
                   o);
  std::vector<const StreamUnit*> all;
  for (const StreamUnit& u : units_) all.push_back(&u);
  s.set_schedule(all);
  uint64_t expected_bytes = 0;
  for (int step = 0; step < 3; ++step) {
    for (int id = 0; id < 6; ++id) {
      auto p = s.acquire(id);
      ASSERT_TRUE(p.ok()) << p.error().message;
      expect_unit_bytes(units_[id], *p);
      s.release(id);
      for (const auto& r : units_[id].ranges) expected_bytes += r.bytes;
    }
  }
  EXPECT_GE(s.stats().bytes_read, expected_bytes);
  EXPECT_GE(prepared.load(), 18);
  EXPECT_EQ(s.stats().restarts, 0u);
}

TEST_P(WeightStreamerTest, LoadingAUnitInParallelRequestsGivesItsBytesOrTheError) {
  // GetParam() threads, requests of 3 blocks: the resident-layer load path.
  const StreamerOptions o{.read_threads = GetParam(), .chunk_bytes = 3 * kA};
  for (const StreamUnit& u : units_) {
    AlignedBytes buffer = AlignedBytes::allocate(u.buffer_bytes);
    ASSERT_TRUE(read_stream_unit({reader_.get()}, u, buffer.data.get(), o).ok());
    expect_unit_bytes(u, buffer.data.get());
    AlignedBytes single = AlignedBytes::allocate(u.buffer_bytes);
    ASSERT_TRUE(read_stream_unit({reader_.get()}, u, single.data.get()).ok());
    expect_unit_bytes(u, single.data.get());
  }
  StreamUnit bad;
  bad.ranges.push_back({0, bytes_.size() - 10, 100000, 0});  // past the end of the file
  bad.buffer_bytes = 30 * kA;
  AlignedBytes buffer = AlignedBytes::allocate(bad.buffer_bytes);
  const Status st = read_stream_unit({reader_.get()}, bad, buffer.data.get(), o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(path_.filename().string()), std::string::npos) << st.error().message;
}

// The buffered path (the read mode `auto` picks where buffered reads are not slower):
// unaligned ranges cut into requests of odd sizes on several threads through one buffered
// descriptor give exactly the file's bytes, cycle after cycle, in and out of order.
TEST_P(WeightStreamerTest, BufferedReadsOnSeveralThreadsDeliverExactBytesAcrossUnits) {
  auto buffered = DirectReader::open(path_.string(), /*prefer_direct=*/false);
  ASSERT_TRUE(buffered.ok());
  ASSERT_FALSE((*buffered)->direct());
  for (const uint64_t chunk : {kA, 5 * kA, uint64_t{1} << 20}) {
    WeightStreamer s({buffered->get()}, GetParam(), max_unit_bytes_, {},
                     StreamerOptions{.read_threads = 4, .chunk_bytes = chunk});
    std::vector<const StreamUnit*> all;
    for (const StreamUnit& u : units_) all.push_back(&u);
    s.set_schedule(all);
    for (int step = 0; step < 3; ++step) {
      for (int id = 0; id < 6; ++id) {
        auto p = s.acquire(id);
        ASSERT_TRUE(p.ok()) << p.error().message;
        expect_unit_bytes(units_[id], *p);
        s.release(id);
      }
    }
    EXPECT_EQ(s.stats().restarts, 0u);
    auto out_of_order = s.acquire(4);  // restarts the cycle there
    ASSERT_TRUE(out_of_order.ok());
    expect_unit_bytes(units_[4], *out_of_order);
    s.release(4);
  }
}

INSTANTIATE_TEST_SUITE_P(Slots, WeightStreamerTest, ::testing::Values(1, 2, 3, 5));

int64_t resident_bytes_of_this_process() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * sysconf(_SC_PAGESIZE);
}

// The residency plan counts the staging slots from the start: they are resident once the
// streamer exists, not at the first step (where another process in the cgroup may have taken
// the room meanwhile). Slots above glibc's largest mmap threshold (32 MiB), so that they are
// fresh pages, not heap pages some earlier test already touched.
TEST(WeightStreamerSlots, AreResidentOnceTheStreamerExists) {
  constexpr uint64_t kSlotBytes = uint64_t{40} << 20;
  constexpr int32_t kSlots = 2;
  const int64_t before = resident_bytes_of_this_process();
  WeightStreamer s({}, kSlots, kSlotBytes);
  const int64_t grown = resident_bytes_of_this_process() - before;
  EXPECT_GE(grown, int64_t{kSlots} * int64_t(kSlotBytes) * 9 / 10) << "resident growth " << (grown >> 20) << " MiB";
}

}  // namespace
}  // namespace spillway::engine
