#pragma once

#include <pybind11/pybind11.h>

namespace torch_neuron {

// Adds torch_neuron._C._nki_schedule and _charge_nki_kernel (NKI kernel timing).
void bind_nki(pybind11::module& m);

}  // namespace torch_neuron
