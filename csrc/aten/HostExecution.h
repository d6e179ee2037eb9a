// Host execution of neuron ops (Note [Host execution] in HostExecution.cpp), and the pieces of
// it that dedicated kernels reuse.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace c10 {
class OperatorHandle;
}
namespace torch {
class Library;
}

namespace torch_neuron {

// The boxed kernel of every neuron op without a dedicated kernel: runs ATen's CPU kernel on
// views of device memory. Dedicated boxed kernels call it for the cases they do not handle.
void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Registers host execution for ops whose composite kernel would otherwise win over it
// (Note [Composite kernels on neuron]). Idempotent; runs when the first neuron tensor is
// created, and from torch_neuron::init() and the Python package's import.
void register_host_kernels();

// Registers the typed kernels of the most frequent ops into `library` (Note [Unboxed host
// execution] in UnboxedHostKernels.cpp). Called by register_host_kernels.
void register_unboxed_host_kernels(torch::Library& library);
// The ops that have a typed kernel ("aten::add.Tensor"), once registered.
std::vector<std::string> unboxed_host_ops();

}  // namespace torch_neuron
