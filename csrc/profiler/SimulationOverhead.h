// Measures what the simulator adds to every op: the cost model and, when profiling, the trace
// record. Used by benchmarks/op_benchmark.py (target: at most 1 us per op).
#pragma once

namespace torch_neuron {

// Host nanoseconds per op of estimating a matmul's cost and launching it on a private queue
// (tracing on or off), averaged over `iterations`.
double simulation_overhead_ns(int iterations, bool tracing);

}  // namespace torch_neuron
