// What a collective costs on the simulated interconnect: pure functions of the operation, its
// size and where the participating NeuronCores sit (same chip, other chips of one instance over
// NeuronLink, other instances over EFA).
//
// Alpha-beta model (Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication
// Operations in MPICH", IJHPCA 2005): a step costs a per-hop latency alpha plus bytes over the
// bandwidth one rank gets on the slowest link the step crosses. A chip's DMA engines, HBM and
// NeuronLink, and an instance's network, are shared evenly by the group's ranks using them.
// Transfers and reductions are pipelined in slices (Neuron runtime collective docs), so a step
// runs at the slower of the link and the rank's HBM share over the HBM touches per byte (2 to
// forward, 3 to reduce): at large sizes a reducing collective can be HBM bound, not link bound.
// Each stage runs the cheapest algorithm for its size (ring, or a latency-optimal recursive
// doubling/halving or binomial tree), as the Neuron runtime picks by size. Multi-instance groups
// run hierarchically (within each instance, then between instances), as the Neuron runtime does
// ("Inter-node collective communication", Neuron docs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trnsim/instance.h"

namespace trnsim {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AllToAll,
  Gather,
  Scatter,
  SendRecv,
  Barrier,
};
const char* collective_name(Collective op);  // "all_reduce", "all_gather", ...

// Where one rank's NeuronCore sits: which simulated instance (node) and which chip of it.
struct RankPlace {
  int node = 0;
  int chip = 0;
};

struct CollectiveCost {
  double duration_ns = 0;  // from the last rank's arrival to completion on every rank
  // "ring", "recursive doubling", "recursive halving", "binomial tree", "pairwise exchange",
  // "point-to-point", "dissemination", ...; "hierarchical <algorithm between instances>" for
  // groups with several ranks on each of several instances; "none" for a group of one.
  std::string algorithm;
  // The slowest link crossed: "on-chip", "NeuronLink", "EFA", or "network" between instances
  // that have no EFA (trn1.2xlarge, trn2.3xlarge).
  std::string link;
  // The bus bandwidth the links allow this op on this group, GB/s: busbw as the size grows, so
  // busbw never exceeds it. For a flat ring that is the bandwidth one rank gets on the slowest
  // link, or its HBM share over the touches per byte when that is lower.
  double link_gbps = 0;
  double algbw_gbps = 0;  // bytes / duration (nccl-tests' algbw)
  double busbw_gbps = 0;  // algbw x bus_factor (nccl-tests' busbw)
};

// Cost of `op` over the group whose rank i sits at `ranks[i]`, on `instance`.
// `bytes` is nccl-tests' size S (NVIDIA/nccl-tests doc/PERFORMANCE.md): the buffer for
// all-reduce, broadcast and reduce; the full (gathered) buffer, ranks x per-rank part, for
// all-gather and reduce-scatter; what one rank sends in all, ranks x per-peer part, for
// all-to-all, gather and scatter; the message for send/recv; ignored for a barrier.
// A group of one rank costs nothing (every field 0, algorithm "none"); a barrier moves no data
// (link_gbps, algbw and busbw 0). Throws trnsim::Error for an empty group or a rank placed
// outside the instance's chips.
CollectiveCost collective_cost(const InstanceSpec& instance, Collective op, uint64_t bytes,
                               const std::vector<RankPlace>& ranks);

// nccl-tests' bus bandwidth factor (src/*.cu there): 2(p-1)/p for all-reduce, (p-1)/p for
// all-gather, reduce-scatter, all-to-all, gather and scatter, 1 for the rest. Throws
// trnsim::Error for fewer than one rank.
double bus_factor(Collective op, int ranks);

}  // namespace trnsim
