#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuron {

// Adds torch_neuron._C._ProcessGroupNeuron.
void bind_distributed(pybind11::module& m);

}  // namespace torch_neuron
