#include "aten/CompiledKernels.h"

#include <utility>

#include "aten/Charge.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {

void charge_compiled_kernel(c10::DeviceIndex device, const std::string& name, uint64_t bytes,
                            trnsim::FusedKernel kernel, const std::string& detail,
                            const std::vector<at::Tensor>& reads,
                            const std::vector<at::Tensor>& writes) {
  charge(current_queue(resolve_device(device)), name, &op_counter(name),
         trnsim::Work{std::move(kernel), bytes}, [&] { return detail; }, Placement::Device,
         Operands{reads, writes, {}, {}});
}

}  // namespace torch_neuron
