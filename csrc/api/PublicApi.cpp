// The C++ API of include/torch_neuron/torch_neuron.h for libtorch programs, in one place: each
// function forwards to the layer that owns it.
#include <torch_neuron/torch_neuron.h>

#include "aten/HostExecution.h"
#include "aten/OpTracking.h"
#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"

namespace torch_neuron {

int init() {
  register_host_kernels();
  return device_count();
}

int device_count() { return static_cast<int>(visible_device_count()); }

std::string instance_name() { return system().instance().name; }

double synchronize(int index) {
  return simulator_call(
      [&] { return device(resolve_device(static_cast<c10::DeviceIndex>(index))).synchronize_ns(); });
}

std::map<std::string, int64_t> get_executed_ops() { return executed_ops(); }
std::map<std::string, int64_t> get_fallback_ops() { return fallback_ops(); }
void clear_op_tracking() { reset_op_counts(); }
void set_fallback_error(bool on) { set_fallback_raises(on); }

}  // namespace torch_neuron
