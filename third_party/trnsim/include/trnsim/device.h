// One logical NeuronCore: its HBM and its queues.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "trnsim/fault.h"
#include "trnsim/hbm.h"
#include "trnsim/instance.h"
#include "trnsim/queue.h"

namespace trnsim {

class Device {
 public:
  // `index` is the framework-visible index, `core` the NeuronCore id on the instance.
  Device(int index, int core, const InstanceSpec& instance);
  ~Device();

  int index() const { return index_; }
  int core() const { return core_; }
  int chip() const { return core_ / instance_.logical_cores_per_chip; }
  const InstanceSpec& instance() const { return instance_; }

  // HBM is reserved on first use so that unused devices cost no address space.
  Hbm& hbm();
  bool hbm_reserved() const;
  // Queue `id` (0 is the default queue), created on first use; ids in [0, kMaxQueues).
  static constexpr int kMaxQueues = 1024;
  Queue& queue(int id);
  // Simulated time at which every queue of this device has finished (device synchronize).
  double synchronize_ns();
  // When the work launched so far on any queue leaves this core's DMA queues (its HBM share)
  // free: a collective, which needs them, starts no earlier (Note [Collective DMA share]).
  double dma_free_ns();
  // The trace records of all queues of this device (emptying them).
  std::vector<TraceRecord> take_trace();
  // Simulated faults (trnsim/fault.h): arm one, or ask whether the device has failed.
  Health& health() { return health_; }

 private:
  int index_, core_;
  const InstanceSpec& instance_;
  mutable std::mutex mutex_;
  std::unique_ptr<Hbm> hbm_;
  Health health_;
  SharedEngines engines_;  // shared by the queues (Note [Shared engines] in queue.h)
  // Created on first use and never destroyed before the device, so readers need no lock.
  std::vector<std::atomic<Queue*>> queues_;
};

}  // namespace trnsim
