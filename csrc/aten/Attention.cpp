// scaled_dot_product_attention through PyTorch's fused-attention hook for accelerators
// (SDPBackend::overrideable). The backend choice mirrors the CPU's: where the CPU would run its
// fused flash kernel, neuron runs the overrideable fused path, which is that same kernel on
// device memory (Note [Host execution]); elsewhere both use the math decomposition. So neuron
// attention matches CPU attention, forward and backward.
#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <vector>

#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "aten/OpTracking.h"
#include "runtime/HostView.h"
#include "aten/PredictOnly.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

// Charges fused attention as trnsim's Attention work (Note [Attention cost] in trnsim's
// work.cpp): HBM traffic is the operands and results only.
void charge_attention(const char* name, c10::DeviceIndex device, const at::Tensor& query,
                      const at::Tensor& key, const at::Tensor& value, bool is_causal,
                      bool backward, const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& outputs) {
  uint64_t bytes = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& t : *list) bytes += t.defined() ? t.nbytes() : 0;
  }
  const int64_t lq = query.size(-2), d = query.size(-1);
  const int64_t batch = lq * d == 0 ? 0 : query.numel() / (lq * d);  // batch x heads
  const trnsim::Attention work{batch,    lq,       key.size(-2), d, value.size(-1),
                               matmul_precision(query.scalar_type()), is_causal, backward};
  charge(current_queue(device), name, &op_counter(name), trnsim::Work{work, bytes},
         [&] { return describe_tensors(inputs); }, Placement::Device,
         Operands{inputs, outputs, {}, {}});
}

// A CPU tensor with `t`'s sizes, strides, dtype and requires_grad but no data: the CPU's backend
// choice reads only metadata, and under torch.compile the tensors are fake (they have no data).
// With dynamic shapes (symbolic sizes) the stand-in carries the same symbols.
at::Tensor metadata_only(const at::Tensor& t) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, c10::kCPU),
                     nullptr, false);
  at::Tensor out;
  if (t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    out = at::detail::make_tensor<c10::TensorImpl>(
        std::move(empty), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
    out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sym_sizes(), t.sym_strides(),
                                                      t.sym_storage_offset());
  } else {
    out = tensor_like(std::move(empty), c10::DispatchKey::CPU, t);
  }
  if (t.requires_grad()) out.set_requires_grad(true);
  return out;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  // The fused kernel gives no gradient for the mask; leave such calls to the math path.
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->requires_grad()) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value() && attn_mask->defined()) mask = metadata_only(*attn_mask);
  // Called directly, not through the dispatcher: under torch.compile a fake-tensor mode is
  // active and would refuse these plain CPU stand-ins.
  const auto cpu_choice = at::native::_fused_sdp_choice_cpp(
      metadata_only(query), metadata_only(key), metadata_only(value), mask, dropout_p, is_causal,
      scale, enable_gqa);
  return cpu_choice == static_cast<int64_t>(at::SDPBackend::flash_attention)
             ? static_cast<int64_t>(at::SDPBackend::overrideable)
             : cpu_choice;
}

// `result` laid out as torch/_meta_registrations.py lays out a result of its shape for `like`
// (alloc_with_matching_layout, empty_like): dimensions ordered by like's strides, largest
// first, densely. A copy (host work inside the kernel) only where the layouts differ.
at::Tensor with_layout_of(const at::Tensor& result, const at::Tensor& like) {
  if (!result.defined() || result.dim() != like.dim()) return result;
  std::vector<int64_t> order(like.dim());
  for (int64_t d = 0; d < like.dim(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(like.dim());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= result.size(*it);
  }
  // Strides of dimensions of size 1 are not layout (torch.compile's checks skip them too):
  // where only those differ, the CPU kernel's result stays as it is, as on the CPU.
  bool same = true;
  for (int64_t d = 0; d < result.dim(); ++d) {
    same = same && (result.size(d) == 1 || result.stride(d) == strides[d]);
  }
  if (same) return result;
  return at::empty_strided(result.sizes(), strides, result.options()).copy_(result);
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
        compute_view(query), compute_view(key), compute_view(value), dropout_p, is_causal,
        compute_view(attn_bias), scale);
    // The CPU kernel's results are transposed views ([B, H, Lq, D] over [B, Lq, H, D]
    // memory); torch.compile checks results against the overrideable op's meta function,
    // which lays the output out like the query and the logsumexp contiguously.
    out = with_layout_of(out, query);
    logsumexp = logsumexp.contiguous();
  }
  out = device_result(std::move(out), device);
  logsumexp = device_result(std::move(logsumexp), device);
  std::vector<at::Tensor> inputs = {query, key, value};
  if (attn_bias.has_value() && attn_bias->defined()) inputs.push_back(*attn_bias);
  charge_attention("aten::_scaled_dot_product_fused_attention_overrideable", device, query, key,
                   value, is_causal, /*backward=*/false, inputs, {out, logsumexp});
  // Sequence bookkeeping and the debug mask belong to variable-length and debugging variants
  // this path does not take: undefined, as the meta function says. The RNG seed and offset are
  // 0-dim, as there (Note [Seed and Offset]).
  const auto rng_state = at::empty({}, query.options().dtype(at::kLong));
  return {out,       logsumexp,     at::Tensor(), at::Tensor(), query.size(-2), key.size(-2),
          rng_state, rng_state,     at::Tensor()};
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
        compute_view(grad_out), compute_view(query), compute_view(key), compute_view(value),
        compute_view(out), compute_view(logsumexp), dropout_p, is_causal,
        compute_view(std::optional<at::Tensor>(attn_bias)), scale);
    // Gradients laid out like their inputs, as the meta function (empty_like) says.
    grad_q = with_layout_of(grad_q, query);
    grad_k = with_layout_of(grad_k, key);
    grad_v = with_layout_of(grad_v, value);
  }
  grad_q = device_result(std::move(grad_q), device);
  grad_k = device_result(std::move(grad_k), device);
  grad_v = device_result(std::move(grad_v), device);
  charge_attention("aten::_scaled_dot_product_fused_attention_overrideable_backward", device,
                   query, key, value, is_causal, /*backward=*/true,
                   {grad_out, query, key, value, out, logsumexp, attn_bias},
                   {grad_q, grad_k, grad_v});
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

// scaled_dot_product_attention asks this stub (not the dispatcher) which backend to use, and
// only devices that registered it get anything but the math path.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_neuron::fused_sdp_choice)
}  // namespace at::native
