#include "aten/CompiledKernels.h"

#include <trnsim/cost.h>
#include <trnsim/queue.h>

#include "aten/OpTracking.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

void charge_compiled_kernel(c10::DeviceIndex device, const std::string& name,
                            const KernelWork& work, const std::string& detail) {
  const auto& instance = system().instance();
  trnsim::OpCost cost;
  cost.flops = static_cast<double>(work.vector_one_input + work.vector_two_input + work.scalar +
                                   work.gpsimd);
  cost.set_bytes(instance, work.bytes);
  cost.add_pass(instance, trnsim::Engine::Vector, work.vector_one_input, trnsim::Pass::OneInput,
                work.sixteen_bit);
  cost.add_pass(instance, trnsim::Engine::Vector, work.vector_two_input, trnsim::Pass::TwoInput,
                work.sixteen_bit);
  cost.add_pass(instance, trnsim::Engine::Scalar, work.scalar);
  cost.add_pass(instance, trnsim::Engine::GpSimd, work.gpsimd);
  current_queue(resolve_device(device))
      .launch(name, cost, trnsim::tracing_enabled() ? detail : std::string());
  count_executed_op(name);
}

}  // namespace torch_neuron
