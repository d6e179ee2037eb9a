#include "runtime/Hooks.h"

#include <c10/core/DeviceType.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "runtime/DeviceAllocator.h"
#include "runtime/Generator.h"
#include "runtime/HostAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {

bool NeuronHooks::isAvailable() const { return device_count_or_zero() > 0; }

bool NeuronHooks::hasPrimaryContext(c10::DeviceIndex device_index) const {
  return device_index >= 0 && device_index < device_count_or_zero();
}

void NeuronHooks::init() const { system(); }

c10::DeviceIndex NeuronHooks::deviceCount() const { return device_count_or_zero(); }

void NeuronHooks::setCurrentDevice(c10::DeviceIndex device) const { set_current_device(device); }

c10::DeviceIndex NeuronHooks::getCurrentDevice() const { return current_device(); }

c10::DeviceIndex NeuronHooks::exchangeDevice(c10::DeviceIndex device) const {
  const auto old = current_device();
  if (device >= 0 && device != old) set_current_device(device);
  return old;
}

c10::DeviceIndex NeuronHooks::maybeExchangeDevice(c10::DeviceIndex device) const {
  if (device < 0 || device >= device_count_or_zero()) return current_device();
  return exchangeDevice(device);
}

const at::Generator& NeuronHooks::getDefaultGenerator(c10::DeviceIndex device_index) const {
  return default_generator(device_index);
}

at::Generator NeuronHooks::getNewGenerator(c10::DeviceIndex device_index) const {
  return new_generator(device_index);
}

bool NeuronHooks::isPinnedPtr(const void* data) const { return host_allocator().is_pinned(data); }

at::Allocator* NeuronHooks::getPinnedMemoryAllocator() const { return &host_allocator(); }

at::Device NeuronHooks::getDeviceFromPtr(void* data) const {
  auto index = system().device_of(data);
  TORCH_CHECK(index.has_value(), "pointer ", data, " is not in the HBM of any neuron device");
  return at::Device(kNeuron, static_cast<c10::DeviceIndex>(*index));
}

void NeuronHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  TORCH_CHECK(storage.resizable(), "cannot resize a storage that is not resizable");
  auto* impl = storage.unsafeGetStorageImpl();
  const auto old_bytes = impl->nbytes();
  const auto device = impl->device().index();
  c10::DataPtr fresh = device_allocator().allocate_on(device, new_bytes);
  if (old_bytes > 0 && new_bytes > 0) {
    std::memcpy(fresh.get(), impl->data(), std::min(old_bytes, new_bytes));
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_bytes);
}

namespace {

// Runs when libtorch_neuron is loaded, from Python or from a C++ program: the backend is called
// "neuron" (so "neuron:0" parses) and ATen learns about the hooks.
struct RegisterBackend {
  RegisterBackend() {
    c10::register_privateuse1_backend("neuron");
    static NeuronHooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
  }
} register_backend;

}  // namespace
}  // namespace torch_neuron
