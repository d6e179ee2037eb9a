#include "trnsim/fault.h"

namespace trnsim {
namespace {

// Status names and codes of the Neuron runtime (nrt_status.h, NRT_STATUS:
// https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt_status.html).
struct Status {
  const char* name;
  int code;
  const char* what;
};

Status status_of(FaultKind kind) {
  switch (kind) {
    case FaultKind::HbmUncorrectable:
      return {"NRT_EXEC_HW_ERR_HBM_UE", 1201, "an uncorrectable HBM error"};
    case FaultKind::ExecTimeout:
      return {"NRT_TIMEOUT", 5, "an execution that did not complete (timed out)"};
    case FaultKind::DeviceLost:
      return {"NRT_HW_ERROR", 6, "a hardware error: the NeuronCore stopped responding"};
  }
  return {"NRT_FAILURE", 1, "a failure"};
}

std::string fault_message(FaultKind kind, int device, uint64_t launch) {
  const Status s = status_of(kind);
  return std::string("NRT Error ") + s.name + "(" + std::to_string(s.code) + "): neuron:" +
         std::to_string(device) + " reported " + s.what + " at launch " + std::to_string(launch) +
         " after the fault was armed (a simulated fault). The NeuronCore is unusable until the process restarts; "
         "tensors on other devices can still be saved.";
}

}  // namespace

FaultKind parse_fault_kind(const std::string& name) {
  if (name == "hbm_ue") return FaultKind::HbmUncorrectable;
  if (name == "timeout") return FaultKind::ExecTimeout;
  if (name == "lost") return FaultKind::DeviceLost;
  throw Error("unknown fault kind '" + name + "': use hbm_ue, timeout or lost");
}

const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::HbmUncorrectable: return "hbm_ue";
    case FaultKind::ExecTimeout: return "timeout";
    case FaultKind::DeviceLost: return "lost";
  }
  return "?";
}

DeviceFault::DeviceFault(FaultKind kind, int device, uint64_t launch)
    : Error(fault_message(kind, device, launch)), kind_(kind) {}

int DeviceFault::status() const { return status_of(kind_).code; }

void Health::arm(FaultKind kind, uint64_t after_launches) {
  if (after_launches == 0) throw Error("a fault needs after_launches >= 1 (1 = the next launch)");
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.load() == State::Failed) return;  // already failed: stays so
  kind_ = kind;
  remaining_ = after_launches;
  state_.store(State::Armed, std::memory_order_release);
}

void Health::count_launch(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++launches_;
  if (state_.load() == State::Armed && --remaining_ == 0) {
    failed_launch_ = launches_;
    state_.store(State::Failed, std::memory_order_release);
  }
  if (state_.load() == State::Failed) throw DeviceFault(kind_, device, failed_launch_);
}

void Health::check(int device) const {
  if (!failed()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  throw DeviceFault(kind_, device, failed_launch_);
}

}  // namespace trnsim
