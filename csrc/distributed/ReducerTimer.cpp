// DDP's reducer timer for neuron: the timing stats of DDP's logging data
// (avg_forward_compute_time, avg_backward_compute_time, avg_backward_comm_time,
// avg_backward_compute_comm_overlap_time) in simulated device time.
//
// Note [DDP reducer timer]
// c10d's Reducer asks c10d::TimerRegistry for a Timer of its parameters' device type and, on
// the iterations it samples, records five points of the training step on it: forward start,
// backward compute start (the forward's output is handed back), backward compute end (the
// last gradient bucket is ready), backward comm start (the first bucket is launched) and
// backward comm end (every bucket's future is done). Without a timer for PrivateUse1, DDP
// warns on every run and reports no timing. CUDA's timer records a CUDA event per point; this
// one records a neuron event on the device's current stream, so each point is a time on the
// simulated clock (recording is one small instruction, Note [Event records] in trnsim's
// queue.cpp), and a difference is the simulated time between two points. The comm end point is
// recorded after DDP waited on the buckets' futures, which orders the current stream after
// the collectives (NeuronWork), so comm time includes the modelled collectives. The host
// timestamps DDP also logs (forward_compute_time_start, ...) stay host-clock times, as on CUDA.

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <cmath>
#include <memory>
#include <optional>

namespace torch_neuron {
namespace {

constexpr double kNsPerMs = 1e6;

class NeuronReducerTimer : public c10d::Timer {
 public:
  explicit NeuronReducerTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);  // the host-clock timestamp DDP logs beside the durations
    const c10::impl::VirtualGuardImpl guard(device_.type());
    event_of(event).record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const c10::Event& first = event_of(start);
    const c10::Event& last = event_of(end);
    // A point DDP did not reach (no backward, or a no_sync iteration): no duration.
    if (!first.was_marked_for_recording() || !last.was_marked_for_recording()) {
      return std::nullopt;
    }
    const double ms = first.elapsedTime(last);
    // An end point left over from an earlier iteration than its start point.
    if (ms < 0) return std::nullopt;
    return static_cast<int64_t>(std::llround(ms * kNsPerMs));
  }

 private:
  c10::Event& event_of(Event event) {
    switch (event) {
      case Event::kForwardStart:
        return forward_start_;
      case Event::kBackwardComputeStart:
        return backward_compute_start_;
      case Event::kBackwardComputeEnd:
        return backward_compute_end_;
      case Event::kBackwardCommStart:
        return backward_comm_start_;
      case Event::kBackwardCommEnd:
        return backward_comm_end_;
    }
    TORCH_INTERNAL_ASSERT(false, "unknown DDP timer event");
  }

  // BACKEND_DEFAULT is what torch.Event(enable_timing=True) asks for: events that can be timed.
  static c10::Event timing_event() {
    return c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
  }

  c10::Device device_;
  c10::Event forward_start_ = timing_event();
  c10::Event backward_compute_start_ = timing_event();
  c10::Event backward_compute_end_ = timing_event();
  c10::Event backward_comm_start_ = timing_event();
  c10::Event backward_comm_end_ = timing_event();
};

using c10d::RegistererTimerRegistry;
using c10d::TimerRegistry;
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::DeviceType::PrivateUse1, NeuronReducerTimer);

}  // namespace
}  // namespace torch_neuron
