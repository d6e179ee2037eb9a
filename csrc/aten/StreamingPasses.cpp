#include "aten/StreamingPasses.h"

#include <utility>

namespace torch_neuron {
namespace {

using trnsim::Engine;
using trnsim::Pass;
constexpr EnginePass kVector1{Engine::Vector, Pass::OneInput};
constexpr EnginePass kVector2{Engine::Vector, Pass::TwoInput};
constexpr EnginePass kScalar1{Engine::Scalar, Pass::OneInput};

// How the NKI kernels compute these (NKI tutorials: softmax in fused attention, layernorm with
// bn_stats/bn_aggr, RMSNorm; the activation instruction applies a per-row scale and bias before
// its function and can accumulate along the row in the same pass).
const std::pair<std::string_view, PassPlan> kComposites[] = {
    // max (VectorE), exp(x - max) with the row sum (ScalarE), x * 1/sum (VectorE).
    {"softmax", {{kVector1, kScalar1, kVector1}, 3}},
    // max, exp with the row sum, x - max - log(sum) (one tensor-scalar pass).
    {"log_softmax", {{kVector1, kScalar1, kVector1}, 3}},
    // sum(g * y) along the row, then y * (g - sum): two tensor-tensor passes.
    {"softmax_backward_data", {{kVector2, kVector2}, 2}},
    // g - exp(y) * sum(g): exp on ScalarE, the rest on VectorE.
    {"log_softmax_backward_data", {{kVector1, kScalar1, kVector2}, 3}},
    // bn_stats (VectorE), (x - mean) * rstd as an activation (ScalarE), * weight + bias
    // (VectorE, tensor-tensor: the weight varies along the row).
    {"native_layer_norm", {{kVector1, kScalar1, kVector2}, 3}},
    // x-hat again, sums of g * w and g * w * x-hat, the input gradient, and the weight and bias
    // gradients' products.
    {"native_layer_norm_backward", {{kScalar1, kVector2, kVector2, kVector2}, 4}},
    // sum of squares (ScalarE square with accumulation), x * rstd * weight (VectorE).
    {"fused_rms_norm", {{kScalar1, kVector2}, 2}},
    // statistics (VectorE), normalization as an activation (ScalarE).
    {"native_batch_norm", {{kVector1, kScalar1}, 2}},
    {"native_batch_norm_backward", {{kVector2, kVector2, kScalar1}, 3}},
};

// The passes of a known composite op, or nullptr.
const PassPlan* composite_passes(std::string_view name) {
  for (const auto& [op, plan] : kComposites) {
    if (op == name) return &plan;
  }
  return nullptr;
}

}  // namespace

PassPlan plan_passes(std::string_view base, OpClass op_class, bool two_inputs) {
  if (const PassPlan* plan = composite_passes(base)) return *plan;
  switch (op_class) {
    case OpClass::Scalar:
      if (two_inputs) return {{kScalar1, kVector2}, 2};
      return {{kScalar1}, 1};
    case OpClass::GpSimd:
      return {{{Engine::GpSimd, Pass::OneInput}}, 1};
    default:
      return {{two_inputs ? kVector2 : kVector1}, 1};
  }
}

std::string_view base_op_name(std::string_view base) {
  if (base.rfind("aten::", 0) == 0) base.remove_prefix(6);
  while (!base.empty() && base.front() == '_') base.remove_prefix(1);
  const size_t dot = base.find('.');
  return dot == std::string_view::npos ? base : base.substr(0, dot);
}

}  // namespace torch_neuron
