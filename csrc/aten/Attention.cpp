// scaled_dot_product_attention through PyTorch's fused-attention hook for accelerators
// (SDPBackend::overrideable). The backend choice mirrors the CPU's: where the CPU would run its
// fused flash kernel, neuron runs the overrideable fused path, which is that same kernel on
// device memory (Note [Host execution]); elsewhere both use the math decomposition. So neuron
// attention matches CPU attention, forward and backward.
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "aten/HostExecution.h"
#include "aten/HostView.h"
#include "runtime/AllocateOnDevice.h"

namespace torch_neuron {
namespace {

std::optional<at::Tensor> host_optional(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return host_view(*t);
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  // The fused kernel gives no gradient for the mask; leave such calls to the math path.
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->requires_grad()) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  const auto cpu_choice = at::_fused_sdp_choice(host_view(query), host_view(key),
                                                host_view(value), host_optional(attn_mask),
                                                dropout_p, is_causal, scale, enable_gqa);
  return cpu_choice == static_cast<int64_t>(at::SDPBackend::flash_attention)
             ? static_cast<int64_t>(at::SDPBackend::overrideable)
             : cpu_choice;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale) {
  const auto device = query.device().index();
  at::Tensor out, logsumexp;
  {
    AllocateOnDevice allocate_on(device);
    std::tie(out, logsumexp) = at::_scaled_dot_product_flash_attention_for_cpu(
        host_view(query), host_view(key), host_view(value), dropout_p, is_causal,
        host_optional(attn_bias), scale);
  }
  out = adopt_host_result(out, device);
  logsumexp = adopt_host_result(logsumexp, device);
  charge_device_op("aten::_scaled_dot_product_fused_attention_overrideable", OpClass::Scalar,
                   device, {query, key, value}, {out});
  // Sequence bookkeeping and RNG state belong to variable-length and dropout variants that this
  // path does not take; they are returned empty, as the CPU flash kernel has none.
  const auto empty = at::empty({0}, query.options().dtype(at::kLong));
  return {out, logsumexp, empty, empty, query.size(-2), key.size(-2), empty, empty,
          at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, int64_t max_q, int64_t max_k, double dropout_p, bool is_causal,
    const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale) {
  const auto device = query.device().index();
  at::Tensor grad_q, grad_k, grad_v;
  {
    AllocateOnDevice allocate_on(device);
    std::tie(grad_q, grad_k, grad_v) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        host_view(grad_out), host_view(query), host_view(key), host_view(value), host_view(out),
        host_view(logsumexp), dropout_p, is_causal, host_optional(attn_bias), scale);
  }
  grad_q = adopt_host_result(grad_q, device);
  grad_k = adopt_host_result(grad_k, device);
  grad_v = adopt_host_result(grad_v, device);
  charge_device_op("aten::_scaled_dot_product_fused_attention_overrideable_backward",
                   OpClass::Scalar, device, {grad_out, query, key, value}, {grad_q, grad_k, grad_v});
  return {grad_q, grad_k, grad_v, at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(fused_attention_backward));
}

}  // namespace torch_neuron

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuron::fused_sdp_choice)
}  // namespace at::native
