// The boxed CPU fallback: any ATen op without a neuron kernel runs on the CPU. ATen's
// cpu_fallback copies the arguments to the host, runs the CPU kernel and copies results back;
// those copies go through our copy kernel, so the simulated clock is charged the host round
// trip. Here the op is counted (get_fallback_ops()) or, with TORCH_NEURON_FALLBACK=error,
// refused.
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "aten/OpTracking.h"
#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

// A boxed fallback gets no device check from the dispatcher, and the CPU round trip would
// silently compute on tensors of two neuron devices; refuse them as a device kernel would.
// (CPU tensors are left to the op: some ops, like indexing, accept CPU index tensors.)
void check_one_neuron_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  std::optional<c10::Device> seen;
  auto visit = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kNeuron) return;
    if (!seen) seen = t.device();
    TORCH_CHECK(*seen == t.device(), "Expected all tensors to be on the same device, but found "
                "at least two devices, ", *seen, " and ", t.device(), "!");
  };
  for (const auto& arg : torch::jit::last(stack, op.schema().arguments().size())) {
    if (arg.isTensor()) {
      visit(arg.toTensor());
    } else if (arg.isTensorList()) {
      for (const at::Tensor& t : arg.toTensorList()) visit(t);
    } else if (arg.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : arg.toOptionalTensorList()) {
        if (t.has_value()) visit(*t);
      }
    }
  }
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  std::string name = schema.name();
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  check_one_neuron_device(op, *stack);
  TORCH_CHECK(!fallback_is_error(), "operator ", name,
              " has no neuron kernel and would fall back to the CPU, which "
              "TORCH_NEURON_FALLBACK=error forbids. Unset TORCH_NEURON_FALLBACK (or call "
              "torch_neuron.set_fallback_error(False)) to allow CPU fallback.");
  count_fallback_op(name);
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torch_neuron
