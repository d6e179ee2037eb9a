// Note [Composite kernels on neuron] and the registration of host execution for the ops it
// names (register_host_kernels in HostExecution.h).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>
#include <mutex>
#include <string>

#include "aten/HostExecution.h"

namespace torch_neuron {

// Note [Composite kernels on neuron]: for ops that have both a CPU kernel and a
// CompositeExplicitAutograd(NonFunctional) kernel, the dispatcher prefers the composite over our
// backend fallback. For structured ops the composite just allocates an output and calls the
// out= variant (two dispatches instead of one); for a few (native_layer_norm,
// native_group_norm) it is a different algorithm with different rounding than the CPU kernel.
// Registering host execution for exactly those ops makes neuron match CPU bit for bit. The
// _foreach_ ops (composite loops only) are registered too, to run as one op per list.
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
              c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) {
        continue;
      }
      std::string qualified = name.name.substr(6);
      if (!name.overload_name.empty()) qualified += "." + name.overload_name;
      library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_on_host>());
    }
    // Two ops the rule above misses (found by the differential fuzzer): conj_physical_'s only
    // kernel is a composite that calls a CPU-only stub ("missing kernel for neuron"), and
    // mish_backward's CompositeImplicitAutograd decomposition rounds differently in float16
    // from its CPU kernel.
    for (const char* name : {"conj_physical_", "mish_backward"}) {
      auto op = dispatcher.findOp({std::string("aten::") + name, ""});
      if (op.has_value() && !op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
        library->impl(name, torch::CppFunction::makeFromBoxedFunction<&run_on_host>());
      }
    }
  });
  done.store(true, std::memory_order_release);
}

}  // namespace torch_neuron
