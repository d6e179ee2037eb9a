// A map from aligned pointers to values, for the allocator's live blocks: found on every free,
// so it is an open-addressing table (no nodes, no division) instead of std::unordered_map.
// Not thread-safe: the allocator's mutex guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torch_neuron {

template <class Value>
class PointerTable {
 public:
  // nullptr when `key` is not in the table.
  Value* find(const void* key) {
    if (slots_.empty() || key == nullptr) return nullptr;
    for (size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == nullptr) return nullptr;
    }
  }

  // `key` (not nullptr) must not be in the table yet.
  void insert(const void* key, Value value) {
    if ((count_ + 1) * 2 > slots_.size()) grow();  // at most half full: short probes
    size_t i = home(key);
    while (slots_[i].key != nullptr) i = next(i);
    slots_[i] = {key, value};
    ++count_;
  }

  // Removes `key`, which must be in the table.
  void erase(const void* key) {
    size_t hole = home(key);
    while (slots_[hole].key != key) hole = next(hole);
    // Backward-shift deletion: move later entries of the probe run into the hole when their home
    // position allows it, so that lookups never need tombstones.
    for (size_t i = next(hole); slots_[i].key != nullptr; i = next(i)) {
      const size_t want = home(slots_[i].key);
      const bool movable = hole <= i ? (want <= hole || want > i) : (want <= hole && want > i);
      if (movable) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole] = {};
    --count_;
  }

  size_t size() const { return count_; }

 private:
  struct Slot {
    const void* key = nullptr;
    Value value{};
  };

  size_t home(const void* key) const {
    // Keys are allocation starts: multiples of 512, so the low bits carry nothing. Fibonacci
    // hashing spreads the rest over the table.
    const uint64_t bits = reinterpret_cast<uintptr_t>(key) >> 9;
    return static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    const size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.resize(capacity);
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    count_ = 0;
    for (const auto& slot : old) {
      if (slot.key != nullptr) insert(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;  // a power of two in size
  size_t count_ = 0;
  int shift_ = 64;
};

}  // namespace torch_neuron
