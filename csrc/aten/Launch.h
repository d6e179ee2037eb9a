// The launch helper every device kernel uses: it charges the op's simulated duration to the
// current stream of the op's device and counts the op as executed on neuron.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace torch_neuron {

void launch(const char* op_name, c10::DeviceIndex device, double duration_ns);

// Shorthand for ops bound by HBM traffic: `bytes` read plus written on `tensor`'s device.
void launch_streaming(const char* op_name, const at::Tensor& tensor, uint64_t bytes);

}  // namespace torch_neuron
