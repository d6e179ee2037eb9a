// When an op on float64 neuron tensors may be computed in float32 (Note [Float64 narrowing
// checks] in Float64Narrowing.cpp), and which dtypes its results must then have.
#pragma once

#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <optional>
#include <vector>

namespace c10 {
class OperatorHandle;
}

namespace torch_neuron {

struct NarrowingPlan {
  // Compute the op's float64 neuron tensors in float32. False: run it exactly on the host.
  bool narrow = false;
  // The dtype PyTorch gives each returned tensor (lists flattened, in order); nullopt for an
  // undefined result.
  std::vector<std::optional<c10::ScalarType>> result_dtypes;
};

// `arguments` are the op's arguments as the dispatcher passed them (neuron tensors, before any
// conversion). Call only when the float64 policy is to narrow.
NarrowingPlan plan_float64_narrowing(const c10::OperatorHandle& op,
                                     c10::ArrayRef<c10::IValue> arguments);

// A copy of `arguments` that shares tensors but not lists, so that the original arguments can
// be run again after a failed attempt converted the copy's lists in place.
std::vector<c10::IValue> copy_arguments(c10::ArrayRef<c10::IValue> arguments);

}  // namespace torch_neuron
