// Measures what the simulator adds to every op: the cost model and the launch, and when
// profiling, the trace record. Used by benchmarks/op_benchmark.py (target: at most 1 us per op).
#pragma once

namespace torch_neuron {

// Host nanoseconds per op of charging a matmul through charge() on a real stream of the current
// device (tracing on or off), averaged over `iterations` (Note [Simulation overhead on the real
// queue]). That stream's clock and the device's shared engines advance as if the matmuls ran.
double simulation_overhead_ns(int iterations, bool tracing);

}  // namespace torch_neuron
