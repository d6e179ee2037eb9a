// Visiting the tensors among a boxed op's arguments (tensors, tensor lists, optional tensor
// lists), as the dispatcher passes them.
#pragma once

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

namespace torch_neuron {

template <typename F>
void for_each_tensor_argument(c10::ArrayRef<c10::IValue> arguments, F&& f) {
  for (const auto& value : arguments) {
    if (value.isTensor()) {
      f(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) f(t);
    } else if (value.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
        if (t.has_value()) f(*t);
      }
    }
  }
}

}  // namespace torch_neuron
