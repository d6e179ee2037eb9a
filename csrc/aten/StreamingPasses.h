// The engine passes a non-matmul op makes over its elements: one pass on the engine of its
// class for most ops, several for the composites the hardware runs as a sequence of
// instructions (softmax: a VectorE max, a ScalarE exp that accumulates the row sums, a VectorE
// scale). Costed by trnsim's streaming engines (streaming_engine.h).
#pragma once

#include <string_view>

#include <trnsim/streaming_engine.h>

namespace torch_neuron {

struct EnginePass {
  trnsim::Engine engine;
  trnsim::Pass pass;
};

struct PassPlan {
  EnginePass passes[4];
  int count;
};

// The passes of a known composite op, or nullptr. `name` is an op name without "aten::",
// leading underscores or overload ("softmax_backward_data").
const PassPlan* composite_passes(std::string_view name);

}  // namespace torch_neuron
