// Redirects this thread's CPU allocations into the HBM of a neuron device.
//
// Note [Host execution]: most neuron ops run ATen's CPU kernel on CPU views of device memory
// (aten/HostExecution.cpp). The tensors such a kernel allocates (its outputs and scratch) must
// land in HBM too, so the outputs can become neuron tensors without a copy. While an
// AllocateOnDevice scope is alive, the CPU allocator (which torch_neuron wraps at load time)
// serves this thread's requests from the device's caching allocator. Other threads, and this
// thread outside the scope, get ordinary host memory.
//
// Note [Host kernel scratch]
// A CPU kernel also allocates scratch it frees before returning (a convolution's im2col
// columns, a sort's keys), which a NeuronCore's kernel keeps in SBUF or does not need. It
// lands in HBM here, so the device must have room for it, but it must not count in the peak
// memory statistics (max_memory_allocated, the run report's peak HBM): predict-only mode,
// which runs no CPU kernel, would report less than the executed run. So allocations in a scope
// raise the current statistics and leave the peaks alone, and the end of the scope sets each
// peak to at least what is still allocated: the outputs, and what the op's arguments held.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace trnsim {
class Queue;
}

namespace torch_neuron {

class AllocateOnDevice {
 public:
  // `queue`: current_queue(device), when the caller has it (saves the allocator the lookup).
  explicit AllocateOnDevice(c10::DeviceIndex device, trnsim::Queue* queue = nullptr);
  ~AllocateOnDevice();
  AllocateOnDevice(const AllocateOnDevice&) = delete;
  AllocateOnDevice& operator=(const AllocateOnDevice&) = delete;

 private:
  c10::DeviceIndex previous_;
  trnsim::Queue* previous_queue_;
};

// The CPU allocator torch_neuron installs at load time (the one the scope above redirects).
// Host views that a CPU kernel may resize grow through it.
c10::Allocator* redirecting_cpu_allocator();

}  // namespace torch_neuron
