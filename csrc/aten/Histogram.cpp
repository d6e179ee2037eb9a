// histc of integer tensors. ATen's CPU kernel takes floating types only, CUDA's takes integers
// too, and code written for accelerators relies on that (transformers' MoE routing counts
// tokens per expert with an integer histc on any device but the CPU). Integers are binned with
// integer arithmetic on the host view, as CUDA does, and charged as one GpSimdE pass (computed
// or not: Note [One charge path]); floating inputs take the usual host execution.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/bincount.h>
#include <torch/library.h>

#include <ATen/ops/empty.h>

#include "aten/Charge.h"
#include "aten/HostExecution.h"
#include "aten/OpWork.h"
#include "aten/PredictOnly.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/HostView.h"

namespace torch_neuron {
namespace {

at::Tensor integer_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                         const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "histc: bins must be > 0, but got ", bins);
  const at::Tensor values = self.reshape(-1).to(at::kLong);
  int64_t low = min.toLong();
  int64_t high = max.toLong();
  if (low == high && values.numel() > 0) {  // no range given: the data's own range
    low = values.min().item<int64_t>();
    high = values.max().item<int64_t>();
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  TORCH_CHECK(low < high, "histc: max must be larger than min, but got min=", low,
              " and max=", high);
  const at::Tensor inside = values.masked_select(values.ge(low).logical_and(values.le(high)));
  // bin = (v - min) * bins / (max - min); the maximum itself belongs to the last bin.
  const at::Tensor bin = inside.sub(low).mul(bins).div(high - low, "floor").clamp_max(bins - 1);
  return at::bincount(bin, {}, bins).to(self.scalar_type());
}

void histc(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = torch::jit::peek(*stack, 0, 4).toTensor();
  if (!at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    run_on_host(op, stack);
    return;
  }
  const int64_t bins = torch::jit::peek(*stack, 1, 4).toInt();
  const at::Scalar min = torch::jit::peek(*stack, 2, 4).toScalar();
  const at::Scalar max = torch::jit::peek(*stack, 3, 4).toScalar();
  torch::jit::drop(*stack, 4);
  TORCH_CHECK(bins > 0, "histc: bins must be > 0, but got ", bins);
  const auto device = self.device().index();
  at::Tensor counts;
  if (execution_enabled()) {
    AllocateOnDevice allocate_on(device);
    counts = adopt_host_result(integer_histc(host_view(self), bins, min, max), device);
  } else {  // Note [Predict-only execution]: `bins` counts of undefined value
    counts = at::empty({bins}, self.options());
  }
  static const OpHandle histc_op("aten::histc");
  charge(device, histc_op, describe_kernel(OpClass::GpSimd, histc_op.name, {self}, {counts}),
         [&] { return describe_tensors({self}); });
  torch::jit::push(*stack, counts);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&histc>());
}

}  // namespace torch_neuron
