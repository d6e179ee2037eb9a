// The neuron side of torch.compile's generated kernels (torch_neuron/compile): their charge on
// the simulated clock (Note [Fused kernel cost] in torch_neuron/compile/scheduling.py).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <trnsim/work.h>

namespace torch_neuron {

// A generated kernel's work: `loops` as (engine: "vector", "scalar" or "gpsimd", elements, two
// inputs), bounded by `fused_ops`, the ATen ops fused into it as (name, elements, two inputs)
// (Note [Fused kernel bound] in trnsim's work.cpp: no bound when one of them is not streaming
// work alone, such as a matmul). Throws ValueError for an unknown engine.
using KernelLoops = std::vector<std::tuple<std::string, uint64_t, bool>>;
trnsim::FusedKernel fused_kernel(const KernelLoops& loops, const KernelLoops& fused_ops,
                                 bool sixteen_bit);

// Charges one run of generated kernel `name` on `device`'s current stream (one launch: the
// launch overhead once) and counts it as an executed op: its loops' streaming passes and its
// argument buffers' `bytes` of HBM traffic; `detail` (the ATen ops it fused) goes to the trace.
// `reads` and `writes`: its argument buffers, for a compiled graph's schedule (Note [Compiled
// graph schedule]).
void charge_compiled_kernel(c10::DeviceIndex device, const std::string& name, uint64_t bytes,
                            trnsim::FusedKernel kernel, const std::string& detail,
                            const std::vector<at::Tensor>& reads = {},
                            const std::vector<at::Tensor>& writes = {});

}  // namespace torch_neuron
