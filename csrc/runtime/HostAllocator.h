// Pinned host memory for fast, asynchronous host <-> neuron copies (tensor.pin_memory(),
// DataLoader(pin_memory=True)). Buffers are page-aligned and registered so that
// tensor.is_pinned() can tell them apart from pageable memory.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torch_neuron {

class NeuronHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override;
  at::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // Copies out of pinned memory complete before they return (execution is synchronous), so there
  // is nothing to wait for before a buffer is reused.
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override { return true; }
  // Pinned buffers are returned to the OS as soon as they are freed: there is no cache to empty.
  void empty_cache() override {}
  at::HostStats get_stats() override;
  void reset_accumulated_stats() override;
  void reset_peak_stats() override;

  // Whether `ptr` points into a live pinned buffer.
  bool is_pinned(const void* ptr) const;
};

NeuronHostAllocator& host_allocator();

}  // namespace torch_neuron
