#include "profiler/SimulationOverhead.h"

#include <ATen/ops/empty.h>

#include <chrono>
#include <vector>

#include <trnsim/queue.h>

#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

// Note [Simulation overhead on the real queue]
// The figure is what an op pays, so it is measured on the path an op takes: charge() on the
// current stream of the current device, looked up per launch as a kernel does, with the
// device's fault state checked and its shared engines (Note [Shared engines]) arbitrated. Only
// two things are the measurement's own: the stream is a fresh one from the device's pool (made
// current for the measurement), so the program's streams keep their clocks, and the op counter
// is private, so get_executed_ops() does not count the matmuls. With tracing on, the stream
// records every launch as a profiler session makes it do; the records are dropped afterwards.
double simulation_overhead_ns(int iterations, bool tracing) {
  const std::vector<at::Tensor> inputs{at::empty({256, 512}), at::empty({512, 128})};
  const std::vector<c10::IValue> outputs{at::empty({256, 128})};
  const uint64_t bytes = (256 * 512 + 512 * 128 + 256 * 128) * 4;
  const c10::DeviceIndex device = current_device();
  const c10::Stream previous = current_stream(device);
  const c10::Stream stream = stream_from_pool(device);
  trnsim::Queue& queue = queue_of(stream);
  OpCounter counter;
  set_current_stream(stream);
  queue.set_tracing(tracing);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    charge(current_queue(device), "aten::mm", &counter,
           describe_op(OpClass::Matmul, "aten::mm", inputs, outputs, bytes),
           [&] { return describe_tensors(inputs); });
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  queue.set_tracing(false);
  queue.take_trace();
  set_current_stream(previous);
  return std::chrono::duration<double, std::nano>(elapsed).count() / iterations;
}

}  // namespace torch_neuron
