// The op policy table: for every ATen op without a dedicated neuron kernel, whether Trainium
// runs it (and on which engine it costs time) or TorchNeuron sends it to the CPU.
// This is the one place that decides it; HostExecution.cpp applies it.
#pragma once

#include <string>
#include <string_view>

namespace torch_neuron {

enum class OpClass {
  Fallback,    // not run by Trainium: a host round trip (linalg factorizations, FFT, complex)
  Matmul,      // TensorE: mm, bmm, addmm, baddbmm, mv, dot, ...
  Convolution, // TensorE: convolution forward and backward
  Vector,      // VectorE: elementwise arithmetic, comparisons, reductions, casts, shape ops
  Scalar,      // ScalarE: transcendental activations (exp, tanh, gelu, softmax, ...)
  GpSimd,      // GpSimdE: gathers, scatters, sorts, indexing
};

const char* op_class_name(OpClass c);

// Classifies an op by its name without overload ("aten::mm", "aten::linalg_svd").
OpClass classify_op(const std::string& name);

// The indexed updates whose every form combines with the elements it overwrites (index_add,
// index_reduce, scatter_add, scatter_reduce; in place or not), by base name ("index_add_").
// Other ops combine only through an argument (accumulate=True, scatter_'s reduce).
bool combines_by_name(std::string_view base);

}  // namespace torch_neuron
