// Note [Composite kernels on neuron] and the registration of host execution for the ops it
// names (register_host_kernels in HostExecution.h).
#include <ATen/TensorSubclassLikeUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <string>

#include "aten/HostExecution.h"

namespace torch_neuron {

// Note [Composite kernels on neuron]: a composite kernel runs its decomposition with neuron
// tensors, where the CPU runs something else. Neuron computes with the CPU's kernels, so it
// must run what the CPU runs: the same values and the same result layout (strides).
//
// 1. Ops with both a CPU kernel and a composite kernel (CompositeExplicitAutograd(NonFunctional)
//    or CompositeImplicitAutograd): the dispatcher prefers the composite over our backend
//    fallback. For structured ops the composite just allocates an output and calls the out=
//    variant (two dispatches instead of one); for a few it is a different algorithm:
//    native_layer_norm and native_group_norm round differently, mish_backward too in float16,
//    and native_channel_shuffle returns a contiguous result where the CPU kernel keeps a
//    channels_last input's layout. Host execution is registered for exactly those ops. For the
//    CompositeImplicitAutograd ones the autograd key then stops decomposing as well, as on the
//    CPU. The _foreach_ ops (composite loops only) are registered too, to run as one op per
//    list.
// 2. Composite ops whose decomposition branches on the device (kCpuBranchOps): max_pool1d takes
//    a direct kernel with a contiguous result on the CPU and goes through max_pool2d_with_indices
//    elsewhere, whose result keeps a transposed input's stride order, so `.view()` on it failed
//    on neuron only. The CPU leaves that branch only to record a gradient (or for a tensor
//    subclass); neuron does the same: then the decomposition runs, as on the CPU, and otherwise
//    the op runs on the host, where the CPU's composite sees CPU tensors and takes its CPU
//    branch. (ATen's other device branches are hooks for accelerators that neuron implements to
//    match the CPU: convolution_overrideable, the fused attention, the fused RNN cells,
//    native_dropout.) test/python/ops/test_output_layout.py compares every OpInfo's result
//    layout with the CPU's, and checks that no op of kind 1 is left unregistered.
namespace {

// Composite ops that branch on `device().is_cpu()` in a way that shows in their results.
constexpr const char* kCpuBranchOps[] = {"max_pool1d"};

// When the CPU's composite leaves its CPU-only branch too: autograd records the op (reverse or
// forward mode), or an argument is a tensor subclass.
bool decomposes_on_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  for (const auto& value : torch::jit::last(stack, op.schema().arguments().size())) {
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    if (t.defined() && ((t.requires_grad() && c10::GradMode::is_enabled()) ||
                        t._fw_grad(/*level=*/0).defined() || at::isTensorSubclassLike(t))) {
      return true;
    }
  }
  return false;
}

void decompose(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
}

// AutogradPrivateUse1: a backend kernel for the op takes the composite away from the autograd
// key too, so this kernel decomposes where autograd needs it and passes the rest below.
void cpu_branch_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                         torch::jit::Stack* stack) {
  if (decomposes_on_cpu(op, *stack)) return decompose(op, stack);
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

// PrivateUse1 (also reached directly in inference mode).
void cpu_branch(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (decomposes_on_cpu(op, *stack)) return decompose(op, stack);
  run_on_host(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : kCpuBranchOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_branch>());
  }
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  for (const char* name : kCpuBranchOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_branch_autograd>());
  }
}

void register_host_kernels() {
  // Asked on every tensor creation: an atomic load after the first call (std::call_once alone
  // would also set two thread-locals per call).
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_acquire)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* library = new torch::Library(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    register_unboxed_host_kernels(*library);
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op.has_value() || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
      // The _foreach_ ops have only a composite per-tensor loop; run as one op they are one
      // launch for the whole list, like the multi-tensor kernels of an accelerator.
      const bool foreach = name.name.rfind("aten::_foreach_", 0) == 0;
      if (!foreach && !op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
      if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
          !op->hasKernelForDispatchKey(
              c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
          !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
        continue;
      }
      std::string qualified = name.name.substr(6);
      if (!name.overload_name.empty()) qualified += "." + name.overload_name;
      library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_on_host>());
    }
    // An op the rule above misses (found by the differential fuzzer): conj_physical_'s only
    // kernel is a composite that calls a CPU-only stub ("missing kernel for neuron").
    auto conj_physical_ = dispatcher.findOp({"aten::conj_physical_", ""});
    if (conj_physical_.has_value() &&
        !conj_physical_->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
      library->impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&run_on_host>());
    }
  });
  done.store(true, std::memory_order_release);
}

}  // namespace torch_neuron
