#include "aten/CompiledKernels.h"

#include <c10/util/Exception.h>

#include <utility>

#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

trnsim::FusedKernel fused_kernel(const KernelLoops& loops, const KernelLoops& fused_ops,
                                 bool sixteen_bit) {
  trnsim::FusedKernel kernel;
  for (const auto& [engine, elements, two_inputs] : loops) {
    TORCH_CHECK_VALUE(engine == "vector" || engine == "scalar" || engine == "gpsimd",
                      "_charge_kernel: unknown engine '", engine, "'");
    trnsim::Streaming loop;
    loop.engine = engine == "scalar"   ? trnsim::Engine::Scalar
                  : engine == "gpsimd" ? trnsim::Engine::GpSimd
                                       : trnsim::Engine::Vector;
    loop.elements = elements;
    loop.two_inputs = two_inputs;
    loop.sixteen_bit = sixteen_bit;
    kernel.loops.push_back(loop);
  }
  for (const auto& [op, elements, two_inputs] : fused_ops) {
    auto alone = eager_streaming(op, elements, two_inputs, sixteen_bit);
    if (!alone) {
      kernel.fused_ops.clear();
      break;
    }
    kernel.fused_ops.push_back(*alone);
  }
  return kernel;
}

void charge_compiled_kernel(c10::DeviceIndex device, const std::string& name, uint64_t bytes,
                            trnsim::FusedKernel kernel, const std::string& detail,
                            const std::vector<at::Tensor>& reads,
                            const std::vector<at::Tensor>& writes) {
  charge(current_queue(resolve_device(device)), name, &op_counter(name),
         trnsim::Work{std::move(kernel), bytes}, [&] { return detail; }, Placement::Device,
         Operands{reads, writes, {}, {}});
}

}  // namespace torch_neuron
