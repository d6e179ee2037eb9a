#include "aten/OpPolicy.h"

#include <array>
#include <string_view>

namespace torch_neuron {
namespace {

bool contains_any(std::string_view name, std::initializer_list<std::string_view> parts) {
  for (auto part : parts) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (name == n) return true;
  }
  return false;
}

}  // namespace

const char* op_class_name(OpClass c) {
  static const std::array<const char*, 6> names{"fallback", "matmul", "convolution",
                                                "vector",   "scalar", "gpsimd"};
  return names[static_cast<int>(c)];
}

OpClass classify_op(const std::string& full_name) {
  std::string_view name(full_name);
  if (name.rfind("aten::", 0) == 0) name.remove_prefix(6);
  while (!name.empty() && name.front() == '_') name.remove_prefix(1);
  // An in-place variant (addmm_, baddbmm_) does the work of its out-of-place op.
  if (name.size() > 1 && name.back() == '_') name.remove_suffix(1);

  // TorchNeuron runs these on the CPU: matrix factorizations and solvers, FFTs.
  if (contains_any(name, {"cholesky", "linalg_eig", "linalg_svd", "linalg_qr", "linalg_lu",
                          "linalg_solve", "linalg_inv", "linalg_det", "linalg_slogdet",
                          "linalg_lstsq", "linalg_ldl", "linalg_householder", "linalg_pinv",
                          "linalg_matrix_exp", "linalg_eigh", "linalg_eigvals", "svd", "geqrf",
                          "ormqr", "orgqr", "triangular_solve", "lu_solve", "lu_unpack",
                          "lu_factor", "inverse", "logdet", "slogdet", "fft", "stft"}) ||
      is_one_of(name, {"det", "lu", "qr", "eig", "symeig", "pinverse", "matrix_exp",
                       "cholesky_solve", "linalg_solve_triangular"})) {
    return OpClass::Fallback;
  }
  if (is_one_of(name, {"mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot",
                       "addmm_activation", "addr", "outer", "ger", "linear", "matmul",
                       "scaled_mm", "int_mm"})) {
    return OpClass::Matmul;
  }
  if (contains_any(name, {"convolution", "conv_depthwise", "slow_conv", "conv2d", "conv3d",
                          "conv1d", "conv_transpose", "mkldnn_conv"})) {
    return OpClass::Convolution;
  }
  if (contains_any(name, {"index", "gather", "scatter", "embedding", "sort", "topk", "unique",
                          "nonzero", "masked_select", "take", "searchsorted", "bucketize",
                          "multinomial", "randperm", "kthvalue", "median", "mode", "histc",
                          "bincount", "put", "grid_sampler", "max_pool", "max_unpool"})) {
    return OpClass::GpSimd;
  }
  // Membership is a search; the other is* ops are elementwise tests (not the sine their names
  // contain).
  if (name == "isin") return OpClass::GpSimd;
  if (name.rfind("is", 0) == 0) return OpClass::Vector;
  if (name.rfind("logical", 0) == 0) return OpClass::Vector;
  if (contains_any(name, {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "mish", "elu",
                          "softplus", "softmax", "erf", "sin", "cos", "tan", "sqrt", "pow",
                          "lgamma", "digamma", "polygamma", "hardswish", "logit", "atan",
                          "asin", "acos", "sinh", "cosh", "reciprocal", "rsqrt", "glu",
                          "attention", "norm", "var", "std", "i0", "sinc", "xlogy", "zeta"})) {
    return OpClass::Scalar;
  }
  return OpClass::Vector;
}

bool combines_by_name(std::string_view base) {
  for (const char* prefix : {"index_add", "index_reduce", "scatter_add", "scatter_reduce"}) {
    if (base.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace torch_neuron
