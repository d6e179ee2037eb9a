// The fused LSTM and GRU cells that nn.LSTM / nn.GRU call on accelerators (ATen takes them for
// every non-CPU device). ATen has them only for CUDA; here they are written with ATen ops on
// neuron tensors, with the same math, the same workspace layout (activated gates, saved for
// backward) and the same backward formulas.
#include <ATen/core/Tensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <torch/library.h>

namespace torch_neuron {
namespace {

at::Tensor sum_over_batch(const at::Tensor& t) { return t.sum(0); }

// Gate pre-activations: input part + hidden part (+ both biases).
at::Tensor add_gates(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                     const std::optional<at::Tensor>& input_bias,
                     const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = gates + *hidden_bias;
  return gates;
}

// Returns (hy, cy, workspace = [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)]).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  const auto chunks = add_gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  const at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]);
  const at::Tensor g = at::tanh(chunks[2]), o = at::sigmoid(chunks[3]);
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * at::tanh(cy);
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// Returns (grad of the gate pre-activations, grad_cx, grad_bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = at::tanh(cy);
  at::Tensor grad_c = at::zeros_like(cy);
  at::Tensor grad_o = at::zeros_like(cy);
  if (grad_hy.has_value() && grad_hy->defined()) {
    grad_c = grad_c + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    grad_o = *grad_hy * tanh_cy;
  }
  if (grad_cy.has_value() && grad_cy->defined()) grad_c = grad_c + *grad_cy;
  at::Tensor grad_gates = at::cat({grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f),
                                   grad_c * i * (1 - g * g), grad_o * o * (1 - o)},
                                  1);
  at::Tensor grad_bias = has_bias ? sum_over_batch(grad_gates) : at::Tensor();
  return {grad_gates, grad_c * f, grad_bias};
}

// Returns (hy, workspace = [r, z, n, hx, hidden part of n]).
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates,
                                                  const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx,
                                                  const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor in_gates = input_gates, hid_gates = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) in_gates = in_gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) hid_gates = hid_gates + *hidden_bias;
  const auto ig = in_gates.chunk(3, 1);
  const auto hg = hid_gates.chunk(3, 1);
  const at::Tensor r = at::sigmoid(ig[0] + hg[0]);
  const at::Tensor z = at::sigmoid(ig[1] + hg[1]);
  const at::Tensor n = at::tanh(ig[2] + r * hg[2]);
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hg[2]}, 1)};
}

// Returns (grad input gates, grad hidden gates, grad_hx, grad input bias, grad hidden bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const auto saved = workspace.chunk(5, 1);
  const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hx = saved[3], &hn = saved[4];
  const at::Tensor grad_n = grad_hy * (1 - z) * (1 - n * n);  // through tanh
  const at::Tensor grad_z = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor grad_r = grad_n * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  at::Tensor grad_hidden_gates = at::cat({grad_r, grad_z, grad_n * r}, 1);
  at::Tensor grad_input_bias = has_bias ? sum_over_batch(grad_input_gates) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? sum_over_batch(grad_hidden_gates) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace torch_neuron
