// The neuron side of torch.compile's generated kernels (torch_neuron/_inductor): their charge
// on the simulated clock (Note [Fused kernel cost] in torch_neuron/_inductor/scheduling.py).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace torch_neuron {

// Work of one generated kernel: elements per kind of engine pass, and its HBM traffic.
struct KernelWork {
  uint64_t bytes = 0;
  uint64_t vector_one_input = 0, vector_two_input = 0, scalar = 0, gpsimd = 0;
  bool sixteen_bit = false;
};

// Launches the kernel on `device`'s current stream (one launch: the launch overhead once) and
// counts it as an executed op named `name`; `detail` (the ATen ops it fused) goes to the trace.
void charge_compiled_kernel(c10::DeviceIndex device, const std::string& name,
                            const KernelWork& work, const std::string& detail);

}  // namespace torch_neuron
