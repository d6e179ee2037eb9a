// Simulated HBM of one NeuronCore: a reserved range of host address space (committed by the OS
// only when touched) and a first-fit allocator with coalescing over it. Device pointers are
// ordinary host pointers into that range, so the host can compute on device data in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace trnsim {

class Hbm {
 public:
  // Every allocation starts on this boundary (the DMA engines move 512-byte descriptors best;
  // it also satisfies every host SIMD alignment).
  static constexpr uint64_t kAlignment = 512;

  Hbm(int device, uint64_t capacity);
  ~Hbm();
  Hbm(const Hbm&) = delete;
  Hbm& operator=(const Hbm&) = delete;

  // Returns a kAlignment-aligned block of at least `bytes` (0 bytes gives nullptr).
  // Throws trnsim::OutOfMemory when no free range is large enough.
  void* allocate(uint64_t bytes);
  // Returns a block from allocate(); throws trnsim::Error for any other pointer.
  void release(void* ptr);

  bool contains(const void* ptr) const;
  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  uint64_t free_bytes() const { return capacity_ - used(); }
  // Size of the largest block allocate() could return now.
  uint64_t largest_free_block() const;

 private:
  int device_;
  uint64_t capacity_;
  char* base_ = nullptr;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  std::map<uint64_t, uint64_t> used_;  // offset -> size
  uint64_t used_bytes_ = 0;
};

}  // namespace trnsim
