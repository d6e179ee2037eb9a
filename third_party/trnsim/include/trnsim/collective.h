// What a collective costs on the simulated interconnect: pure functions of the operation, its
// size and where the participating NeuronCores sit (same chip, other chips of one instance over
// NeuronLink, the instances of an UltraServer over NeuronLink, other instances over EFA).
//
// Note [Collective latency]
// A collective costs a fixed latency, a latency per algorithm step, and its bytes over the
// slowest resource a step uses, each derived from documented hardware facts (the constants in
// collective.cpp cite them), never from the nccom-test measurements the fidelity suite
// compares with:
//   - fixed, once per collective: the compute engine triggers the collective core with a write
//     and later waits for its completion semaphore (neuron-runtime/explore/
//     compute-comm-overlap.rst); each is one cross-engine semaphore-to-start, ~1300 ns (NKI DMA
//     bandwidth guide), so 2.6 us;
//   - per step within an instance (on one chip or over NeuronLink, UltraServer links too): one
//     DMA started on a semaphore, ~1300 ns (same guide), which falls in the intra-node
//     collectives doc's "per-hop latency of Ring/KangaRing is about 1-2 us";
//   - per step between instances over EFA: 15 us, "a minimal packet takes 15us ... from an HBM
//     in one server to an HBM of another" (neuron-runtime/about/collectives.rst; "~15us" per hop
//     in the inter-node doc);
//   - steps per algorithm, as the runtime docs describe them: Ring 2(p-1) for all-reduce and
//     p-1 for all-gather/reduce-scatter, Mesh 1 per phase (all-reduce 2, or 1 for single-step
//     Mesh), recursive doubling/halving log2 p per phase; the runtime picks by size, so the
//     cheapest for the size runs.
// Bytes (alpha-beta, Thakur, Rabenseifner, Gropp, IJHPCA 2005): a ring step runs on the
// link-disjoint rings the topology has (Note [NeuronLink topology]); a recursive doubling or
// tree step talks to one partner over one link direction, shared by the group's ranks on the
// chip; Mesh writes to every peer at once over routed paths, so its bytes cross the mean number
// of links. Every step is also bounded by the rank's DMA engines (it moves its data) and its HBM
// share over the touches per byte (2 to forward, 3 to reduce: the intra-node doc's 1R1W/2R1W).
// Multi-instance groups run hierarchically (within each instance, then between instances).
//
// Note [Collective DMA share]
// A collective's data moves on the DMA engines of the rank's own core, the queues compute uses
// for its HBM traffic ("DMA engines are shared resources between computation and communication",
// compute-comm-overlap.rst). The engines arbitrate round-robin between their rings at packet
// boundaries, with collective packets of 64 KiB against 4 KiB for compute by default (same doc),
// so while both move data the collective gets 64/(64+4) = 94% of the engines and compute the
// rest. Whatever the split, compute cannot finish before the engines have moved both its bytes
// and the collective's: a collective delays HBM-bound compute on its core by the time its bytes
// take at the DMA engines' full rate, CollectiveCost::dma_ns. Work on the core's queues models
// this by the collective holding the core's HBM/DMA share for dma_ns (Note [Shared engines]);
// launches take it in issue order, so a collective starts once work issued before it on other
// streams has left the DMA queues (Device::dma_free_ns; the process group counts that in each
// rank's arrival, so the ranks still agree on the start).
//
// Note [Collective algorithms by release]
// Which algorithms the runtime may pick from changed between Neuron releases, and a prediction
// of a measurement must use the release that measured it. Two sets are modelled:
//   - Current: the algorithms above, as the runtime's collective docs describe them
//     (neuron-runtime/explore/intranode- and internode-collective-comm.rst, 2025-26);
//   - Neuron2_18 (Neuron 2.18, runtime-lib 2.20, aws-neuron-sdk@d4f19516 release-notes/
//     runtime): all-reduce, all-gather and reduce-scatter run Ring, except all-reduce's
//     all-to-all pattern ("Mesh" today), added in runtime-lib 2.14.8.0 and from
//     runtime-lib 2.15.11.0 / collectives 2.15.13.0 "enabled for 16 ranks on TRN1/TRN1N
//     within the instance (intranode); choice of 16 ranks is limited to NeuronCores 0-15 or
//     16-31". No note up to 2.18 extends it, and the inter-node algorithms came later (an
//     "inter-node mesh algorithm" improved in runtime-lib 2.22.14.0, RDH introduced in
//     Neuron 2.24), so a group of 32 ranks or of several instances ran Ring. The release
//     notes name no algorithm for the other operations: both sets run the model's for them.
// Ring's per-step latency is the same in both (the intra-node doc's 1-2 us per hop).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trnsim/instance.h"
#include "trnsim/isa_cost.h"

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

