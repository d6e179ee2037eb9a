// Note [torch.profiler on neuron]
// torch.profiler (and torch.autograd.profiler.profile(use_device="neuron")) time a backend's
// device work through the PrivateUse1 ProfilerStubs (torch/csrc/profiler/stubs/base.h): around
// every profiled op it records a device event at entry and at exit, and reports the time
// between them as the op's device time. CUDA records CUDA events; here an event is a reading of
// the simulated clock of the current stream (Note [Simulated time]), so an op's device time is
// the predicted Trainium time of the work it launched on that stream, and key_averages(),
// tables and traces show it next to the host time. Reading a clock is a few loads, which keeps
// the profiler's overhead close to the CPU profiler's. Without these stubs PyTorch's default
// ones throw on every op, which left the profiler with unfinished events (negative times) and
// made it slow.
//
// Once Kineto has started neuron's plugin (any torch.profiler.profile() in the process), the
// legacy profiler's use_device="neuron" sessions record the plugin's device activities too
// (Note [torch.profiler device activities]), and PyTorch adds both to an op's device time. So a
// reading taken while a plugin session records carries no device time: the plugin's activity
// is the op's time, counted once.
#include <torch/csrc/profiler/stubs/base.h>

#include <c10/util/ApproximateClock.h>

#include <memory>

#include "profiler/KinetoPlugin.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

struct ClockReading {
  c10::DeviceIndex device;
  double ns;  // the current stream's simulated clock
  bool plugin_recording;  // the Kineto plugin times this op (see above)
};

struct NeuronProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) *device = index;
    if (event != nullptr) {
      *event = std::make_shared<ClockReading>(
          ClockReading{index, current_queue(index).now_ns(), kineto_session_recording()});
    }
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }

  // Microseconds, as the CUDA stubs return (KinetoEvent::privateuse1ElapsedUs reads them so).
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    const auto* a = static_cast<const ClockReading*>(start->get());
    const auto* b = static_cast<const ClockReading*>(end->get());
    if (a == nullptr || b == nullptr || a->device != b->device) return 0.0f;
    if (a->plugin_recording || b->plugin_recording) return 0.0f;
    return static_cast<float>((b->ns - a->ns) / 1e3);
  }

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = current_device();
    for (c10::DeviceIndex i = 0; i < visible_device_count(); ++i) {
      set_current_device(i);
      op(i);
    }
    set_current_device(previous);
  }

  // Work runs when it is launched (Note [Host execution]): nothing to wait for.
  void synchronize() const override {}
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
};

// Registered when the library loads, like the guard and the hooks.
const bool registered = [] {
  static NeuronProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace torch_neuron
