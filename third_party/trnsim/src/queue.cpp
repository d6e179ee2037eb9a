#include "trnsim/queue.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "trnsim/error.h"

namespace trnsim {
namespace {

std::atomic<bool> global_tracing{false};
std::atomic<bool> observed{false};
std::mutex observer_mutex;
std::shared_ptr<const TraceObserver> observer;  // guarded by observer_mutex
thread_local uint64_t thread_trace_tag = 0;
// Per thread (Note [Paused clocks]).
thread_local int clock_pauses = 0;

std::shared_ptr<const TraceObserver> current_observer() {
  std::lock_guard<std::mutex> lock(observer_mutex);
  return observer;
}

}  // namespace

void set_tracing_enabled(bool on) { global_tracing = on; }
bool tracing_enabled() { return global_tracing || observed; }

void set_trace_observer(TraceObserver f) {
  std::lock_guard<std::mutex> lock(observer_mutex);
  observer = f ? std::make_shared<const TraceObserver>(std::move(f)) : nullptr;
  observed = observer != nullptr;
}

void pause_clocks() { ++clock_pauses; }
void resume_clocks() {
  if (clock_pauses <= 0) throw Error("resume_clocks() without a matching pause_clocks()");
  --clock_pauses;
}
bool clocks_paused() { return clock_pauses > 0; }

void set_trace_tag(uint64_t tag) { thread_trace_tag = tag; }
uint64_t trace_tag() { return thread_trace_tag; }

double Queue::now_ns() const { return clock_ns_.load(std::memory_order_acquire); }

double Queue::launch(const std::string& name, double duration_ns) {
  return launch(name, OpCost{}, duration_ns, {});
}

double Queue::launch(const std::string& name, const OpCost& cost, std::string detail) {
  return launch(name, cost, cost.duration_ns(), std::move(detail));
}

double Queue::launch(const std::string& name, const OpCost& cost, double duration_ns,
                     std::string detail, std::vector<TraceSpan> parts) {
  if (!(duration_ns >= 0)) throw Error("work '" + name + "' has a negative or NaN duration");
  if (clock_pauses > 0) return now_ns();
  if (health_ != nullptr) health_->on_launch(device_);
  const bool tracing =
      tracing_.load(std::memory_order_relaxed) || global_tracing.load(std::memory_order_relaxed);
  const bool watched = observed.load(std::memory_order_relaxed);
  // Note [Shared engines]: wait for the device's engines this work uses.
  std::unique_lock<SpinLock> engines_lock;
  const bool shares = engines_ != nullptr && SharedEngines::uses_any(cost);
  if (shares) {
    engines_lock = std::unique_lock<SpinLock>(engines_->mutex);
    wait_until(engines_->earliest_start(cost));
  }
  if (!tracing && !watched) {
    const double start = advance_clock(duration_ns);
    if (shares) engines_->occupy(cost, start);
    return start + duration_ns;
  }
  // Tracing: the lock keeps trace records in clock order.
  std::lock_guard<std::mutex> lock(mutex_);
  const double start = advance_clock(duration_ns);
  if (shares) {
    engines_->occupy(cost, start);
    // The record and the observer need only this queue's lock; other queues' launches spin on
    // the engines' lock (Note [Spin locks]), so it is not held through an observer's call.
    engines_lock.unlock();
  }
  TraceRecord record{name,       device_,    id_,          start, duration_ns, cost.engine_ns,
                     cost.flops, cost.bytes, std::move(detail), thread_trace_tag,
                     std::move(parts)};
  if (watched) {
    if (auto f = current_observer()) (*f)(record);
  }
  if (tracing) trace_.push_back(std::move(record));
  return start + duration_ns;
}

bool SharedEngines::uses_any(const OpCost& cost) {
  if (cost.hbm_ns > 0) return true;
  for (double ns : cost.engine_ns) {
    if (ns > 0) return true;
  }
  return false;
}

double SharedEngines::earliest_start(const OpCost& cost) const {
  double t = 0;
  for (int e = 0; e < kEngineCount; ++e) {
    if (cost.engine_ns[e] > 0) t = std::max(t, free_at_[e]);
  }
  if (cost.hbm_ns > 0) t = std::max(t, free_at_[kEngineCount]);
  return t;
}

void SharedEngines::occupy(const OpCost& cost, double start) {
  for (int e = 0; e < kEngineCount; ++e) {
    if (cost.engine_ns[e] > 0) free_at_[e] = start + cost.engine_ns[e];
  }
  if (cost.hbm_ns > 0) free_at_[kEngineCount] = start + cost.hbm_ns;
}

double Queue::advance_clock(double duration_ns) {
  double start = clock_ns_.load(std::memory_order_relaxed);
  while (!clock_ns_.compare_exchange_weak(start, start + duration_ns,
                                          std::memory_order_acq_rel)) {
  }
  return start;
}

void Queue::wait_until(double t_ns) {
  double now = clock_ns_.load(std::memory_order_relaxed);
  while (now < t_ns &&
         !clock_ns_.compare_exchange_weak(now, t_ns, std::memory_order_acq_rel)) {
  }
}

void Queue::set_tracing(bool on) { tracing_ = on; }

bool Queue::tracing() const {
  return tracing_.load(std::memory_order_relaxed) || tracing_enabled();
}

std::vector<TraceRecord> Queue::take_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<TraceRecord> out;
  out.swap(trace_);
  return out;
}

// Note [Event records]
// Recording an event puts one instruction on the queue (on a device, a semaphore write that the
// runtime waits on or reads), so it takes time like any instruction: two events recorded back
// to back are a small time apart, as on every real device (CUDA's too), and the time between
// two events includes one record. Assumption: a record costs one instruction's static overhead,
// about 100 cycles (NKI architecture guide, nki/guides/architecture/
// trainium_inferentia2_arch.rst, instruction overheads), at 1.4 GHz (the same guide's
// ScalarE/GpSimdE clock): kEventRecordNs. It occupies no compute engine and is not a launch: it
// is neither traced as an op nor counted towards an armed fault.

double Queue::record_timestamp() {
  if (clocks_paused()) return now_ns();
  return advance_clock(kEventRecordNs) + kEventRecordNs;
}

void Event::record(Queue& queue) {
  time_ns_ = queue.record_timestamp();
  device_ = queue.device();
  recorded_ = true;
}

double Event::time_ns() const {
  if (!recorded_) throw Error("event was never recorded; call record() on a stream first");
  return time_ns_;
}

void Event::block(Queue& queue) const {
  // Waiting on an event that was never recorded is a no-op, as in CUDA.
  if (recorded_) queue.wait_until(time_ns_);
}

double Event::elapsed_ms(const Event& start, const Event& end) {
  if (!start.recorded_ || !end.recorded_) {
    throw Error("elapsed time needs both events recorded; record the start and end events first");
  }
  if (start.device_ != end.device_) {
    throw Error("elapsed time needs both events on one device, got neuron:" +
                std::to_string(start.device_) + " and neuron:" + std::to_string(end.device_));
  }
  return (end.time_ns_ - start.time_ns_) / 1e6;
}

}  // namespace trnsim
