#include "aten/Launch.h"

#include <trnsim/cost.h>

#include "aten/OpTracking.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

void launch(const char* op_name, c10::DeviceIndex device, double duration_ns) {
  current_queue(device).launch(op_name, duration_ns);
  count_executed_op(op_name);
}

void launch_streaming(const char* op_name, const at::Tensor& tensor, uint64_t bytes) {
  launch(op_name, tensor.device().index(),
         trnsim::streaming_duration_ns(system().instance(), bytes));
}

}  // namespace torch_neuron
