// Host execution of neuron ops (Note [Host execution] in HostExecution.cpp), and the pieces of
// it that dedicated kernels reuse.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

#include "aten/OpPolicy.h"

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

// Turns a CPU tensor that a kernel produced inside AllocateOnDevice(device) into a neuron tensor:
// without a copy when its memory is in that device's HBM (the usual case), by a copy otherwise.
// Pass the result by std::move: a tensor only the caller holds is converted in place.
at::Tensor adopt_host_result(at::Tensor cpu_result, c10::DeviceIndex device);

// Throw NotImplementedError: neuron has no quantized or sparse tensors (Unsupported.cpp).
[[noreturn]] void refuse_quantized(const std::string& op_name);
[[noreturn]] void refuse_sparse(const std::string& op_name);

// Charges an op that ran on `device` to the current stream's clock and counts it as executed.
void charge_device_op(const std::string& name, OpClass op_class, c10::DeviceIndex device,
                      const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& outputs);

}  // namespace torch_neuron
