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

#include "runtime/HostView.h"
#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "aten/OpTracking.h"
#include "aten/KnownValues.h"
#include "aten/PredictOnly.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

// A device-to-host copy of one element of `t`: what reading a neuron scalar costs.
void charge_scalar_read(const at::Tensor& t) {
  static const OpHandle op("aten::_local_scalar_dense");
  charge(t.device().index(), op,
         {trnsim::Copy{trnsim::CopyKind::DeviceToHost, static_cast<uint64_t>(t.element_size())}});
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (!execution_enabled() && self.nbytes() <= kKnownValuesMaxBytes) {
    // A small fill's values are known (Note [Known values in predict-only mode]).
    ComputeKnownValues computing;
    fill_scalar(self, value);
    mark_values_known(self);
    return self;
  }
  if (execution_enabled()) {  // else charged only (Note [Predict-only execution])
    at::Tensor view = host_view(self);
    view.fill_(value);
    recycle_host_view(std::move(view));
  }
  static const OpHandle op("aten::fill_");
  charge(self.device().index(), op, vector_pass(self, self.nbytes()),
         [&] { return describe_tensors({self}); });
  return self;
}

// Note [Fill from a device scalar]
// x.fill_(v) with a 0-dim neuron tensor v on x's device is device work: ATen's fill_ copies v
// into x (self.copy_(value), a broadcast), and the value never visits the host. It is one
// VectorE pass writing x that reads v's element on the way, charged the same whether or not
// values are computed (Note [One charge path]): the mode only decides whether the host views
// are filled. A v on another device is read to the host first (value.item(), as ATen's fill_
// does for a device mismatch): the read is charged as .item() is, then x is filled with a
// host scalar; a CPU x is filled by the CPU, which is no device work.
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports a 0-dimensional value tensor, but got one "
              "with ", value.dim(), " dimension(s)");
  if (!on_neuron(self)) return self.fill_(value.item());  // the CPU fills a CPU tensor
  if (self.device() != value.device()) return fill_scalar(self, value.item());
  if (!execution_enabled() && self.nbytes() <= kKnownValuesMaxBytes && values_known(value)) {
    ComputeKnownValues computing;  // Note [Known values in predict-only mode]
    fill_tensor(self, value);
    mark_values_known(self);
    return self;
  }
  if (execution_enabled()) {
    at::Tensor view = host_view(self);
    at::Tensor scalar = host_view(value);
    // A value that is an element of self is read before self is written.
    view.fill_(self.is_alias_of(value) ? scalar.clone() : scalar);
    recycle_host_view(std::move(scalar));
    recycle_host_view(std::move(view));
  }
  static const OpHandle op("aten::fill_");
  charge(self.device().index(), op, vector_pass(self, self.nbytes() + value.element_size()),
         [&] { return describe_tensors({self, value}); });
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  if (!execution_enabled() && values_known(self)) {
    ComputeKnownValues computing;  // Note [Known values in predict-only mode]
    return local_scalar_dense(self);
  }
  charge_scalar_read(self);
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
