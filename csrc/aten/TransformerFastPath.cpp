// Note [Transformer fast path on neuron]
// In eval mode without autograd, nn.MultiheadAttention and nn.TransformerEncoderLayer call one
// fused ATen op for the whole block (_native_multi_head_attention, _transformer_encoder_layer_fwd;
// torch/nn/modules/activation.py and transformer.py take this "fast path" on CPU, CUDA and the
// PrivateUse1 device). Run by host execution (Note [Host execution]) such an op would be one
// neuron op, charged as one streaming pass over its largest tensor: a 1024-wide encoder layer
// was predicted 34x faster than the same layer run op by op. Here they run ATen's own
// decomposition of the block (the CPU kernel's body, which calls ATen ops: the projections,
// the batched matmuls, the masked softmax, the layer norms and the feed-forward) with neuron
// tensors, so each piece is a neuron op with its own charge, as the same layer in training mode
// is, and the results are those of the CPU's fast path. Two pieces have no Meta kernel in ATen;
// the ones below let predict-only mode (Note [Predict-only execution]) charge the block as an
// executed run does.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace torch_neuron {
namespace {

// Shape functions (Meta kernels) for the two pieces of the block that ATen gives none, so that
// predict-only mode can charge them without values: q, k, v of [B, heads, T, D / heads] from
// qkv [B, T, 3D] (views of one buffer, as the CPU kernel returns them); a masked softmax's
// result has its input's geometry.
std::tuple<at::Tensor, at::Tensor, at::Tensor> transform_bias_rescale_qkv_meta(
    const at::Tensor& qkv, const at::Tensor& qkv_bias, int64_t num_heads) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0 && (qkv.size(2) / 3) % num_heads == 0,
              "_transform_bias_rescale_qkv: expected qkv of [B, T, 3D] with D divisible by ",
              num_heads, " heads, got ", qkv.sizes());
  const int64_t dim = qkv.size(2) / 3;
  at::Tensor q_k_v = at::empty({3, qkv.size(0), num_heads, qkv.size(1), dim / num_heads},
                               qkv.options());
  return {q_k_v.select(0, 0), q_k_v.select(0, 1), q_k_v.select(0, 2)};
}

at::Tensor masked_softmax_meta(const at::Tensor& self, const at::Tensor& /*mask*/,
                               std::optional<int64_t> /*dim*/,
                               std::optional<int64_t> /*mask_type*/) {
  return at::empty(self.sizes(), self.options());
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  return at::native::native_multi_head_attention_cpu(
      query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
      need_weights, average_attn_weights, mask_type);
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2,
    const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  return at::native::transformer_encoder_layer_forward(
      src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
      norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
      ffn_bias_1, ffn_weight_2, ffn_bias_2, mask, mask_type);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(native_multi_head_attention));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformer_encoder_layer_fwd));
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_transform_bias_rescale_qkv", TORCH_FN(transform_bias_rescale_qkv_meta));
  m.impl("_masked_softmax", TORCH_FN(masked_softmax_meta));
}

}  // namespace torch_neuron
