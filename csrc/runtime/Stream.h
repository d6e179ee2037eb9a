// Streams of a neuron device. A stream is a c10::Stream whose id names a trnsim queue:
// id 0 is the default stream, ids 1..kPoolSize form the pool that new streams come from.
// Like CUDA, each thread has a current stream per device, initially the default stream.
#pragma once

#include <c10/core/Stream.h>

#include <trnsim/queue.h>

namespace torch_neuron {

// Streams handed out round-robin per device (CUDA uses 32 per priority, so do we).
constexpr int kStreamPoolSize = 32;
// Ids [kFirstCollectiveStream, kFirstCollectiveStream + kCollectiveStreamCount) are the
// streams of process groups: collectives run on the device's collective-communication cores,
// apart from compute, so each group gets a stream of its own (slots are reused round-robin).
constexpr int kFirstCollectiveStream = 64;
constexpr int kCollectiveStreamCount = 64;

c10::Stream default_stream(c10::DeviceIndex index = -1);
c10::Stream current_stream(c10::DeviceIndex index = -1);
void set_current_stream(const c10::Stream& stream);
c10::Stream stream_from_pool(c10::DeviceIndex index = -1);
// The collective stream `slot` (taken modulo kCollectiveStreamCount) of a device.
c10::Stream collective_stream(c10::DeviceIndex index, int slot);
bool is_collective_stream(c10::StreamId id);

// The simulated queue that runs a stream's work (checks device and id).
trnsim::Queue& queue_of(const c10::Stream& stream);
trnsim::Queue& current_queue(c10::DeviceIndex index = -1);

}  // namespace torch_neuron
