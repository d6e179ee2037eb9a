// The launch helper of the native fill and random kernels: charges an op that streams `bytes`
// through VectorE on `tensor`'s device to the current stream and counts it as executed.
// (Host-executed and dedicated kernels charge through estimate_cost / charge_device_op.)
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "aten/OpTracking.h"

namespace torch_neuron {

void launch_streaming(const OpHandle& op, const at::Tensor& tensor, uint64_t bytes);

}  // namespace torch_neuron
