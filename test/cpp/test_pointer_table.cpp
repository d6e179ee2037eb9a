// runtime/PointerTable.h, the allocator's table of live blocks: it must agree with a std::map
// through growth and through deletions anywhere in a probe run (backward-shift deletion).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "runtime/PointerTable.h"

namespace {

const void* pointer(uintptr_t i) { return reinterpret_cast<const void*>((i + 1) * 512); }

TEST(PointerTable, AgreesWithAMapThroughInsertsAndErases) {
  torch_neuron::PointerTable<int> table;
  std::map<const void*, int> reference;
  std::mt19937 rng(0);
  std::vector<uintptr_t> live;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      // Clustered keys make long probe runs; spread ones exercise wrap-around.
      const uintptr_t key = step % 2 ? rng() % 4096 : rng();
      if (reference.count(pointer(key))) continue;
      table.insert(pointer(key), step);
      reference[pointer(key)] = step;
      live.push_back(key);
    } else {
      const size_t pick = rng() % live.size();
      table.erase(pointer(live[pick]));
      reference.erase(pointer(live[pick]));
      live[pick] = live.back();
      live.pop_back();
    }
    if (step % 997 == 0) {
      for (const auto& [key, value] : reference) {
        ASSERT_NE(table.find(key), nullptr);
        EXPECT_EQ(*table.find(key), value);
      }
    }
  }
  EXPECT_EQ(table.size(), reference.size());
  for (const auto& [key, value] : reference) {
    ASSERT_NE(table.find(key), nullptr);
    EXPECT_EQ(*table.find(key), value);
  }
}

TEST(PointerTable, MissingKeysAreNotFound) {
  torch_neuron::PointerTable<int> table;
  EXPECT_EQ(table.find(pointer(1)), nullptr);  // empty table
  table.insert(pointer(1), 7);
  EXPECT_EQ(table.find(pointer(2)), nullptr);
  EXPECT_EQ(table.find(nullptr), nullptr);
  table.erase(pointer(1));
  EXPECT_EQ(table.find(pointer(1)), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
