// The caching allocator for simulated HBM (c10::DeviceAllocator for the neuron device).
//
// Note [Caching HBM allocator]: like CUDA's caching allocator, freed blocks stay reserved in a
// per-device cache and are reused by later allocations (a larger block is split: Note [Split
// blocks] in DeviceAllocator.cpp), so steady-state training does not call into the HBM
// allocator. As CUDA's, the cache is kept per stream: a block freed by one stream serves later
// allocations on that stream only, whose order already puts them after the block's last use.
// A block also used by other streams (record_stream) makes its reuse wait, on the simulated
// clock, for the work those streams had queued when it was freed. So simulated time never
// depends on what the cache happens to hold (which differs between executed and predict-only
// runs: only executed ones allocate host kernels' scratch). When HBM is exhausted the cache is
// released and the allocation retried before raising torch.OutOfMemoryError.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include <cstdint>
#include <vector>

namespace trnsim {
class Queue;
}

namespace torch_neuron {

class NeuronDeviceAllocator;

// The process-wide allocator, also registered for the PrivateUse1 device type.
NeuronDeviceAllocator& device_allocator();

class NeuronDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // torch.neuron.set_per_process_memory_fraction: this process may reserve at most
  // `fraction` of the device's HBM (as CUDA's allocator, mem_get_info is unaffected).
  void setMemoryFraction(double fraction, c10::DeviceIndex device);
  double getMemoryFraction(c10::DeviceIndex device);

  // Allocates on an explicit device (allocate() uses the current device). `queue`: the queue of
  // that device's current stream, when the caller already looked it up (current_queue(device)).
  // `deferred_peak`: the allocation counts towards the peak statistics only if it is still
  // live at the next settle_peaks (Note [Host kernel scratch]).
  c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes,
                           trnsim::Queue* queue = nullptr, bool deferred_peak = false);
  // torch.neuron.memory_snapshot: the segments reserved from HBM on `device`, in address
  // order, each with its blocks (Note [Split blocks]).
  struct BlockInfo {
    uintptr_t address;
    size_t size, requested;  // requested: 0 for a free block
    bool allocated;
  };
  struct SegmentInfo {
    uintptr_t address;
    size_t size;
    bool small_pool;  // serves requests of up to 1 MiB (Note [Split blocks])
    std::vector<BlockInfo> blocks;
  };
  std::vector<SegmentInfo> snapshot(c10::DeviceIndex device);
  // The peak statistics of `device` take in what is allocated now.
  void settle_peaks(c10::DeviceIndex device);
  // Note [Allocation ids]: every allocation gets the next number of the process, whichever
  // cached block serves it; the id of the live allocation that starts at `ptr`, 0 when none
  // does. A compiled graph's schedule names buffers by it (Note [Compiled graph schedule]).
  static uint64_t allocation_id(const void* ptr);
  // Whether `ptr` came from this allocator (whatever device its DataPtr now claims).
  static bool owns(const c10::DataPtr& ptr);
  // Frees `ptr` if it is the start of a live block of this allocator; false otherwise.
  static bool release_if_owned(void* ptr);
};

}  // namespace torch_neuron
