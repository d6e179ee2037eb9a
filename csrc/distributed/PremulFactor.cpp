#include "distributed/PremulFactor.h"

#include <c10/util/Exception.h>

#include "runtime/HostView.h"

namespace torch_neuron {

std::optional<double> premul_factor(const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return std::nullopt;
  auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement, "neuron process group: PREMUL_SUM without a factor");
  if (supplement->tensor_factor.defined()) {
    return host_view(supplement->tensor_factor).item<double>();
  }
  return supplement->double_factor;
}

}  // namespace torch_neuron
