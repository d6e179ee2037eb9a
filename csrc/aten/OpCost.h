// The cost of an op on the simulated NeuronCore, from its class (OpPolicy) and the shapes and
// dtypes of its tensors: TensorE work for matmuls and convolutions, streaming work on VectorE,
// ScalarE or GpSimdE for the rest, HBM traffic for all.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include <trnsim/cost.h>

#include "aten/OpPolicy.h"

namespace torch_neuron {

trnsim::OpCost estimate_cost(const trnsim::InstanceSpec& instance, OpClass op_class,
                             const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                             c10::ArrayRef<c10::IValue> outputs, uint64_t bytes);
// The same for an op whose work is sized by one output tensor (undefined when it has none);
// `foreach`: a _foreach_ op, whose work is every element of its input lists.
trnsim::OpCost estimate_cost(const trnsim::InstanceSpec& instance, OpClass op_class,
                             const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                             const at::Tensor& out, uint64_t bytes, bool foreach);

// "f32[8,8], bf16[8]": operand shapes for trace records (built only while tracing).
std::string describe_tensors(c10::ArrayRef<at::Tensor> tensors);

// A transfer (copy or CPU-fallback round trip) as a cost: the DMA engines busy for
// `duration_ns`. Launch it with that explicit duration (it has no launch overhead).
trnsim::OpCost transfer_cost(double duration_ns, uint64_t bytes);

// TensorE precision for a dtype: FP8 types, 16-bit floats, everything else FP32.
trnsim::Precision matmul_precision(c10::ScalarType dtype);

}  // namespace torch_neuron
