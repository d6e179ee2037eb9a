// Note [Simulator errors]
// trnsim raises its own exception types (trnsim/error.h, trnsim/fault.h): it knows nothing of
// PyTorch. They become PyTorch errors here, at the boundary, so Python sees the exception type
// it expects: torch.OutOfMemoryError for HBM that does not fit, RuntimeError for a device fault
// or any other simulator error. Code that calls into trnsim where it can throw to a user (a
// launch, an allocation, a synchronization) wraps the call in simulator_call.
#pragma once

#include <c10/util/Exception.h>

#include <trnsim/error.h>

#include <utility>

namespace torch_neuron {

[[noreturn]] inline void raise_simulator_error(const trnsim::Error& e) {
  if (dynamic_cast<const trnsim::OutOfMemory*>(&e) != nullptr) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  }
  TORCH_CHECK(false, e.what());
}

template <class F>
decltype(auto) simulator_call(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const trnsim::Error& e) {
    raise_simulator_error(e);
  }
}

}  // namespace torch_neuron
