// Note [CPU scalars in composite ops]: PyTorch lets a 0-dim CPU tensor stand beside device
// tensors in any position of an elementwise op; it is read as a scalar. Host execution accepts
// such a tensor wherever the op reads it (HostExecution.cpp). A few composite ops, though,
// allocate their result with the *first* argument's options and then call their out= form:
// logical_and(torch.tensor(True), x) would make a CPU result and hand it to the out= kernel,
// which must refuse a CPU output beside neuron inputs. PyTorch's own backward formulas hit
// this (pow's exponent gradient computes logical_and(self == 0, exponent >= 0), where `self`
// may be a CPU scalar). For those ops the neuron kernel copies 0-dim CPU arguments to the
// device of the neuron arguments (a 4-byte host-to-device copy, as a real device needs too)
// and then runs the composite, so the result is a neuron tensor as with the scalar second.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <optional>

#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

bool is_cpu_scalar(const c10::IValue& v) {
  if (!v.isTensor()) return false;
  const auto& t = v.toTensor();
  return t.defined() && t.device().is_cpu() && t.dim() == 0;
}

void run_with_cpu_scalars_on_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  std::optional<c10::Device> device;
  for (const auto& v : args) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == kNeuron) {
      device = v.toTensor().device();
      break;
    }
  }
  if (device) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (!is_cpu_scalar(args[i])) continue;
      const auto& scalar = args[i].toTensor();
      at::Tensor moved = scalar.to(*device);
      // A wrapped Python number keeps its weaker part in type promotion.
      moved.unsafeGetTensorImpl()->set_wrapped_number(scalar.unsafeGetTensorImpl()->is_wrapped_number());
      (*stack)[stack->size() - args.size() + i] = std::move(moved);
    }
  }
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
}

}  // namespace

// The composites that allocate their result from the first argument (at::empty({0},
// self.options())); found by enumerating the CompositeExplicitAutograd ops with a 0-dim CPU
// tensor first (test_cpu_scalars.py checks every binary and ternary op of the op database).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"logical_and", "logical_or", "logical_xor", "complex", "polar"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&run_with_cpu_scalars_on_device>());
  }
}

}  // namespace torch_neuron
