// Costs of work on a NeuronCore that is bound by memory traffic. (The engine-level cost model
// with TensorE tiling comes with the op library; this is the part the runtime needs now.)
#pragma once

#include <cstdint>

#include "trnsim/instance.h"

namespace trnsim {

// Assumption (not in the Neuron docs): fixed cost of launching one op on a NeuronCore
// (instruction fetch, semaphore handshakes between engines), ns.
constexpr double kLaunchOverheadNs = 1500.0;

// Duration of an op that reads and writes `bytes` of HBM in total at one logical core's share of
// the chip's HBM bandwidth, ns.
double streaming_duration_ns(const InstanceSpec& instance, uint64_t bytes);

}  // namespace trnsim
