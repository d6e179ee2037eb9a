#include "runtime/Stream.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <vector>

#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

// Per-thread current stream id of each device; grown on demand.
thread_local std::vector<c10::StreamId> tls_current_ids;

c10::StreamId& current_id_slot(c10::DeviceIndex index) {
  if (tls_current_ids.size() <= static_cast<size_t>(index)) tls_current_ids.resize(index + 1, 0);
  return tls_current_ids[index];
}

}  // namespace

c10::Stream default_stream(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), 0);
}

c10::Stream current_stream(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), current_id_slot(index));
}

void set_current_stream(const c10::Stream& stream) {
  queue_of(stream);  // validates device and id
  current_id_slot(stream.device_index()) = stream.id();
}

c10::Stream stream_from_pool(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  static std::atomic<uint32_t> counters[256];
  const auto id = 1 + counters[static_cast<uint8_t>(index)]++ % kStreamPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), id);
}

trnsim::Queue& queue_of(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got a stream of ",
              stream.device());
  TORCH_CHECK(stream.id() >= 0 && stream.id() <= kStreamPoolSize, "invalid neuron stream id ",
              stream.id(), "; create streams with torch.neuron.Stream()");
  return device(stream.device_index()).queue(static_cast<int>(stream.id()));
}

trnsim::Queue& current_queue(c10::DeviceIndex index) { return queue_of(current_stream(index)); }

}  // namespace torch_neuron
