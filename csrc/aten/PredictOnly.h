// Note [Predict-only execution]
// With execution off (TORCH_NEURON_EXECUTE=0, torch_neuron.set_execute(False)) ops are charged
// on the simulated clock and allocate simulated HBM exactly as when they compute, but their
// results are not computed: an op runs on meta tensors shaped like its arguments, which gives
// its results' shapes, strides and dtypes (and its shape errors), and the results are neuron
// tensors of that geometry over fresh HBM blocks that nothing writes. Simulated HBM is reserved
// address space that the OS commits on first touch (trnsim/hbm.cpp), so a full-size model's
// untouched weights and activations use no RAM. Values are undefined; anything that needs one
// (an op whose output shape depends on data, a copy to the CPU, .item() of a non-float) raises,
// naming this mode. .item() of a floating-point scalar (a loss to print) is NaN.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <optional>
#include <string>

namespace c10 {
class OperatorHandle;
}

namespace torch_neuron {

// Whether ops compute their results (the default) or are only charged.
bool execution_enabled();
void set_execution_enabled(bool enabled);

// What a predicted op read and wrote, for charging it.
struct PredictedOp {
  c10::DeviceIndex device = -1;
  c10::SmallVector<at::Tensor, 4> inputs;  // the neuron tensor arguments
  uint64_t input_bytes = 0;                // their bytes, out= arguments excluded
  uint64_t output_bytes = 0;
};

// Runs `op` on meta tensors and leaves neuron results of the same geometry on the stack; in-place
// and out= arguments get the meta run's sizes and strides (and more HBM if they grew).
PredictedOp predict_on_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// A meta tensor with `t`'s dtype, sizes and strides (its values are never read).
at::Tensor meta_like(const at::Tensor& t);
// A neuron tensor on `device` with `meta`'s geometry over a fresh, unwritten HBM block.
at::Tensor neuron_like(const at::Tensor& meta, c10::DeviceIndex device);

// What a dedicated kernel computes on: a host view of `t`'s memory (HostView.h), or in
// predict-only mode a meta tensor of its geometry. Undefined and CPU tensors pass unchanged.
at::Tensor compute_view(const at::Tensor& t);
std::optional<at::Tensor> compute_view(const std::optional<at::Tensor>& t);
// A dedicated kernel's result as a neuron tensor: the host result adopted where it lies in HBM,
// or for a meta result (predict-only mode) a fresh block of its geometry.
at::Tensor device_result(at::Tensor result, c10::DeviceIndex device);

// Raises NotImplementedError: `what` needs values, which predict-only mode does not compute.
[[noreturn]] void refuse_without_values(const std::string& what);

}  // namespace torch_neuron
