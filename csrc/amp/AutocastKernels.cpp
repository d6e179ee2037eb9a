// torch.autocast("neuron"): the op lists CUDA uses (PyTorch's shared AT_FORALL_* lists) applied
// to the AutocastPrivateUse1 key. Matmuls and convolutions run in the low-precision dtype
// (bfloat16 by default, as on Trainium; float16 when asked); softmax, norms, losses,
// reductions and pointwise transcendental ops run in float32; ops mixing dtypes promote. Every
// other op falls through untouched.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

using namespace at::autocast;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
using c10::IntArrayRef;

#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define NEURON_DIFFERENT_REDISPATCH_SIGNATURE(REDISPATCH_FUNC, REGISTER_NAME, REGISTER_SIGNATURE, \
                                              REDISPATCH_SIGNATURE, POLICY)                      \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(REDISPATCH_FUNC, REGISTER_NAME,            \
                                                      REGISTER_SIGNATURE, REDISPATCH_SIGNATURE,  \
                                                      POLICY)

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast: use torch.nn.functional.binary_cross_entropy_with_logits or "
              "torch.nn.BCEWithLogitsLoss, which combine the sigmoid and the loss safely.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP)
  AT_FORALL_FP32(NEURON_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(NEURON_DIFFERENT_REDISPATCH_SIGNATURE)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
  // As on CUDA: binary_cross_entropy is unsafe under autocast (use the with_logits form).
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
