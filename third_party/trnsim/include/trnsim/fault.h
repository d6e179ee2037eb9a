// Simulated device faults, so that programs can test what they do when a NeuronCore fails.
//
// A fault is armed on a device for its Nth launch (any work put on one of its queues: an op, a
// copy, a fill). That launch raises DeviceFault with the status the Neuron runtime reports for
// such a failure, and the device stays failed: every later launch, allocation or
// synchronization on it raises the same error, as a NeuronCore that hit an uncorrectable error
// stays unusable until its process restarts. Other devices are unaffected.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "trnsim/error.h"

namespace trnsim {

enum class FaultKind {
  HbmUncorrectable,  // uncorrectable HBM error: NRT_EXEC_HW_ERR_HBM_UE (1201)
  ExecTimeout,       // an execution that never completes: NRT_TIMEOUT (5)
  DeviceLost,        // the NeuronCore stops responding: NRT_HW_ERROR (6)
};

// "hbm_ue", "timeout", "lost" (the names the environment variable and the Python API take).
FaultKind parse_fault_kind(const std::string& name);
const char* fault_kind_name(FaultKind kind);

// The error a failed device raises. what() starts with the runtime's status, for example
// "NRT Error NRT_EXEC_HW_ERR_HBM_UE(1201): ...".
class DeviceFault : public Error {
 public:
  DeviceFault(FaultKind kind, int device, uint64_t launch);
  FaultKind kind() const { return kind_; }
  int status() const;

 private:
  FaultKind kind_;
};

// The fault state of one device. Cheap when nothing is armed: one relaxed load per launch.
class Health {
 public:
  // The `after_launches`-th launch from now (1 = the next one) fails.
  void arm(FaultKind kind, uint64_t after_launches);
  // Called by every launch on the device's queues; throws DeviceFault when the armed launch
  // comes, and on every launch once the device has failed.
  void on_launch(int device) {
    if (state_.load(std::memory_order_relaxed) != State::Healthy) count_launch(device);
  }
  // Throws DeviceFault if the device has failed (allocation, synchronization).
  void check(int device) const;
  bool failed() const { return state_.load(std::memory_order_acquire) == State::Failed; }

 private:
  enum class State { Healthy, Armed, Failed };
  void count_launch(int device);

  mutable std::mutex mutex_;
  std::atomic<State> state_{State::Healthy};
  FaultKind kind_ = FaultKind::HbmUncorrectable;
  uint64_t remaining_ = 0;     // launches until the fault, while armed
  uint64_t failed_launch_ = 0;  // the launch that failed
  uint64_t launches_ = 0;       // counted while armed or failed
};

}  // namespace trnsim
