// PREMUL_SUM (a sum of inputs each multiplied by a factor, as FSDP reduces gradients) is a
// reduce op Gloo does not have; the process group and the virtual world's CPU backend apply
// its factor themselves.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>

namespace torch_neuron {

// The factor of a PREMUL_SUM op (a number, or a one-element tensor on the CPU or on neuron,
// read through its host view), or nullopt for any other op.
std::optional<double> premul_factor(const c10d::ReduceOp& op);

}  // namespace torch_neuron
