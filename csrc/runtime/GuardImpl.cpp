#include "runtime/GuardImpl.h"

#include <c10/util/Exception.h>

#include <trnsim/error.h>
#include <trnsim/queue.h>

#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

// A c10 event handle: the simulated event plus whether it was created for timing.
struct NeuronEvent {
  trnsim::Event event;
  bool timing;
};

void check_neuron(const c10::Device& device) {
  TORCH_CHECK(device.type() == kNeuron, "expected a neuron device, got ", device);
}

}  // namespace

c10::DeviceType NeuronGuardImpl::type() const { return kNeuron; }

c10::Device NeuronGuardImpl::exchangeDevice(c10::Device device) const {
  check_neuron(device);
  const auto old = current_device();
  if (device.index() != old) set_current_device(device.index());
  return c10::Device(kNeuron, old);
}

c10::Device NeuronGuardImpl::getDevice() const { return c10::Device(kNeuron, current_device()); }

void NeuronGuardImpl::setDevice(c10::Device device) const {
  check_neuron(device);
  set_current_device(device.index());
}

void NeuronGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  try {
    set_current_device(device.index());
  } catch (...) {
    // Called from guard destructors, where the previous device was valid; nothing to report.
  }
}

c10::Stream NeuronGuardImpl::getStream(c10::Device device) const {
  return current_stream(device.index());
}

c10::Stream NeuronGuardImpl::getDefaultStream(c10::Device device) const {
  return default_stream(device.index());
}

c10::Stream NeuronGuardImpl::getStreamFromGlobalPool(c10::Device device, bool) const {
  return stream_from_pool(device.index());
}

c10::Stream NeuronGuardImpl::getNewStream(c10::Device device, int) const {
  return stream_from_pool(device.index());
}

c10::Stream NeuronGuardImpl::exchangeStream(c10::Stream stream) const {
  const auto old = current_stream(stream.device_index());
  set_current_stream(stream);
  return old;
}

c10::DeviceIndex NeuronGuardImpl::deviceCount() const noexcept { return device_count_or_zero(); }

// torch.accelerator.get_device_capability: the dtypes neuron tensors can have and be converted
// between. Every dense dtype can (float64 and complex are computed as DtypePolicy.h says);
// quantized tensors are refused (aten/Unsupported.cpp).
c10::DeviceCapability NeuronGuardImpl::getDeviceCapability(c10::Device device) const {
  check_device_index(resolve_device(device.index()));
  c10::DeviceCapability capability;
  auto& types = capability.capability_data.supported_scalar_types;
  types.has_QInt8 = 0;
  types.has_QUInt8 = 0;
  types.has_QInt32 = 0;
  types.has_QUInt4x2 = 0;
  types.has_QUInt2x4 = 0;
  return capability;
}

void NeuronGuardImpl::destroyEvent(void* event, const c10::DeviceIndex) const noexcept {
  delete static_cast<NeuronEvent*>(event);
}

void NeuronGuardImpl::record(void** event, const c10::Stream& stream,
                             const c10::DeviceIndex device_index,
                             const c10::EventFlag flag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
              "event was created on neuron:", static_cast<int>(device_index),
              " but is recorded on a stream of ", stream.device());
  auto& queue = queue_of(stream);
  if (*event == nullptr) *event = new NeuronEvent{{}, flag == c10::EventFlag::BACKEND_DEFAULT};
  static_cast<NeuronEvent*>(*event)->event.record(queue);
}

void NeuronGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) return;
  static_cast<NeuronEvent*>(event)->event.block(queue_of(stream));
}

bool NeuronGuardImpl::queryEvent(void*) const { return true; }

void NeuronGuardImpl::synchronizeEvent(void*) const {}

double NeuronGuardImpl::elapsedTime(void* start, void* end, const c10::DeviceIndex) const {
  TORCH_CHECK(start && end,
              "elapsed_time needs both events recorded; call event.record() on each first");
  auto* s = static_cast<NeuronEvent*>(start);
  auto* e = static_cast<NeuronEvent*>(end);
  TORCH_CHECK(s->timing && e->timing,
              "both events must be created with enable_timing=True to measure elapsed time");
  return simulator_call([&] { return trnsim::Event::elapsed_ms(s->event, e->event); });
}

bool NeuronGuardImpl::queryStream(const c10::Stream& stream) const {
  queue_of(stream);
  return true;
}

void NeuronGuardImpl::synchronizeStream(const c10::Stream& stream) const { queue_of(stream); }

void NeuronGuardImpl::synchronizeDevice(const c10::DeviceIndex device_index) const {
  check_device_index(resolve_device(device_index));
}

void NeuronGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                                            const c10::Stream& stream) const {
  device_allocator().recordStream(data_ptr, stream);
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl)

}  // namespace torch_neuron
