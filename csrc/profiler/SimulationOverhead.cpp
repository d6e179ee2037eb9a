#include "profiler/SimulationOverhead.h"

#include <ATen/ops/empty.h>

#include <chrono>
#include <vector>

#include <trnsim/queue.h>

#include "aten/Charge.h"
#include "aten/OpWork.h"

namespace torch_neuron {

double simulation_overhead_ns(int iterations, bool tracing) {
  const std::vector<at::Tensor> inputs{at::empty({256, 512}), at::empty({512, 128})};
  const std::vector<c10::IValue> outputs{at::empty({256, 128})};
  const uint64_t bytes = (256 * 512 + 512 * 128 + 256 * 128) * 4;
  trnsim::Queue queue(/*device=*/0, /*id=*/0);  // private: no device clock is touched
  OpCounter counter;                             // and no op count
  queue.set_tracing(tracing);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    charge(queue, "aten::mm", &counter,
           describe_op(OpClass::Matmul, "aten::mm", inputs, outputs, bytes),
           [&] { return describe_tensors(inputs); });
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  return std::chrono::duration<double, std::nano>(elapsed).count() / iterations;
}

}  // namespace torch_neuron
