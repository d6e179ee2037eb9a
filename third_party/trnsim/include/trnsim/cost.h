// The cost model: how long an op takes on one logical NeuronCore.
//
// A roofline per engine, evaluated on the tiling the hardware uses (Neuron docs, "NeuronCore
// architecture"): TensorE is a 128x128 systolic array fed from SBUF that accumulates into PSUM
// banks of 512 fp32 columns, so a matmul runs as ceil(M/128) x ceil(K/128) x ceil(N/512) tiles;
// VectorE, ScalarE and GpSimdE stream 128 partitions per cycle at their own clocks; all of them
// read and write HBM at the core's share of the chip's bandwidth. Engines of a core work in
// parallel, so an op takes as long as its busiest engine (or its HBM traffic), plus the launch
// overhead.
#pragma once

#include <array>
#include <cstdint>

#include "trnsim/instance.h"

namespace trnsim {

// Assumption (not in the Neuron docs): fixed cost of launching one op on a NeuronCore
// (instruction fetch, semaphore handshakes between engines), ns.
constexpr double kLaunchOverheadNs = 1500.0;

// TensorE geometry (Neuron docs): 128x128 processing elements; one PSUM bank holds 512 fp32
// accumulators per partition, which bounds the N tile.
constexpr int64_t kTensorTileM = 128, kTensorTileK = 128, kTensorTileN = 512;
// Partitions (lanes) that VectorE, ScalarE and GpSimdE process per cycle.
constexpr int64_t kEngineLanes = 128;

enum class Engine { Tensor = 0, Vector, Scalar, GpSimd, Dma };
constexpr int kEngineCount = 5;
const char* engine_name(Engine engine);

// Matmul input precision: picks the TensorE rate.
enum class Precision { FP8, BF16, FP32 };

struct OpCost {
  std::array<double, kEngineCount> engine_ns{};  // busy time of each engine
  double flops = 0;                               // arithmetic work
  uint64_t bytes = 0;                             // HBM traffic (read + write)
  double hbm_ns = 0;                              // time to move `bytes` at the core's share

  // Launch overhead plus the longest of the engines and the HBM traffic.
  double duration_ns() const;
};

// batch x [m, k] @ [k, n].
OpCost matmul_cost(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k, int64_t n,
                   Precision precision, uint64_t bytes);
// `elements` processed on one streaming engine (Vector, Scalar or GpSimd) with `bytes` of
// HBM traffic.
OpCost streaming_cost(const InstanceSpec& instance, Engine engine, uint64_t elements,
                      uint64_t bytes);

// Peak dense FLOP/s of one logical core at a precision.
double peak_flops_per_ns(const InstanceSpec& instance, Precision precision);

// Shorthand used by the runtime for pure data movement on the device.
double streaming_duration_ns(const InstanceSpec& instance, uint64_t bytes);

}  // namespace trnsim
