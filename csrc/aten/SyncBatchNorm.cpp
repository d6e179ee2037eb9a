// Note [SyncBatchNorm on neuron]
// nn.SyncBatchNorm (torch/nn/modules/_functions.py) normalizes over the batch of every rank of
// its process group with five ops that ATen implements for CUDA only: per-rank statistics
// (batch_norm_stats), their combination after an all_gather (batch_norm_gather_stats_with_counts,
// which also updates the running statistics), the normalization (batch_norm_elemt) and two
// backward ops (batch_norm_backward_reduce, batch_norm_backward_elemt). SyncBatchNorm accepts
// the PrivateUse1 device, so without kernels here DDP with SyncBatchNorm failed on neuron at its
// first forward. Each kernel is written with ATen ops on neuron tensors, so every reduction and
// elementwise pass is charged as the neuron op it is. They compute what CUDA's kernels compute
// (aten/src/ATen/native/cuda/Normalization.cu[h]): statistics in float for half and bfloat16
// inputs, the variance biased in the normalization and unbiased in running_var, ranks' statistics
// combined by their counts (the parallel variance formula; CUDA merges them one by one, which is
// the same sum in another order).
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

namespace torch_neuron {
namespace {

// Every dimension but the channels (1): what the statistics reduce over.
std::vector<int64_t> reduced_dims(const at::Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "SyncBatchNorm: expected an input of at least 2 dimensions "
              "(N, C, ...), got ", input.sizes());
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast over `input` (1, C, 1, ...).
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& input) {
  std::vector<int64_t> shape(input.dim(), 1);
  shape[1] = input.size(1);
  return v.view(shape);
}

at::ScalarType stats_dtype(const at::Tensor& input) {
  return at::toOpMathType(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor> neuron_batch_norm_stats(const at::Tensor& input, double eps) {
  const auto dims = reduced_dims(input);
  const at::Tensor x = input.to(stats_dtype(input));
  at::Tensor mean = x.mean(dims);
  const at::Tensor var = (x - per_channel(mean, input)).square().mean(dims);  // biased
  return {mean, (var + eps).rsqrt()};
}

std::tuple<at::Tensor, at::Tensor> neuron_batch_norm_gather_stats_with_counts(
    const at::Tensor& /*input*/, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, const at::Tensor& counts) {
  TORCH_CHECK(mean.dim() == 2 && invstd.sizes() == mean.sizes() &&
                  counts.numel() == mean.size(0),
              "batch_norm_gather_stats_with_counts: expected mean and invstd of [ranks, C] and "
              "one count per rank, got ", mean.sizes(), ", ", invstd.sizes(), " and ",
              counts.sizes());
  const at::Tensor n = counts.to(mean.scalar_type()).view({-1, 1});
  const at::Tensor total = n.sum(0);
  at::Tensor global_mean = (mean * n).sum(0) / total;
  // Each rank's sum of squared deviations from its own mean, plus its count times the squared
  // distance of its mean from the global one.
  const at::Tensor rank_var = invstd.square().reciprocal() - eps;
  const at::Tensor m2 =
      (rank_var * n).sum(0) + ((mean - global_mean).square() * n).sum(0);
  at::Tensor global_invstd = (m2 / total + eps).rsqrt();
  if (running_mean.has_value() && running_mean->defined()) {
    running_mean->mul_(1 - momentum).add_(global_mean.to(running_mean->scalar_type()), momentum);
  }
  if (running_var.has_value() && running_var->defined()) {
    const at::Tensor unbiased = m2 / (total - 1);
    running_var->mul_(1 - momentum).add_(unbiased.to(running_var->scalar_type()), momentum);
  }
  return {global_mean, global_invstd};
}

std::tuple<at::Tensor, at::Tensor> neuron_batch_norm_gather_stats(
    const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    double momentum, double eps, int64_t count) {
  const at::Tensor counts = at::empty({mean.size(0)}, mean.options()).fill_(count);
  return neuron_batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean,
                                                    running_var, momentum, eps, counts);
}

at::Tensor neuron_batch_norm_elemt(const at::Tensor& input,
                                   const std::optional<at::Tensor>& weight,
                                   const std::optional<at::Tensor>& bias, const at::Tensor& mean,
                                   const at::Tensor& invstd, double /*eps: in invstd already*/) {
  const auto dtype = stats_dtype(input);
  at::Tensor out = (input.to(dtype) - per_channel(mean.to(dtype), input)) *
                   per_channel(invstd.to(dtype), input);
  if (weight.has_value() && weight->defined()) out = out * per_channel(weight->to(dtype), input);
  if (bias.has_value() && bias->defined()) out = out + per_channel(bias->to(dtype), input);
  return out.to(input.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> neuron_batch_norm_backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& invstd, const std::optional<at::Tensor>& weight, bool input_g,
    bool weight_g, bool bias_g) {
  const auto dims = reduced_dims(input);
  const auto dtype = mean.scalar_type();
  const at::Tensor dy = grad_out.to(dtype);
  const at::Tensor sum_dy = dy.sum(dims);
  const at::Tensor sum_dy_xmu = (dy * (input.to(dtype) - per_channel(mean, input))).sum(dims);
  const bool has_weight = weight.has_value() && weight->defined();
  const auto param_dtype = has_weight ? weight->scalar_type() : dtype;
  at::Tensor grad_weight, grad_bias;
  if (weight_g) grad_weight = (sum_dy_xmu * invstd).to(param_dtype);
  if (bias_g) grad_bias = sum_dy.to(param_dtype);
  if (!input_g) return {at::Tensor(), at::Tensor(), grad_weight, grad_bias};
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

at::Tensor neuron_batch_norm_backward_elemt(const at::Tensor& grad_out,
                                            const at::Tensor& input, const at::Tensor& mean,
                                            const at::Tensor& invstd,
                                            const std::optional<at::Tensor>& weight,
                                            const at::Tensor& sum_dy,
                                            const at::Tensor& sum_dy_xmu,
                                            const at::Tensor& count) {
  const auto dtype = mean.scalar_type();
  // The number of values each channel was normalized over, on every rank together.
  const at::Tensor total = count.sum().to(dtype);
  const at::Tensor mean_dy = sum_dy / total;
  const at::Tensor mean_dy_xmu = sum_dy_xmu / total;
  at::Tensor scale = invstd;
  if (weight.has_value() && weight->defined()) scale = scale * weight->to(dtype);
  const at::Tensor xmu = input.to(dtype) - per_channel(mean, input);
  const at::Tensor grad_in =
      (grad_out.to(dtype) - per_channel(mean_dy, input) -
       xmu * per_channel(invstd.square() * mean_dy_xmu, input)) *
      per_channel(scale, input);
  return grad_in.to(input.scalar_type());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("batch_norm_stats", TORCH_FN(neuron_batch_norm_stats));
  m.impl("batch_norm_gather_stats", TORCH_FN(neuron_batch_norm_gather_stats));
  m.impl("batch_norm_gather_stats_with_counts",
         TORCH_FN(neuron_batch_norm_gather_stats_with_counts));
  m.impl("batch_norm_elemt", TORCH_FN(neuron_batch_norm_elemt));
  m.impl("batch_norm_backward_reduce", TORCH_FN(neuron_batch_norm_backward_reduce));
  m.impl("batch_norm_backward_elemt", TORCH_FN(neuron_batch_norm_backward_elemt));
}

}  // namespace torch_neuron
