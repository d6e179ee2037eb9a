#include "runtime/Stream.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <vector>

#include "runtime/Runtime.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

// This thread's current stream of a device, and its queue once looked up: every op launches on
// the current queue, so the lookup (device and id checks) is done once per stream change.
struct CurrentStream {
  c10::StreamId id = 0;
  trnsim::Queue* queue = nullptr;
};

// Per device; grown on demand. A slot exists only for a device index that was checked.
struct CurrentStreamsTag;
std::vector<CurrentStream>& current_streams() {
  return per_thread<std::vector<CurrentStream>, CurrentStreamsTag>();
}

CurrentStream& current_slot(c10::DeviceIndex index) {
  auto& streams = current_streams();
  if (streams.size() <= static_cast<size_t>(index)) streams.resize(index + 1);
  return streams[index];
}

}  // namespace

c10::Stream default_stream(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), 0);
}

c10::Stream current_stream(c10::DeviceIndex index) {
  index = resolve_device(index);
  // A slot exists only for a checked index (asked for every allocation: keep it short).
  const auto& streams = current_streams();
  if (static_cast<size_t>(index) < streams.size()) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), streams[index].id);
  }
  check_device_index(index);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), current_slot(index).id);
}

void set_current_stream(const c10::Stream& stream) {
  trnsim::Queue& queue = queue_of(stream);  // validates device and id
  current_slot(stream.device_index()) = {stream.id(), &queue};
}

c10::Stream stream_from_pool(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  static std::atomic<uint32_t> counters[256];
  const auto id = 1 + counters[static_cast<uint8_t>(index)]++ % kStreamPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), id);
}

c10::Stream collective_stream(c10::DeviceIndex index, int slot) {
  check_device_index(index);
  const auto id = kFirstCollectiveStream + slot % kCollectiveStreamCount;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, index), id);
}

bool is_collective_stream(c10::StreamId id) {
  return id >= kFirstCollectiveStream && id < kFirstCollectiveStream + kCollectiveStreamCount;
}

trnsim::Queue& queue_of(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kNeuron, "expected a neuron stream, got a stream of ",
              stream.device());
  TORCH_CHECK((stream.id() >= 0 && stream.id() <= kStreamPoolSize) ||
                  is_collective_stream(stream.id()),
              "invalid neuron stream id ", stream.id(),
              "; create streams with torch.neuron.Stream()");
  return device(stream.device_index()).queue(static_cast<int>(stream.id()));
}

trnsim::Queue& current_queue(c10::DeviceIndex index) {
  // Asked by every op and allocation. A slot exists only for a checked index, so a cached queue
  // needs no check of an explicit index; a forked child must still get device()'s error, so
  // the cached queue is not used there.
  if (index == -1) index = current_device();
  const auto& streams = current_streams();
  if (index >= 0 && static_cast<size_t>(index) < streams.size() && !in_bad_fork()) {
    if (trnsim::Queue* queue = streams[index].queue) return *queue;
  }
  index = resolve_device(index);
  trnsim::Queue& queue = queue_of(current_stream(index));
  current_slot(index).queue = &queue;
  return queue;
}

}  // namespace torch_neuron
