// Writing a constant (fill_, zero_) and reading one element back (_local_scalar_dense, behind
// .item() and Python's float()/bool() of a tensor).
#include <ATen/core/Tensor.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/fill.h>
#include <ATen/ops/zero.h>
#include <torch/library.h>

#include <limits>
#include <string>

#include <trnsim/transfer.h>

#include "aten/HostView.h"
#include "aten/Launch.h"
#include "aten/OpCost.h"
#include "aten/OpTracking.h"
#include "aten/PredictOnly.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (execution_enabled()) {  // else charged only (Note [Predict-only execution])
    at::Tensor view = host_view(self);
    view.fill_(value);
    recycle_host_view(std::move(view));
  }
  static const OpHandle op("aten::fill_");
  launch_streaming(op, self, self.nbytes());
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports a 0-dimensional value tensor, but got one "
              "with ", value.dim(), " dimension(s)");
  // Reading a neuron scalar is a device-to-host copy of one element, charged as such.
  if (!execution_enabled() && value.device().type() == kNeuron) return fill_scalar(self, 0);
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  const uint64_t bytes = self.element_size();
  const double ns =
      trnsim::copy_duration_ns(system().instance(), trnsim::CopyKind::DeviceToHost, bytes);
  static const OpHandle op("aten::_local_scalar_dense");
  current_queue(self.device().index()).launch(op.name, transfer_cost(ns, bytes), ns, std::string());
  ++op.counter->executed;
  if (!execution_enabled()) {
    // Note [Predict-only execution]: a floating-point value (a loss to print) is NaN; any
    // other would steer the program (a loop bound, a branch), so it is refused.
    if (!at::isFloatingType(self.scalar_type())) {
      refuse_without_values("reading a " + std::string(c10::toString(self.scalar_type())) +
                            " value (.item(), int(), bool() of a neuron tensor)");
    }
    TORCH_WARN_ONCE("torch_neuron predict-only mode: .item() of a floating-point neuron tensor "
                    "returns NaN, since values are not computed");
    return at::Scalar(std::numeric_limits<double>::quiet_NaN());
  }
  return at::_local_scalar_dense(host_view(self));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

}  // namespace torch_neuron
