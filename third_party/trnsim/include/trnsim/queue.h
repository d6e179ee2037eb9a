// Queues (streams) and events on the simulated clock.
//
// Note [Simulated time]: work executes functionally on the host as soon as it is launched; what
// the simulator models is *when* it would have run on Trainium. Each queue has a clock, the
// simulated time at which its last launched work finishes. Work on one queue is ordered; queues
// of a device overlap. Events capture a queue's clock; waiting on an event moves the waiting
// queue's clock forward. All times are nanoseconds of simulated device time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <functional>
#include <vector>

#include "trnsim/cost.h"
#include "trnsim/fault.h"
#include "trnsim/spin_lock.h"

namespace trnsim {

// One op of a launch that runs several (a compiled graph's ops): when it ran, from the
// launch's start, each engine's busy time on it and the HBM bytes it moved.
struct TraceSpan {
  std::string name;
  double start_ns = 0, duration_ns = 0;
  std::array<double, kEngineCount> engine_ns{};
  uint64_t bytes = 0;
};

// One launched piece of work, kept when tracing is on.
struct TraceRecord {
  std::string name;
  int device;
  int queue;
  double start_ns;
  double duration_ns;
  std::array<double, kEngineCount> engine_ns{};  // busy time per engine, from the cost model
  double flops = 0;
  uint64_t bytes = 0;
  std::string detail;  // e.g. operand shapes
  uint64_t tag = 0;    // the launching thread's trace tag (set_trace_tag) when it was launched
  std::vector<TraceSpan> parts;  // the ops of a launched program, when the caller gave them
};

// Process-wide switch: every queue records TraceRecords while it is on (a profiler session).
void set_tracing_enabled(bool on);
// Whether launches make TraceRecords: tracing is on, or a trace observer is set.
bool tracing_enabled();

// A process-wide observer of launched work (a profiler plugin): called with each record as its
// work is launched, apart from the recorded trace. An empty function removes it.
using TraceObserver = std::function<void(const TraceRecord&)>;
void set_trace_observer(TraceObserver observer);

// Note [Paused clocks]
// Pausing the clocks: while paused (pauses nest), work the pausing thread launches advances no
// queue's clock and makes no trace record; it is host work that is not the simulated
// program's (the tensors a compiler makes for itself while a program compiles, an NKI
// kernel's host copies of its operands). The pause belongs to the calling thread, not the
// process: another thread's work, on any queue, is charged as usual meanwhile. Per thread
// rather than per queue, because the work to hide is exactly what the pausing thread
// launches, while a queue can be shared with threads whose work is the program's.
void pause_clocks();
void resume_clocks();
bool clocks_paused();

// A tag the calling thread gives the work it launches from now on (a profiler's correlation id
// of the op being run); 0 for none.
void set_trace_tag(uint64_t tag);
uint64_t trace_tag();

// Note [Shared engines]
// The streams of one NeuronCore share its engines (TensorE, VectorE, ScalarE, GpSimdE, its DMA
// queues) and its HBM bandwidth: work on two streams overlaps only where it uses different
// ones. Each resource is free from some simulated time on; a launch starts when its queue
// is ready and every resource it uses is free, and holds each of them for its busy time from
// its start. Launches take resources in the order the host issues them (as a hardware queue
// arbitrates in issue order), so per-resource busy time never exceeds the wall span.
class SharedEngines {
 public:
  // The earliest start of `cost`'s work with respect to these resources.
  double earliest_start(const OpCost& cost) const;
  // Marks `cost`'s resources busy from `start`.
  void occupy(const OpCost& cost, double start);
  static bool uses_any(const OpCost& cost);

  SpinLock mutex;  // held by a launch from its earliest_start to its occupy (Note [Spin locks])

 private:
  std::array<double, kEngineCount + 1> free_at_{};  // the engines, then the HBM share
};

class Queue {
 public:
  // `health` (the device's fault state, may be null) is consulted on every launch; `engines`
  // (the device's, may be null: a queue of its own) are shared with the device's other queues.
  Queue(int device, int id, Health* health = nullptr, SharedEngines* engines = nullptr)
      : device_(device), id_(id), health_(health), engines_(engines) {}

  int device() const { return device_; }
  int id() const { return id_; }
  // Simulated time at which all work launched so far has finished.
  double now_ns() const;
  // Appends work of the given duration; returns its finish time.
  double launch(const std::string& name, double duration_ns);
  // Appends an op whose duration and engine use come from the cost model.
  double launch(const std::string& name, const OpCost& cost, std::string detail = {});
  // Appends work of a given duration whose engine use `cost` describes (a DMA transfer, a
  // program of ops whose `parts` the trace records).
  double launch(const std::string& name, const OpCost& cost, double duration_ns,
                std::string detail, std::vector<TraceSpan> parts = {});
  // Work launched later starts no earlier than t (an event wait, a cross-queue dependency).
  void wait_until(double t_ns);
  // Appends an event record (Note [Event records]); returns the time it writes.
  double record_timestamp();

  void set_tracing(bool on);
  // Whether a launch on this queue makes a TraceRecord (this queue's tracing or the process's).
  bool tracing() const;
  std::vector<TraceRecord> take_trace();

 private:
  // Moves the clock `duration_ns` forward with one compare-and-swap; returns the work's start.
  double advance_clock(double duration_ns);

  int device_, id_;
  Health* health_;
  SharedEngines* engines_;
  mutable std::mutex mutex_;  // guards the trace (and orders launches while tracing)
  // Advanced by compare-and-swap, so that launches from several threads are serialized without
  // a lock and now_ns() (asked on every free of a device block) is a plain load.
  std::atomic<double> clock_ns_{0};
  std::atomic<bool> tracing_{false};
  std::vector<TraceRecord> trace_;
};

// Time one event record takes on its queue, ns (Note [Event records], in queue.cpp).
constexpr double kEventRecordNs = 100 / 1.4;

// A marker in a queue's timeline.
class Event {
 public:
  // Note [Event records]: recording is itself work on the queue.
  void record(Queue& queue);
  bool recorded() const { return recorded_; }
  int device() const { return device_; }
  double time_ns() const;  // throws trnsim::Error if never recorded
  // Work submitted to `queue` afterwards starts after this event.
  void block(Queue& queue) const;
  // Simulated milliseconds from `start` to `end`; both must be recorded on the same device.
  static double elapsed_ms(const Event& start, const Event& end);

 private:
  bool recorded_ = false;
  int device_ = -1;
  double time_ns_ = 0;
};

}  // namespace trnsim
