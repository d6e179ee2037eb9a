// The cost model: how long an op takes on one logical NeuronCore.
//
// An op is the instructions the hardware would run for it, costed per engine from the NKI
// architecture and performance guides: TensorE matmul instructions (tensor_engine.h), passes of
// VectorE, ScalarE and GpSimdE over 128 partitions (streaming_engine.h), and the DMA traffic
// between HBM and SBUF at what the core's DMA engines can stream (InstanceSpec::
// core_stream_gbps). The engines and the DMA queues of a core work in parallel, so an op takes
// as long as its busiest engine or its HBM traffic, plus the launch overhead.
#pragma once

#include <array>
#include <cstdint>

#include "trnsim/instance.h"
#include "trnsim/streaming_engine.h"
#include "trnsim/tensor_engine.h"

namespace trnsim {

// Assumption (not in the Neuron docs): fixed cost of launching one op on a NeuronCore
// (instruction fetch, the first DMA's semaphore-to-start, about 1.3 us in the NKI DMA guide,
// and the last write's completion), ns.
constexpr double kLaunchOverheadNs = 1500.0;

struct OpCost {
  std::array<double, kEngineCount> engine_ns{};  // busy time of each engine
  double flops = 0;                               // arithmetic work
  uint64_t bytes = 0;                             // HBM traffic (read + write)
  double hbm_ns = 0;                              // time to move `bytes` through the DMA queues

  // Launch overhead plus the longest of the engines and the HBM traffic.
  double duration_ns() const;
  // Adds one streaming pass of `engine` over `elements` (a step of a composite op).
  void add_pass(const InstanceSpec& instance, Engine engine, uint64_t elements,
                Pass pass = Pass::OneInput, bool sixteen_bit = false);
  void set_bytes(const InstanceSpec& instance, uint64_t bytes);
};

// batch x [m, k] @ [k, n]: TensorE, plus copying the fp32 results out of PSUM on VectorE and
// ScalarE.
OpCost matmul_cost(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k, int64_t n,
                   Precision precision, uint64_t bytes);

// Time to stream `bytes` between HBM and SBUF on one logical core, ns.
double hbm_ns(const InstanceSpec& instance, uint64_t bytes);

}  // namespace trnsim
