// Index bounds checks for gather/scatter-style ops, done before the kernel runs so that a bad
// index gets an IndexError naming it and the valid range (what a device assert would never
// tell you), for every op of the family alike.
#pragma once

#include <ATen/core/stack.h>

#include <string>

namespace torch_neuron {

// `base_name` is the op name without namespace and overload ("index_select"); `args` are the
// op's arguments on the stack, still neuron tensors.
void check_index_bounds(const std::string& base_name, c10::ArrayRef<c10::IValue> args);

}  // namespace torch_neuron
