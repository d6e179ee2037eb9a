// Index bounds checks for gather/scatter-style ops, done before the kernel runs so that a bad
// index gets an IndexError naming it and the valid range (what a device assert would never
// tell you), for every op of the family alike.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>

namespace c10 {
class OperatorHandle;
}

namespace torch_neuron {

// `base_name` is the op name without namespace and overload ("index_select"); `args` are the
// op's arguments on the stack, still neuron tensors.
void check_index_bounds(const std::string& base_name, c10::ArrayRef<c10::IValue> args);

// The same checks for callers that have the arguments typed.
enum class IndexCheck {
  None,
  DimIndex,  // (self, dim, index, ...): index_select, gather, scatter*, index_add/copy/fill...
  Take,      // (self, index): take, indices into the flattened tensor
};
IndexCheck index_check_for(const std::string& base_name);
void check_dim_index(const std::string& op, const at::Tensor& self, int64_t dim,
                     const at::Tensor& index);
void check_take_index(const at::Tensor& self, const at::Tensor& index);

// Raises the error the CPU kernel raises for a call whose index the pre-check (`ours`) found
// out of range: the CPU checks the other arguments first (shapes, overlap), so for those it
// raises its own error; for an index error, the pre-check's message with the exception type the
// CPU raises (IndexError or RuntimeError).
[[noreturn]] void raise_index_error_as_cpu(const c10::OperatorHandle& op,
                                           c10::ArrayRef<c10::IValue> arguments,
                                           const c10::Error& ours);

}  // namespace torch_neuron
