// The work of an ATen op in trnsim's vocabulary (Note [Work descriptions] in trnsim/work.h),
// from its class (OpPolicy) and the shapes and dtypes of its tensors: a matmul for matmuls and
// convolutions (im2col), a gather, or streaming passes on VectorE, ScalarE or GpSimdE, with the
// op's HBM traffic. Only the translation lives here; trnsim costs it.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <trnsim/work.h>

#include "aten/OpPolicy.h"

namespace c10 {
struct FunctionSchema;
}

namespace torch_neuron {

// The work of op `name` of class `op_class` that read `inputs` and produced `outputs`, moving
// `bytes` through HBM. `pool_window`: for a pooling op, the elements of its window
// (pool_window below; 1 for every other op).
trnsim::Work describe_op(OpClass op_class, const std::string& name,
                         c10::ArrayRef<at::Tensor> inputs, c10::ArrayRef<c10::IValue> outputs,
                         uint64_t bytes, int64_t pool_window = 1);
// The same for an op whose work is sized by one output tensor (undefined when it has none);
// `foreach`: a _foreach_ op, whose work is every element of its input lists.
trnsim::Work describe_op(OpClass op_class, const std::string& name,
                         c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out, uint64_t bytes,
                         bool foreach, int64_t pool_window = 1);

// Note [Pooling windows]: the position of the `kernel_size` argument of a pooling op whose
// engine reads a whole window per pooled element (avg and max pooling forward, avg pooling
// backward), -1 for any other op (max pooling backward scatters one gradient per element
// through its indices).
int pool_window_argument(std::string_view base, const c10::FunctionSchema& schema);
// The window's elements for the op's `kernel_size` argument value (a one-element list stands
// for the same size in each of the op's spatial dimensions, as PyTorch expands it).
int64_t pool_window(std::string_view base, const c10::IValue& kernel_size);

// The streaming passes op `name` ("aten::gelu") would run as its own kernel over `elements`
// (two operands streamed element by element when `two_inputs`), as describe_op charges a
// streaming op; nullopt for an op that is not one (a matmul, a convolution, a fallback).
std::optional<trnsim::Streaming> eager_streaming(const std::string& name, uint64_t elements,
                                                 bool two_inputs, bool sixteen_bit);

// The work of a dedicated kernel that read `inputs` and wrote `outputs` (its HBM traffic: all
// of their bytes).
trnsim::Work describe_kernel(OpClass op_class, const std::string& name,
                             const std::vector<at::Tensor>& inputs,
                             const std::vector<at::Tensor>& outputs);
// One VectorE pass writing `t` (a fill, a random draw), moving `bytes` through HBM.
trnsim::Work vector_pass(const at::Tensor& t, uint64_t bytes);

// "f32[8,8], bf16[8]": operand shapes for trace records (built only while tracing).
std::string describe_tensors(c10::ArrayRef<at::Tensor> tensors);

// TensorE precision for a dtype: FP8 types, 16-bit floats, everything else FP32.
trnsim::Precision matmul_precision(c10::ScalarType dtype);

// "softmax_backward_data" from "aten::_softmax_backward_data.out".
std::string_view base_op_name(std::string_view name);

}  // namespace torch_neuron
