// Convolution through PyTorch's hook for accelerator backends: at::convolution on a neuron
// tensor lands in convolution_overrideable (and its backward in
// convolution_backward_overrideable). Both run ATen's CPU convolution on the device memory
// (Note [Host execution]) and are charged as TensorE work (im2col matmul, OpWork.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "aten/PredictOnly.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/HostView.h"

namespace torch_neuron {
namespace {

// Every tensor of a convolution must be on the input's NeuronCore, as CUDA requires (a module
// left on the CPU or on another core would otherwise be read silently).
void check_same_device(const char* op, const at::Tensor& input,
                       std::initializer_list<const at::Tensor*> others) {
  for (const at::Tensor* t : others) {
    if (t == nullptr || !t->defined()) continue;
    // PyTorch's wording for mixed devices, which code (and CUDA users) look for.
    TORCH_CHECK(t->device() == input.device(), "Expected all tensors to be on the same device, ",
                "but found at least two devices, ", input.device(), " and ", t->device(), "! (",
                op, ": the input is on ", input.device(), " and a ",
                t->sizes().size() == 1 ? "bias" : "weight", " on ", t->device(),
                "; move the module to the input's device: module.to(\"", input.device(), "\"))");
  }
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias,
                                    c10::IntArrayRef stride, c10::IntArrayRef padding,
                                    c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  check_same_device("convolution", input,
                    {&weight, bias.has_value() ? &bias.value() : nullptr});
  const auto device = input.device().index();
  at::Tensor out;
  {
    AllocateOnDevice allocate_on(device);
    out = at::convolution(compute_view(input), compute_view(weight), compute_view(bias),
                          stride, padding, dilation, transposed, output_padding, groups);
  }
  out = device_result(std::move(out), device);
  static const OpHandle op("aten::convolution_overrideable");
  charge(device, op, describe_kernel(OpClass::Convolution, op.name, {input, weight}, {out}),
         [&] { return describe_tensors({input, weight}); });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
    bool transposed, c10::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  check_same_device("convolution_backward", input, {&grad_output, &weight});
  const auto device = input.device().index();
  // The bias has one entry per output channel (weight is [out, in/groups, ...] or, transposed,
  // [in, out/groups, ...]).
  const int64_t out_channels = transposed ? weight.size(1) * groups : weight.size(0);
  std::tuple<at::Tensor, at::Tensor, at::Tensor> grads;
  {
    AllocateOnDevice allocate_on(device);
    grads = at::convolution_backward(compute_view(grad_output), compute_view(input),
                                     compute_view(weight), c10::IntArrayRef{out_channels}, stride,
                                     padding, dilation, transposed, output_padding, groups,
                                     output_mask);
  }
  auto& [grad_input, grad_weight, grad_bias] = grads;
  grad_input = device_result(std::move(grad_input), device);
  grad_weight = device_result(std::move(grad_weight), device);
  grad_bias = device_result(std::move(grad_bias), device);
  static const OpHandle op("aten::convolution_backward_overrideable");
  charge(device, op,
         describe_kernel(OpClass::Convolution, op.name, {grad_output, input, weight},
                         {grad_input, grad_weight}),
         [&] { return describe_tensors({grad_output, input, weight}); });
  return grads;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace torch_neuron
