#include "runtime/AllocateOnDevice.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "runtime/DeviceAllocator.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

TORCH_NEURON_THREAD_LOCAL c10::DeviceIndex tls_target_device = -1;
TORCH_NEURON_THREAD_LOCAL trnsim::Queue* tls_target_queue = nullptr;  // may be null
// The scope allocated with deferred peaks: its end settles them.
TORCH_NEURON_THREAD_LOCAL bool tls_deferred_peaks = false;

// Wraps the CPU allocator that was registered before torch_neuron loaded.
class RedirectingCpuAllocator final : public c10::Allocator {
 public:
  explicit RedirectingCpuAllocator(c10::Allocator* host) : host_(host) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (tls_target_device < 0) return host_->allocate(nbytes);
    c10::DataPtr ptr = device_allocator().allocate_on(tls_target_device, nbytes, tls_target_queue,
                                                      /*deferred_peak=*/true);
    tls_deferred_peaks = true;
    ptr.unsafe_set_device(c10::Device(c10::kCPU));  // the kernel sees a CPU tensor
    return ptr;
  }

  // One deleter for both kinds of memory, because a raw allocation may be freed outside the
  // scope it was made in.
  c10::DeleterFnPtr raw_deleter() const override { return &free_either; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    host_->copy_data(dest, src, count);
  }

  static c10::Allocator* host_allocator;

 private:
  static void free_either(void* ptr) {
    if (!NeuronDeviceAllocator::release_if_owned(ptr)) host_allocator->raw_deleter()(ptr);
  }
  c10::Allocator* host_;
};

c10::Allocator* RedirectingCpuAllocator::host_allocator = nullptr;

// Installed when libtorch_neuron loads, above the default CPU allocator's priority.
struct InstallRedirect {
  InstallRedirect() {
    RedirectingCpuAllocator::host_allocator = c10::GetAllocator(c10::DeviceType::CPU);
    // Never destroyed: CPU memory is freed until the very end of the process.
    redirect = new RedirectingCpuAllocator(RedirectingCpuAllocator::host_allocator);
    c10::SetAllocator(c10::DeviceType::CPU, redirect, /*priority=*/1);
  }
  c10::Allocator* redirect;
} install_redirect;

}  // namespace

c10::Allocator* redirecting_cpu_allocator() { return install_redirect.redirect; }

AllocateOnDevice::AllocateOnDevice(c10::DeviceIndex device, trnsim::Queue* queue)
    : previous_(tls_target_device), previous_queue_(tls_target_queue) {
  tls_target_device = device;
  tls_target_queue = queue;
}

AllocateOnDevice::~AllocateOnDevice() {
  if (tls_deferred_peaks) {
    // Note [Host kernel scratch]: what the kernel freed before returning was scratch.
    device_allocator().settle_peaks(tls_target_device);
    tls_deferred_peaks = false;
  }
  tls_target_device = previous_;
  tls_target_queue = previous_queue_;
}

}  // namespace torch_neuron
