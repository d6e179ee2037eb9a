// Note [Float64 narrowing checks]
// Narrowing computes an op's float64 neuron tensors in float32 (DtypePolicy.h). The CPU kernel
// then sees float32 where the user's program has float64, which by itself would change what
// PyTorch's checks and type promotion decide (found by the differential fuzzer, test/fuzz):
//   - result dtypes: ones(2) + a float64 tensor is float64, but float32 + float32 is float32,
//     and a float32 result of float64 inputs must not come back as float64 either;
//   - errors: complex(float64, float32) or mm(float64, float32) must raise as on the CPU, and
//     narrowing must not add an error the CPU does not raise;
//   - overlap: a float32 copy of an argument no longer shares memory with the other arguments,
//     so partial-overlap errors and the results of overlapping reads would be lost.
// So before narrowing, the op runs on meta tensors with the original dtypes: PyTorch's meta
// kernels apply the same shape, dtype and promotion rules as its CPU kernels, without data.
// Its result dtypes are the ones the narrowed results are cast to. Whenever narrowing cannot
// be trusted to behave as the CPU does, the op runs exactly in float64 on the host instead
// (what TORCH_NEURON_FLOAT64=exact does for every op), which is the CPU's behaviour by
// construction:
//   - a float64 neuron tensor shares memory with another tensor argument, or its elements
//     overlap each other (an expanded view; its float32 copy would be dense);
//   - float64 and float32 tensors are mixed: whether PyTorch accepts the mix is the kernel's
//     decision (add promotes, mm raises; meta kernels do not always check it), and narrowed,
//     both would be float32;
//   - the meta run raises (a genuine error, which the exact run raises the CPU's way, or an op
//     without meta support, such as one whose result shape depends on data);
//   - the narrowed run raises (HostExecution.cpp retries exactly).
#include "aten/Float64Narrowing.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/List.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <unordered_map>

#include "aten/TensorArguments.h"
#include "runtime/HostView.h"
#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {


// A float64 neuron tensor whose elements overlap, or whose memory another (different) tensor
// argument also uses.
bool float64_argument_overlaps(c10::ArrayRef<c10::IValue> arguments) {
  std::vector<at::Tensor> tensors;
  for_each_tensor_argument(arguments, [&](const at::Tensor& t) {
    if (on_neuron(t)) tensors.push_back(t);
  });
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].scalar_type() != at::kDouble) continue;
    if (at::has_internal_overlap(tensors[i]) == at::MemOverlap::Yes) return true;
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (i != j && !tensors[i].is_same(tensors[j]) &&
          tensors[i].storage().is_alias_of(tensors[j].storage())) {
        return true;
      }
    }
  }
  return false;
}

// Meta tensors standing in for the arguments: same sizes, strides, dtype and conj/neg bits, one
// meta tensor per distinct tensor (so that add_(a, a) stays an op on one tensor). CPU 0-dim
// tensors stay (TensorIterator accepts them next to any device, as it does next to neuron).
class MetaArguments {
 public:
  c10::IValue convert(const c10::IValue& value) {
    if (value.isTensor()) return to_meta(value.toTensor());
    if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(to_meta(t));
      return list;
    }
    if (value.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(to_meta(*t)) : std::nullopt);
      }
      return list;
    }
    if (value.isDevice() && value.toDevice().type() == kNeuron) return c10::Device(c10::kMeta);
    return value;
  }

 private:
  at::Tensor to_meta(const at::Tensor& t) {
    if (!t.defined() || (t.device().is_cpu() && t.dim() == 0)) return t;
    auto it = made_.find(t.unsafeGetTensorImpl());
    if (it != made_.end()) return it->second;
    at::Tensor meta = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
    if (t.is_conj()) meta._set_conj(true);
    if (t.is_neg()) meta._set_neg(true);
    made_.emplace(t.unsafeGetTensorImpl(), meta);
    return meta;
  }

  std::unordered_map<const c10::TensorImpl*, at::Tensor> made_;
};

// The meta run is a check: its warnings (resized outputs, ...) would repeat the real run's.
class DiscardWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

}  // namespace

NarrowingPlan plan_float64_narrowing(const c10::OperatorHandle& op,
                                     c10::ArrayRef<c10::IValue> arguments) {
  NarrowingPlan plan;
  bool has_float64 = false;
  bool has_float32 = false;
  for_each_tensor_argument(arguments, [&](const at::Tensor& t) {
    has_float64 = has_float64 || (on_neuron(t) && t.scalar_type() == at::kDouble);
    has_float32 = has_float32 || (t.defined() && t.scalar_type() == at::kFloat);
  });
  if (!has_float64 || has_float32 || float64_argument_overlaps(arguments)) return plan;

  torch::jit::Stack meta_stack;
  MetaArguments meta;
  for (const auto& value : arguments) meta_stack.push_back(meta.convert(value));
  try {
    // Below autograd, as this kernel runs: the meta run records nothing.
    c10::impl::ExcludeDispatchKeyGuard no_autograd(c10::autograd_dispatch_keyset);
    DiscardWarnings discard;
    c10::WarningUtils::WarningHandlerGuard quiet(&discard);
    op.callBoxed(&meta_stack);
  } catch (const std::exception&) {
    return plan;
  }
  for (const auto& value : meta_stack) {
    if (value.isTensor()) {
      const at::Tensor& t = value.toTensor();
      plan.result_dtypes.push_back(t.defined() ? std::optional(t.scalar_type()) : std::nullopt);
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        plan.result_dtypes.push_back(t.scalar_type());
      }
    }
  }
  plan.narrow = true;
  return plan;
}

std::vector<c10::IValue> copy_arguments(c10::ArrayRef<c10::IValue> arguments) {
  std::vector<c10::IValue> copy;
  copy.reserve(arguments.size());
  for (const auto& value : arguments) {
    if (value.isTensorList()) {
      copy.emplace_back(value.toTensorList().copy());
    } else if (value.isOptionalTensorList()) {
      copy.emplace_back(value.toOptionalTensorList().copy());
    } else {
      copy.push_back(value);
    }
  }
  return copy;
}

}  // namespace torch_neuron
