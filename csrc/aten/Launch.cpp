#include "aten/Launch.h"

#include <trnsim/cost.h>

#include "aten/OpCost.h"
#include "aten/OpTracking.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

void launch_streaming(const OpHandle& op, const at::Tensor& tensor, uint64_t bytes) {
  const auto device = tensor.device().index();
  const auto elements = static_cast<uint64_t>(tensor.numel());
  current_queue(device).launch(
      op.name, trnsim::streaming_cost(system().instance(), trnsim::Engine::Vector, elements, bytes),
      trnsim::tracing_enabled() ? describe_tensors({tensor}) : std::string());
  ++op.counter->executed;
}

}  // namespace torch_neuron
