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
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <vector>

#include <trnsim/cost.h>
#include <trnsim/queue.h>

#include "aten/HostExecution.h"
#include "aten/HostView.h"
#include "aten/OpCost.h"
#include "aten/OpTracking.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

// Note [Attention cost]: fused attention is matmuls on TensorE, not a streaming op. Per
// (batch, head) the forward runs S = Q K^T ([Lq, D] @ [D, Lk]) and O = P V ([Lq, Lk] @ [Lk, Dv])
// with the softmax exponentials on ScalarE; the scores stay in SBUF/PSUM (flash attention), so
// HBM traffic is the operands and results only. The backward recomputes S and runs four more
// matmuls (dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q), the exponentials again on
// ScalarE and dS = P * (dP - delta) on VectorE. A causal mask skips the score tiles (128 query
// rows x 512 keys, the TensorE tiling) that lie wholly above the diagonal. For D = 128 the
// exponentials on ScalarE take about as long as the matmuls on TensorE (Trn2: 307 G exp/s vs
// 326 G scores/s), as on the hardware.
double causal_tile_fraction(int64_t lq, int64_t lk) {
  const int64_t q_tiles = (lq + trnsim::kTensorTileM - 1) / trnsim::kTensorTileM;
  const int64_t k_tiles = (lk + trnsim::kTensorTileN - 1) / trnsim::kTensorTileN;
  if (q_tiles == 0 || k_tiles == 0) return 1.0;
  int64_t kept = 0;
  for (int64_t i = 0; i < q_tiles; ++i) {
    // Query rows up to `last` see keys [0, last] (PyTorch's is_causal: top-left aligned).
    const int64_t last = std::min((i + 1) * trnsim::kTensorTileM, lq) - 1;
    kept += std::min(last / trnsim::kTensorTileN + 1, k_tiles);
  }
  return static_cast<double>(kept) / static_cast<double>(q_tiles * k_tiles);
}

trnsim::OpCost attention_cost(const at::Tensor& query, const at::Tensor& key,
                              const at::Tensor& value, bool is_causal, bool backward,
                              uint64_t bytes) {
  const auto& instance = system().instance();
  const int64_t lq = query.size(-2), d = query.size(-1), lk = key.size(-2), dv = value.size(-1);
  const int64_t batch = lq * d == 0 ? 0 : query.numel() / (lq * d);
  const auto precision = matmul_precision(query.scalar_type());
  // {m, k, n} of each matmul, per (batch, head).
  std::vector<std::array<int64_t, 3>> matmuls = {{lq, d, lk}, {lq, lk, dv}};
  if (backward) matmuls = {{lq, d, lk}, {lk, lq, dv}, {lq, dv, lk}, {lq, lk, d}, {lk, lq, d}};
  const double fraction = is_causal ? causal_tile_fraction(lq, lk) : 1.0;
  trnsim::OpCost cost;
  constexpr int kTensor = static_cast<int>(trnsim::Engine::Tensor);
  for (const auto& [m, k, n] : matmuls) {
    // The kernel lays each product out as C or as C^T = B^T A^T, whichever tiles better (the
    // head dimension, 64 or 128, is a poor 512-wide N tile but a full 128-row M tile).
    const auto mm = trnsim::matmul_cost(instance, batch, m, k, n, precision, 0);
    const auto mm_t = trnsim::matmul_cost(instance, batch, n, k, m, precision, 0);
    cost.engine_ns[kTensor] +=
        fraction * std::min(mm.engine_ns[kTensor], mm_t.engine_ns[kTensor]);
    cost.flops += fraction * mm.flops;
  }
  const auto scores = static_cast<uint64_t>(batch * lq * lk);
  const auto exps = trnsim::streaming_cost(instance, trnsim::Engine::Scalar, scores, 0);
  cost.engine_ns[static_cast<int>(trnsim::Engine::Scalar)] =
      fraction * exps.engine_ns[static_cast<int>(trnsim::Engine::Scalar)];
  if (backward) {
    const auto ds = trnsim::streaming_cost(instance, trnsim::Engine::Vector, scores, 0);
    cost.engine_ns[static_cast<int>(trnsim::Engine::Vector)] =
        fraction * ds.engine_ns[static_cast<int>(trnsim::Engine::Vector)];
  }
  cost.bytes = bytes;
  cost.hbm_ns = static_cast<double>(bytes) / instance.core_hbm_gbps();
  return cost;
}

void charge_attention(const char* name, c10::DeviceIndex device, const at::Tensor& query,
                      const at::Tensor& key, const at::Tensor& value, bool is_causal,
                      bool backward, const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& outputs) {
  uint64_t bytes = 0;
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& t : *list) bytes += t.defined() ? t.nbytes() : 0;
  }
  current_queue(device).launch(
      name, attention_cost(query, key, value, is_causal, backward, bytes),
      trnsim::tracing_enabled() ? describe_tensors(inputs) : std::string());
  count_executed_op(name);
}

std::optional<at::Tensor> host_optional(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return host_view(*t);
}

// A CPU tensor with `t`'s sizes, strides, dtype and requires_grad but no data: the CPU's backend
// choice reads only metadata, and under torch.compile the tensors are fake (they have no data).
at::Tensor metadata_only(const at::Tensor& t) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10::DataPtr(nullptr, c10::kCPU),
                     nullptr, false);
  auto out = tensor_like(std::move(empty), c10::DispatchKey::CPU, t);
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
  out = adopt_host_result(std::move(out), device);
  logsumexp = adopt_host_result(std::move(logsumexp), device);
  std::vector<at::Tensor> inputs = {query, key, value};
  if (attn_bias.has_value() && attn_bias->defined()) inputs.push_back(*attn_bias);
  charge_attention("aten::_scaled_dot_product_fused_attention_overrideable", device, query, key,
                   value, is_causal, /*backward=*/false, inputs, {out, logsumexp});
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
  grad_q = adopt_host_result(std::move(grad_q), device);
  grad_k = adopt_host_result(std::move(grad_k), device);
  grad_v = adopt_host_result(std::move(grad_v), device);
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
