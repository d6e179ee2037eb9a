// The engine passes a non-matmul op makes over its elements: one pass on the engine of its
// class for most ops, several for the composites the hardware runs as a sequence of
// instructions (softmax: a VectorE max, a ScalarE exp that accumulates the row sums, a VectorE
// scale). Costed by trnsim's streaming engines (streaming_engine.h).
#pragma once

#include <string_view>

#include <trnsim/streaming_engine.h>

#include "aten/OpPolicy.h"

namespace torch_neuron {

struct EnginePass {
  trnsim::Engine engine;
  trnsim::Pass pass;
};

struct PassPlan {
  EnginePass passes[4];
  int count;
};

// The passes of any streaming op of class `op_class` (OpPolicy.h): its composite plan, or one
// pass on its class's engine (two-input when two operands are streamed; a ScalarE function
// with a second operand adds a VectorE multiply). `base` is an op name without "aten::",
// leading underscores or overload ("softmax_backward_data", see base_op_name).
PassPlan plan_passes(std::string_view base, OpClass op_class, bool two_inputs);

// "softmax_backward_data" from "aten::_softmax_backward_data.out".
std::string_view base_op_name(std::string_view name);

}  // namespace torch_neuron
