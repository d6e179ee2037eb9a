#include "aten/CompiledKernels.h"

#include <trnsim/cost.h>
#include <trnsim/queue.h>

#include "aten/OpPolicy.h"
#include "aten/OpTracking.h"
#include "aten/StreamingPasses.h"
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

std::vector<std::pair<std::string, bool>> op_passes(const std::string& name, bool two_inputs) {
  OpClass op_class = classify_op(name);
  // Matmuls that Inductor generates as loops (small ones it decomposes) multiply and add on
  // VectorE; anything else it generates is a streaming op.
  if (op_class == OpClass::Matmul || op_class == OpClass::Convolution ||
      op_class == OpClass::Fallback) {
    op_class = OpClass::Vector;
    two_inputs = true;
  }
  const PassPlan plan = plan_passes(base_op_name(name), op_class, two_inputs);
  std::vector<std::pair<std::string, bool>> out;
  for (int i = 0; i < plan.count; ++i) {
    out.emplace_back(trnsim::engine_name(plan.passes[i].engine),
                     plan.passes[i].pass == trnsim::Pass::TwoInput);
  }
  return out;
}

}  // namespace torch_neuron