// Which runtime's algorithms a collective may run (Note [Collective algorithms by release]).
enum class CollectiveAlgorithms { Current, Neuron2_18 };
const char* collective_algorithms_name(CollectiveAlgorithms algorithms);  // "current", "neuron-2.18"
// The set a name gives; throws trnsim::Error naming the valid ones for any other.
CollectiveAlgorithms collective_algorithms_named(const std::string& name);

// Where one rank's NeuronCore sits: which simulated instance (node) and which chip of it.
struct RankPlace {
  int node = 0;
  int chip = 0;
};

struct CollectiveCost {
  double duration_ns = 0;  // from the last rank's arrival to completion on every rank
  // The part of duration_ns that does not depend on the size: the fixed latency plus the
  // latency of every step (Note [Collective latency]), and the number of steps.
  double latency_ns = 0;
  int steps = 0;
  // Bytes one rank's DMA engines move, and the time they take at the engines' full rate: how
  // long the collective holds the core's DMA queues (Note [Collective DMA share]).
  double dma_bytes = 0;
  double dma_ns = 0;
  // "ring", "mesh", "single-step mesh", "recursive doubling", "recursive halving",
  // "recursive halving + doubling", "binomial tree", "pairwise exchange", "point-to-point", ...; "hierarchical <algorithm between instances>" for
  // groups with several ranks on each of several instances; "none" for a group of one.
  std::string algorithm;
  // The slowest link crossed: "on-chip", "NeuronLink", "UltraServer NeuronLink" between the
  // instances of a Trn2 UltraServer, "EFA", or "network" between instances that have no EFA
  // (trn1.2xlarge, trn2.3xlarge).
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
// The runtime picks the cheapest of the algorithms `algorithms` allows.
CollectiveCost collective_cost(const InstanceSpec& instance, Collective op, uint64_t bytes,
                               const std::vector<RankPlace>& ranks,
                               CollectiveAlgorithms algorithms = CollectiveAlgorithms::Current);

// The latencies of Note [Collective latency], ns, in units of one DMA's descriptor setup,
// synchronization and semaphore-to-start (kDmaFixedLatencyNs, isa_cost.h).
// Once per collective: the trigger of the collective core and the wait for its completion.
constexpr double kCollectiveFixedNs = 2 * kDmaFixedLatencyNs;
// Per algorithm step within an instance: one DMA started on a semaphore.
constexpr double kCollectiveStepNs = kDmaFixedLatencyNs;
// Per algorithm step between instances: HBM to HBM over EFA (neuron-runtime/about/
// collectives.rst, measured with ib_write_lat on trn2.48xlarge; "~15us" per hop,
// neuron-runtime/explore/internode-collective-comm.rst).
constexpr double kCollectiveEfaStepNs = 15000.0;

// nccl-tests' bus bandwidth factor (src/*.cu there): 2(p-1)/p for all-reduce, (p-1)/p for
// all-gather, reduce-scatter, all-to-all, gather and scatter, 1 for the rest. Throws
// trnsim::Error for fewer than one rank.
double bus_factor(Collective op, int ranks);

}  // namespace trnsim
