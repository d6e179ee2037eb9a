// Tensor kinds neuron does not have (Unsupported.cpp).
#pragma once

#include <string>

namespace torch_neuron {

// Throw NotImplementedError: neuron has no quantized, sparse or nested tensors.
[[noreturn]] void refuse_quantized(const std::string& op_name);
[[noreturn]] void refuse_sparse(const std::string& op_name);
[[noreturn]] void refuse_nested(const std::string& op_name);

}  // namespace torch_neuron
