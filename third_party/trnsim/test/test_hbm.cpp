// The HBM allocator: alignment, first-fit reuse, coalescing, out-of-memory reporting, and the
// promise that reserving simulated HBM does not cost host RAM until it is touched.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "trnsim/error.h"
#include "trnsim/hbm.h"
#include "trnsim/instance.h"

namespace trnsim {
namespace {

// Resident set size of this process in bytes, from /proc/self/status.
uint64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * kKiB;
  }
  ADD_FAILURE() << "no VmRSS in /proc/self/status";
  return 0;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(Hbm, BlocksAreAlignedAndSizesRoundUp) {
  Hbm hbm(0, 1 * kMiB);
  uint64_t expected_used = 0;
  for (uint64_t bytes : {1, 3, 511, 512, 513, 1000, 4096}) {
    void* p = hbm.allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(addr(p) % Hbm::kAlignment, 0u) << bytes;
    expected_used += (bytes + Hbm::kAlignment - 1) / Hbm::kAlignment * Hbm::kAlignment;
    EXPECT_EQ(hbm.used(), expected_used) << bytes;
  }
  EXPECT_EQ(hbm.free_bytes(), hbm.capacity() - expected_used);
}

TEST(Hbm, ReleaseReturnsEverything) {
  Hbm hbm(0, 1 * kMiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(hbm.allocate(1000 * (i + 1)));
  for (void* p : blocks) {
    EXPECT_TRUE(hbm.contains(p));
    hbm.release(p);
  }
  EXPECT_EQ(hbm.used(), 0u);
  EXPECT_EQ(hbm.free_bytes(), hbm.capacity());
  EXPECT_EQ(hbm.largest_free_block(), hbm.capacity());
}

TEST(Hbm, ReusesReleasedBlock) {
  // First fit: a released low block is the first candidate for the next request that fits.
  Hbm hbm(0, 1 * kMiB);
  void* a = hbm.allocate(4096);
  void* b = hbm.allocate(4096);
  EXPECT_NE(a, b);
  hbm.release(a);
  EXPECT_EQ(hbm.allocate(2048), a);
  EXPECT_EQ(hbm.used(), 4096u + 2048u);
}

TEST(Hbm, CoalescingLetsLargeBlockFitAfterFragmentation) {
  constexpr int kBlocks = 8;
  Hbm hbm(0, kBlocks * Hbm::kAlignment);
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) blocks.push_back(hbm.allocate(Hbm::kAlignment));
  EXPECT_THROW(hbm.allocate(1), OutOfMemory);

  // Free every other block: half the memory is free but no two free blocks touch.
  for (int i = 1; i < kBlocks; i += 2) hbm.release(blocks[i]);
  EXPECT_EQ(hbm.free_bytes(), hbm.capacity() / 2);
  EXPECT_EQ(hbm.largest_free_block(), Hbm::kAlignment);
  EXPECT_THROW(hbm.allocate(2 * Hbm::kAlignment), OutOfMemory);

  // Freeing block 0 merges with its right neighbour; the others merge on both sides.
  hbm.release(blocks[0]);
  EXPECT_EQ(hbm.largest_free_block(), 2 * Hbm::kAlignment);
  for (int i = 2; i < kBlocks; i += 2) hbm.release(blocks[i]);
  EXPECT_EQ(hbm.largest_free_block(), hbm.capacity());

  void* all = hbm.allocate(hbm.capacity());
  EXPECT_EQ(all, blocks[0]);
}

TEST(Hbm, OutOfMemoryCarriesNumbers) {
  Hbm hbm(3, 1 * kMiB);
  void* held = hbm.allocate(256 * kKiB);
  try {
    hbm.allocate(1 * kMiB);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.device(), 3);
    EXPECT_EQ(e.requested(), 1 * kMiB);
    EXPECT_EQ(e.free_bytes(), 768 * kKiB);
    EXPECT_EQ(e.capacity(), 1 * kMiB);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("neuron:3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("768.00 KiB"), std::string::npos) << msg;
  }
  // A failed request leaves the allocator untouched and usable.
  EXPECT_EQ(hbm.used(), 256 * kKiB);
  void* more = hbm.allocate(512 * kKiB);
  EXPECT_NE(more, nullptr);
  hbm.release(more);
  hbm.release(held);
  EXPECT_EQ(hbm.used(), 0u);
}

TEST(Hbm, OutOfMemoryIsAnError) {
  // Callers that only catch trnsim::Error must still see allocation failures.
  Hbm hbm(0, 4096);
  EXPECT_THROW(hbm.allocate(4097), Error);
}

TEST(Hbm, HugeRequestsThrowInsteadOfWrapping) {
  // Rounding a size near 2^64 up to the alignment must not wrap to a tiny block.
  Hbm hbm(0, 1 * kMiB);
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  for (uint64_t bytes : {max, max - Hbm::kAlignment + 2, hbm.capacity() + 1}) {
    try {
      hbm.allocate(bytes);
      FAIL() << "allocate(" << bytes << ") should not succeed";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(e.requested(), bytes);
    }
  }
  EXPECT_EQ(hbm.used(), 0u);
  EXPECT_EQ(hbm.largest_free_block(), hbm.capacity());
}

TEST(Hbm, ZeroBytesGivesNullptr) {
  Hbm hbm(0, 1 * kMiB);
  EXPECT_EQ(hbm.allocate(0), nullptr);
  EXPECT_EQ(hbm.used(), 0u);
  hbm.release(nullptr);  // like free(nullptr)
  EXPECT_EQ(hbm.used(), 0u);
}

TEST(Hbm, ReleasingForeignPointerThrows) {
  Hbm hbm(0, 1 * kMiB), other(1, 1 * kMiB);
  char* p = static_cast<char*>(hbm.allocate(4096));
  int on_stack = 0;
  auto on_heap = std::make_unique<int>(0);
  EXPECT_THROW(hbm.release(&on_stack), Error);
  EXPECT_THROW(hbm.release(on_heap.get()), Error);
  EXPECT_THROW(hbm.release(p + Hbm::kAlignment), Error);  // inside a block, not its start
  EXPECT_THROW(other.release(p), Error);                   // another device's block
  EXPECT_EQ(hbm.used(), 4096u);
  hbm.release(p);
}

TEST(Hbm, DoubleReleaseThrows) {
  Hbm hbm(0, 1 * kMiB);
  void* p = hbm.allocate(4096);
  hbm.release(p);
  EXPECT_THROW(hbm.release(p), Error);
  EXPECT_EQ(hbm.free_bytes(), hbm.capacity());
}

TEST(Hbm, ContainsOnlyItsOwnRange) {
  Hbm hbm(0, 1 * kMiB);
  char* p = static_cast<char*>(hbm.allocate(64));
  EXPECT_TRUE(hbm.contains(p));
  EXPECT_TRUE(hbm.contains(p + hbm.capacity() - 1));  // p is the start of the range
  EXPECT_FALSE(hbm.contains(p + hbm.capacity()));
  int local = 0;
  EXPECT_FALSE(hbm.contains(&local));
}

TEST(Hbm, AllocatedMemoryIsWritable) {
  Hbm hbm(0, 1 * kMiB);
  auto* a = static_cast<uint32_t*>(hbm.allocate(4096 * sizeof(uint32_t)));
  auto* b = static_cast<uint32_t*>(hbm.allocate(4096 * sizeof(uint32_t)));
  for (uint32_t i = 0; i < 4096; ++i) a[i] = i * 2654435761u;
  std::memset(b, 0xAB, 4096 * sizeof(uint32_t));
  // Writing b must not clobber a: the blocks do not overlap.
  for (uint32_t i = 0; i < 4096; ++i) ASSERT_EQ(a[i], i * 2654435761u) << i;
  EXPECT_EQ(b[4095], 0xABABABABu);
}

TEST(Hbm, ReservingDoesNotCommitHostMemory) {
  const uint64_t before = resident_bytes();
  std::vector<std::unique_ptr<Hbm>> devices;
  for (int d = 0; d < 4; ++d) devices.push_back(std::make_unique<Hbm>(d, 24 * kGiB));
  // Touch both ends of a large block: only those pages become resident.
  char* p = static_cast<char*>(devices[0]->allocate(20 * kGiB));
  p[0] = 1;
  p[20 * kGiB - 1] = 2;
  EXPECT_EQ(p[0] + p[20 * kGiB - 1], 3);
  const uint64_t after = resident_bytes();
  EXPECT_LT(after, before + 64 * kMiB) << "96 GiB of reserved HBM became resident";
  devices[0]->release(p);
}

TEST(Hbm, LargeReleaseReturnsPagesToOs) {
  Hbm hbm(0, 1 * kGiB);
  const uint64_t size = 64 * kMiB;
  char* p = static_cast<char*>(hbm.allocate(size));
  const uint64_t before = resident_bytes();
  std::memset(p, 1, size);
  EXPECT_GT(resident_bytes(), before + size / 2);
  hbm.release(p);
  EXPECT_LT(resident_bytes(), before + size / 4);
  // The range was dropped, so reusing it sees fresh zero pages rather than the old bytes.
  char* again = static_cast<char*>(hbm.allocate(size));
  EXPECT_EQ(again, p);
  EXPECT_EQ(again[0], 0);
  EXPECT_EQ(again[size - 1], 0);
  hbm.release(again);
}

TEST(FormatBytes, PicksUnitAndTwoDecimals) {
  EXPECT_EQ(format_bytes(0), "0 bytes");
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1 * kKiB), "1.00 KiB");
  EXPECT_EQ(format_bytes(512 * kKiB), "512.00 KiB");
  EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(1536 * kGiB), "1.50 TiB");
}

}  // namespace
}  // namespace trnsim
