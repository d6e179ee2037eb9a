// The collective cost model (collective.h) against the interconnect it models: nccl-tests'
// bandwidth definitions, the Neuron docs' link, HBM and latency figures, and the alpha-beta
// formulas of Thakur, Rabenseifner and Gropp (IJHPCA 2005). busbw never exceeds what the links
// allow, large collectives come close to it, and the placement of the ranks picks the link.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "trnsim/collective.h"
#include "trnsim/error.h"
#include "trnsim/instance.h"
#include "trnsim/topology.h"
#include "trnsim/transfer.h"

namespace trnsim {
namespace {

constexpr Collective kAllOps[] = {
    Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
    Collective::Broadcast, Collective::Reduce,    Collective::AllToAll,
    Collective::Gather,    Collective::Scatter,   Collective::SendRecv,
    Collective::Barrier};
constexpr Collective kBusOps[] = {Collective::AllReduce, Collective::AllGather,
                                  Collective::ReduceScatter};

// Figures from the docs, written out again here so the tests check the model against them
// (Note [Collective latency], Note [NeuronLink topology]).
constexpr double kDmaStart = 1300;      // NKI DMA guide: "~1300 ns cross-engine" semaphore-to-start
constexpr double kFixedNs = 2 * kDmaStart;  // trigger the collective core, wait for completion
constexpr double kIntraHopNs = kDmaStart;   // one DMA per step within an instance
constexpr double kEfaHopNs = 15000;     // Neuron runtime: HBM to HBM across instances, 15 us
constexpr double kTrn2LinkGBps = 1024;  // Trn2 page: intra-instance NeuronLink-v3 per chip
constexpr double kTrn2HbmGBps = 2900;   // Trn2 page: 2.9 TB/s per chip
constexpr double kTrn2EfaGBps = 3200.0 / 8;  // Trn2 page: 3.2 Tbps EFAv3 per instance
// One direction of one link: the chip's figure over its 4 links, both directions counted.
constexpr double kTrn1LinkDirGBps = 384.0 / 4 / 2;
constexpr double kTrn2LinkDirGBps = kTrn2LinkGBps / 4 / 2;
// A logical core's DMA engines (NKI DMA guide): 16 x 17 B/ns; Trn2 LNC=2: 2 x 16 x 23 B/ns.
constexpr double kTrn1CoreDmaGBps = 16 * 17.0;
constexpr double kTrn2CoreDmaGBps = 2 * 16 * 23.0;

const std::vector<uint64_t> kSizes = {0,          1,          8,         1000,      4 * kKiB,
                                      64 * kKiB,  kMiB,       16 * kMiB, 256 * kMiB, kGiB,
                                      4 * kGiB};

std::vector<RankPlace> on_one_chip(int ranks) { return std::vector<RankPlace>(ranks); }

std::vector<RankPlace> one_per_chip(int ranks) {
  std::vector<RankPlace> out;
  for (int i = 0; i < ranks; ++i) out.push_back({0, i});
  return out;
}

// `per_node` ranks on each of `nodes` instances, on chips 0, 1, ... (wrapping onto shared
// chips past the instance's chip count).
std::vector<RankPlace> across_nodes(const InstanceSpec& s, int nodes, int per_node) {
  std::vector<RankPlace> out;
  for (int n = 0; n < nodes; ++n) {
    for (int i = 0; i < per_node; ++i) out.push_back({n, i % s.chips});
  }
  return out;
}

struct Group {
  std::string name;
  std::vector<RankPlace> ranks;
};

// Every layout the invariants are checked on for one instance.
std::vector<Group> groups_for(const InstanceSpec& s) {
  std::vector<Group> g;
  for (int p = 2; p <= s.logical_cores_per_chip; ++p) {
    g.push_back({std::to_string(p) + " on one chip", on_one_chip(p)});
  }
  if (s.chips > 1) {
    for (int p : {2, 3, 4, 16}) g.push_back({std::to_string(p) + " chips", one_per_chip(p)});
    std::vector<RankPlace> all;
    for (int c = 0; c < s.chips; ++c) {
      for (int i = 0; i < s.logical_cores_per_chip; ++i) all.push_back({0, c});
    }
    g.push_back({"every core", all});
  }
  g.push_back({"2 nodes x 1", across_nodes(s, 2, 1)});
  g.push_back({"2 nodes x 2", across_nodes(s, 2, 2)});
  g.push_back({"3 nodes x 4", across_nodes(s, 3, 4)});
  return g;
}

CollectiveCost cost(const char* instance, Collective op, uint64_t bytes,
                    const std::vector<RankPlace>& ranks) {
  return collective_cost(find_instance(instance), op, bytes, ranks);
}

TEST(Collective, NamesFollowTorchDistributed) {
  EXPECT_STREQ(collective_name(Collective::AllReduce), "all_reduce");
  EXPECT_STREQ(collective_name(Collective::AllGather), "all_gather");
  EXPECT_STREQ(collective_name(Collective::ReduceScatter), "reduce_scatter");
  EXPECT_STREQ(collective_name(Collective::Broadcast), "broadcast");
  EXPECT_STREQ(collective_name(Collective::Reduce), "reduce");
  EXPECT_STREQ(collective_name(Collective::AllToAll), "all_to_all");
  EXPECT_STREQ(collective_name(Collective::Gather), "gather");
  EXPECT_STREQ(collective_name(Collective::Scatter), "scatter");
  EXPECT_STREQ(collective_name(Collective::SendRecv), "send_recv");
  EXPECT_STREQ(collective_name(Collective::Barrier), "barrier");
}

TEST(Collective, BusFactorsFollowNcclTests) {
  // NVIDIA/nccl-tests doc/PERFORMANCE.md and src/*.cu.
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 1), 0.0);
  for (Collective op : {Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                        Collective::Gather, Collective::Scatter}) {
    EXPECT_DOUBLE_EQ(bus_factor(op, 4), 0.75) << collective_name(op);
    EXPECT_DOUBLE_EQ(bus_factor(op, 64), 63.0 / 64) << collective_name(op);
  }
  for (Collective op : {Collective::Broadcast, Collective::Reduce, Collective::SendRecv}) {
    EXPECT_DOUBLE_EQ(bus_factor(op, 8), 1.0) << collective_name(op);
  }
  EXPECT_THROW(bus_factor(Collective::AllReduce, 0), Error);
}

TEST(Collective, EmptyGroupThrows) {
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  for (Collective op : kAllOps) EXPECT_THROW(collective_cost(s, op, kMiB, {}), Error);
}

TEST(Collective, RankOutsideTheInstanceThrows) {
  const InstanceSpec& s = find_instance("trn2.3xlarge");  // one chip
  EXPECT_THROW(collective_cost(s, Collective::AllReduce, kMiB, {{0, 0}, {0, 1}}), Error);
  EXPECT_THROW(collective_cost(s, Collective::AllReduce, kMiB, {{0, 0}, {-1, 0}}), Error);
  try {
    collective_cost(s, Collective::AllReduce, kMiB, {{0, 0}, {0, 1}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trn2.3xlarge"), std::string::npos) << e.what();
  }
}

TEST(Collective, OneRankCostsNothing) {
  for (const InstanceSpec& s : instance_table()) {
    for (Collective op : kAllOps) {
      for (uint64_t bytes : kSizes) {
        const CollectiveCost c = collective_cost(s, op, bytes, {{0, 0}});
        EXPECT_EQ(c.duration_ns, 0.0) << s.name << " " << collective_name(op);
        EXPECT_EQ(c.algbw_gbps, 0.0);
        EXPECT_EQ(c.busbw_gbps, 0.0);
        EXPECT_EQ(c.algorithm, "none");
      }
    }
  }
}

TEST(Collective, LinkFollowsPlacement) {
  // trn2.3xlarge is one chip: "does not use NeuronLink interconnect or EFA" (Trn2 page).
  EXPECT_EQ(cost("trn2.3xlarge", Collective::AllReduce, kMiB, on_one_chip(4)).link, "on-chip");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kMiB, on_one_chip(4)).link, "on-chip");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kMiB, one_per_chip(2)).link,
            "NeuronLink");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kMiB, {{0, 0}, {0, 0}, {0, 5}}).link,
            "NeuronLink");
  EXPECT_EQ(cost("trn1.32xlarge", Collective::AllGather, kMiB, one_per_chip(16)).link,
            "NeuronLink");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kMiB, {{0, 0}, {1, 0}}).link, "EFA");
  EXPECT_EQ(cost("trn1.32xlarge", Collective::Broadcast, kMiB, {{0, 3}, {7, 3}}).link, "EFA");
  // Instances without EFA still reach each other over their plain network.
  EXPECT_EQ(cost("trn2.3xlarge", Collective::AllReduce, kMiB, {{0, 0}, {1, 0}}).link, "network");
  EXPECT_EQ(cost("trn1.2xlarge", Collective::AllReduce, kMiB, {{0, 0}, {1, 0}}).link, "network");
}

TEST(Collective, InstanceNetworkFollowsTheDocs) {
  // Trn1 and Trn2 architecture pages (Gbit/s over 8 is GB/s).
  EXPECT_DOUBLE_EQ(find_instance("trn1.32xlarge").network_gbps, 100.0);
  EXPECT_TRUE(find_instance("trn1.32xlarge").efa);
  EXPECT_FALSE(find_instance("trn1.2xlarge").efa);
  EXPECT_DOUBLE_EQ(find_instance("trn2.48xlarge").network_gbps, kTrn2EfaGBps);
  EXPECT_TRUE(find_instance("trn2.48xlarge").efa);
  EXPECT_DOUBLE_EQ(find_instance("trn2.3xlarge").network_gbps, 25.0);
  EXPECT_FALSE(find_instance("trn2.3xlarge").efa);
  EXPECT_DOUBLE_EQ(find_instance("trn2.48xlarge").chip->link_gbps, kTrn2LinkGBps);
  EXPECT_DOUBLE_EQ(find_instance("trn1.32xlarge").chip->link_gbps, 384.0);
}

TEST(Collective, BandwidthsFollowNcclTestsDefinitions) {
  const auto ranks = one_per_chip(4);
  for (Collective op : kAllOps) {
    const CollectiveCost c = cost("trn2.48xlarge", op, 64 * kMiB, ranks);
    SCOPED_TRACE(collective_name(op));
    if (op == Collective::Barrier) {
      EXPECT_EQ(c.algbw_gbps, 0.0);
      EXPECT_EQ(c.busbw_gbps, 0.0);
      EXPECT_EQ(c.link_gbps, 0.0);
      continue;
    }
    // GB/s is bytes per ns.
    EXPECT_DOUBLE_EQ(c.algbw_gbps, 64.0 * kMiB / c.duration_ns);
    EXPECT_DOUBLE_EQ(c.busbw_gbps, c.algbw_gbps * bus_factor(op, 4));
  }
}

TEST(Collective, BusBandwidthNeverExceedsTheLink) {
  for (const InstanceSpec& s : instance_table()) {
    for (const Group& g : groups_for(s)) {
      for (Collective op : kAllOps) {
        for (uint64_t bytes : kSizes) {
          const CollectiveCost c = collective_cost(s, op, bytes, g.ranks);
          SCOPED_TRACE(s.name + ", " + g.name + ", " + collective_name(op) + ", " +
                       std::to_string(bytes) + " B");
          EXPECT_GT(c.duration_ns, 0.0);
          EXPECT_LE(c.busbw_gbps, c.link_gbps * (1 + 1e-12));
          // The ceiling is at most the fastest hardware rate a rank has.
          EXPECT_LE(c.link_gbps, s.chip->dma_gbps);
        }
      }
    }
  }
}

TEST(Collective, DurationNeverShrinksWithBytes) {
  for (const InstanceSpec& s : instance_table()) {
    for (const Group& g : groups_for(s)) {
      for (Collective op : kAllOps) {
        SCOPED_TRACE(s.name + ", " + g.name + ", " + collective_name(op));
        double previous = 0;
        for (uint64_t bytes = 1; bytes <= 4 * kGiB; bytes = bytes * 3 / 2 + 1) {
          const double ns = collective_cost(s, op, bytes, g.ranks).duration_ns;
          EXPECT_GE(ns, previous) << bytes << " B";
          previous = ns;
        }
      }
    }
  }
}

TEST(Collective, LargeSizesReachTheLink) {
  // With 256 MiB or more the hop latencies are amortised.
  const std::vector<std::pair<const char*, std::vector<RankPlace>>> cases = {
      {"trn2.48xlarge", one_per_chip(4)}, {"trn2.48xlarge", one_per_chip(16)},
      {"trn1.32xlarge", one_per_chip(2)}, {"trn1.32xlarge", one_per_chip(16)},
      {"trn2.3xlarge", on_one_chip(4)}};
  for (const auto& [instance, ranks] : cases) {
    for (Collective op : kBusOps) {
      for (uint64_t bytes : {256 * kMiB, kGiB}) {
        const CollectiveCost c = cost(instance, op, bytes, ranks);
        EXPECT_GE(c.busbw_gbps, 0.9 * c.link_gbps)
            << instance << " " << ranks.size() << " ranks " << collective_name(op) << " "
            << bytes;
      }
    }
  }
}

TEST(Collective, RingsRunOnTheLinksOfTheTorus) {
  // One rank per chip: a ring over all 16 chips runs both ways around the torus's 2
  // Hamiltonian cycles, 4 link directions per chip; a row of 4 chips is one cycle (2); two
  // neighbouring chips share one link (1 direction each way). Trn2's HBM (2.9 TB/s, 3 touches
  // per reduced byte) and DMA engines (736 GB/s) keep up, so the links are the bound.
  const struct {
    int chips;
    double gbps;
  } cases[] = {{16, 4 * kTrn2LinkDirGBps}, {4, 2 * kTrn2LinkDirGBps}, {2, kTrn2LinkDirGBps}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.chips) + " chips");
    const auto ranks = one_per_chip(c.chips);
    EXPECT_DOUBLE_EQ(cost("trn2.48xlarge", Collective::AllGather, kGiB, ranks).link_gbps, c.gbps);
    for (Collective op : kBusOps) {
      const double busbw = cost("trn2.48xlarge", op, kGiB, ranks).busbw_gbps;
      EXPECT_GE(busbw, 0.97 * c.gbps) << collective_name(op);
      EXPECT_LE(busbw, c.gbps) << collective_name(op);
    }
  }
  // The per-chip figure is no longer the bandwidth of one ring direction: the full torus's
  // rings together carry half of it out of each chip.
  EXPECT_DOUBLE_EQ(cost("trn2.48xlarge", Collective::AllGather, kGiB, one_per_chip(16)).link_gbps,
                   kTrn2LinkGBps / 2);
  EXPECT_DOUBLE_EQ(cost("trn1.32xlarge", Collective::AllGather, kGiB, one_per_chip(16)).link_gbps,
                   4 * kTrn1LinkDirGBps);
}

TEST(Collective, LargeCollectivesApproachTheHandComputedBound) {
  // Every core of the instance in the group: the chip's ranks share its HBM, so the bound is
  // the slowest of the ring's links (4 directions), the rank's DMA engines and its HBM share
  // over 3 touches per reduced byte and 2 per forwarded one. By hand:
  //   trn1.32xlarge, 32 ranks: links 4 x 48 = 192, DMA 272, HBM 820 / 2 = 410 -> reduce at
  //     410 / 3 = 136.7, forward at 192;
  //   trn2.48xlarge, 64 ranks: links 4 x 128 = 512, DMA 736, HBM 2900 / 4 = 725 -> reduce at
  //     725 / 3 = 241.7, forward at 362.5.
  // A ring all-reduce's busbw tends to 2 / (1/reduce + 1/forward).
  const struct {
    const char* instance;
    int ranks_per_chip;
    double reduce, forward;
  } cases[] = {{"trn1.32xlarge", 2, 820.0 / 2 / 3, 4 * kTrn1LinkDirGBps},
               {"trn2.48xlarge", 4, kTrn2HbmGBps / 4 / 3, kTrn2HbmGBps / 4 / 2}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.instance);
    const InstanceSpec& s = find_instance(c.instance);
    std::vector<RankPlace> all;
    for (int chip = 0; chip < s.chips; ++chip) {
      for (int i = 0; i < c.ranks_per_chip; ++i) all.push_back({0, chip});
    }
    const double bound = 2 / (1 / c.reduce + 1 / c.forward);
    const CollectiveCost ar = collective_cost(s, Collective::AllReduce, 4 * kGiB, all);
    EXPECT_EQ(ar.algorithm, "ring");
    EXPECT_NEAR(ar.link_gbps, bound, bound * 1e-9);
    EXPECT_GE(ar.busbw_gbps, 0.97 * bound);
    EXPECT_NEAR(collective_cost(s, Collective::AllGather, 4 * kGiB, all).link_gbps, c.forward,
                c.forward * 1e-9);
    EXPECT_NEAR(collective_cost(s, Collective::ReduceScatter, 4 * kGiB, all).link_gbps, c.reduce,
                c.reduce * 1e-9);
  }
}

TEST(Collective, OnChipMovesAtTheSameChipCopyRate) {
  // Forwarding on one chip is a device-to-device copy: transfer.h's rate for it.
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  const double copy_gbps =
      kGiB / (copy_duration_ns(s, CopyKind::DeviceToDeviceSameChip, kGiB) - kDmaSetupNs);
  const CollectiveCost c = collective_cost(s, Collective::SendRecv, kGiB, on_one_chip(4));
  EXPECT_NEAR(c.link_gbps, copy_gbps, copy_gbps * 1e-9);
}

TEST(Collective, MoreRanksNeverMakeARingFaster) {
  // A ring of p ranks takes 2(p-1) steps and moves 2(p-1)/p of the buffer: both grow with p,
  // as long as the ring keeps its links. (Adding a chip can close a cycle of the torus, e.g.
  // the 4th chip of a row, and give the ring more links: that is the topology, not a ring
  // getting faster with more ranks, so only groups with as many rings are compared.)
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  auto rings = [&](int p) {
    std::vector<int> chips;
    for (int i = 0; i < p; ++i) chips.push_back(i);
    return ring_count(s, chips);
  };
  int rings_compared = 0;
  for (uint64_t bytes : {uint64_t{8}, 64 * kKiB, kMiB, 16 * kMiB, 256 * kMiB}) {
    for (int p = 3; p <= 16; ++p) {
      if (rings(p) != rings(p - 1)) continue;
      const CollectiveCost fewer =
          collective_cost(s, Collective::AllReduce, bytes, one_per_chip(p - 1));
      const CollectiveCost more =
          collective_cost(s, Collective::AllReduce, bytes, one_per_chip(p));
      if (fewer.algorithm != "ring" || more.algorithm != "ring") continue;
      EXPECT_GE(more.duration_ns, fewer.duration_ns) << p << " ranks, " << bytes << " B";
      ++rings_compared;
    }
  }
  EXPECT_GE(rings_compared, 5);
  // On one chip more ranks split its HBM further.
  const InstanceSpec& one = find_instance("trn2.3xlarge");
  for (uint64_t bytes : kSizes) {
    EXPECT_GE(collective_cost(one, Collective::AllReduce, bytes, on_one_chip(4)).duration_ns,
              collective_cost(one, Collective::AllReduce, bytes, on_one_chip(2)).duration_ns);
  }
  EXPECT_GE(collective_cost(one, Collective::AllReduce, kGiB, on_one_chip(3)).duration_ns,
            collective_cost(one, Collective::AllReduce, kGiB, on_one_chip(2)).duration_ns);
}

TEST(Collective, RingAllReduceMatchesClosedForm) {
  // Thakur et al.: 2(p-1) steps + (p-1)/p n (reduce-scatter) + (p-1)/p n (all-gather), plus the
  // fixed latency. Chips 0-3 are a row of the torus: one cycle, run both ways, 2 x 128 GB/s
  // out of each chip, below Trn2's HBM over 3 or 2 touches and its 736 GB/s of DMA.
  const double n = 256.0 * kMiB, p = 4, f = (p - 1) / p;
  const double wire = 2 * kTrn2LinkDirGBps;
  const double expected = kFixedNs + 2 * (p - 1) * kIntraHopNs +
                          f * n / std::min({wire, kTrn2CoreDmaGBps, kTrn2HbmGBps / 3}) +
                          f * n / std::min({wire, kTrn2CoreDmaGBps, kTrn2HbmGBps / 2});
  const CollectiveCost c =
      cost("trn2.48xlarge", Collective::AllReduce, 256 * kMiB, one_per_chip(4));
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_NEAR(c.duration_ns, expected, expected * 1e-9);
  EXPECT_DOUBLE_EQ(c.latency_ns, kFixedNs + 6 * kIntraHopNs);
  EXPECT_EQ(c.steps, 6);
}

TEST(Collective, HierarchicalAllReduceMatchesClosedForm) {
  // Two trn2.48xlarge, two ranks each on neighbouring chips 0 and 1 (Neuron inter-node doc):
  // reduce-scatter over the chips' one link, all-reduce of the half shards over EFA, then
  // all-gather over the link. Each rank's chip has its own 200 Gbps EFA interface (Neuron
  // collectives doc: 3.2 Tbps over 16 chips), 25 GB/s. Between two instances the cheapest
  // all-reduce is one step carrying the whole shard.
  const double n = kGiB;
  const double rs = kIntraHopNs + 0.5 * n / kTrn2LinkDirGBps;
  const double ar = kEfaHopNs + (n / 2) / (kTrn2EfaGBps / 16);
  const double ag = kIntraHopNs + 0.5 * n / kTrn2LinkDirGBps;
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  const CollectiveCost c = collective_cost(s, Collective::AllReduce, kGiB, across_nodes(s, 2, 2));
  EXPECT_EQ(c.algorithm, "hierarchical single-step mesh");
  EXPECT_EQ(c.link, "EFA");
  const double expected = kFixedNs + rs + ar + ag;
  EXPECT_NEAR(c.duration_ns, expected, expected * 1e-9);
  EXPECT_DOUBLE_EQ(c.latency_ns, kFixedNs + 2 * kIntraHopNs + kEfaHopNs);
}

TEST(Collective, UltraServerInstancesTalkOverTheirNeuronLinkRing) {
  // Four trn2u.48xlarge of a Trn2 UltraServer, one rank each on chip 0: chip 0 of each
  // instance is linked to chip 0 of its two neighbours in the ring of instances (Trn2 page),
  // 256 GB/s per chip over 2 links, both directions: 64 GB/s each way per link, and the ring of
  // 4 runs both ways: 128 GB/s. Steps are NeuronLink steps, not EFA ones.
  const InstanceSpec& s = find_instance("trn2u.48xlarge");
  const std::vector<RankPlace> ranks = {{0, 0}, {1, 0}, {2, 0}, {3, 0}};
  const double n = kGiB, f = 3.0 / 4, wire = 2 * 256.0 / 2 / 2;
  const CollectiveCost c = collective_cost(s, Collective::AllReduce, kGiB, ranks);
  EXPECT_EQ(c.link, "UltraServer NeuronLink");
  EXPECT_EQ(c.algorithm, "ring");
  const double expected = kFixedNs + 6 * kIntraHopNs + 2 * f * n / wire;
  EXPECT_NEAR(c.duration_ns, expected, expected * 1e-9);
  // Instances of different UltraServers (nodes 0 and 4) use EFA.
  EXPECT_EQ(collective_cost(s, Collective::AllReduce, kGiB, {{0, 0}, {4, 0}}).link, "EFA");
  // The same four instances as plain trn2.48xlarge have only EFA between them.
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kGiB, ranks).link, "EFA");
}

TEST(Collective, LargeAllReduceAcrossFourInstancesIsHierarchical) {
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  const CollectiveCost c = collective_cost(s, Collective::AllReduce, kGiB, across_nodes(s, 4, 4));
  EXPECT_EQ(c.algorithm.rfind("hierarchical ", 0), 0u) << c.algorithm;
  EXPECT_EQ(c.link, "EFA");
}

TEST(Collective, SmallAllReduceLatencyIsTheDocumentedSum) {
  // 8 bytes: the bytes take a few ns, so the time is the fixed latency plus the steps of the
  // cheapest algorithm: single-step Mesh, one step, whatever the group (on one
  // chip, over NeuronLink, 32 ranks of a trn1.32xlarge or 64 of a trn2.48xlarge).
  const double expected = kFixedNs + kIntraHopNs;  // 3.9 us
  EXPECT_DOUBLE_EQ(expected, 3900.0);
  auto every_core = [](const char* name) {
    const InstanceSpec& s = find_instance(name);
    std::vector<RankPlace> all;
    for (int i = 0; i < s.core_count(); ++i) all.push_back({0, i / s.logical_cores_per_chip});
    return all;
  };
  const std::vector<std::pair<const char*, std::vector<RankPlace>>> cases = {
      {"trn1.32xlarge", on_one_chip(2)},
      {"trn1.32xlarge", every_core("trn1.32xlarge")},
      {"trn2.48xlarge", every_core("trn2.48xlarge")},
      {"trn2.48xlarge", one_per_chip(4)},
      {"trn2.3xlarge", on_one_chip(4)}};
  for (const auto& [instance, ranks] : cases) {
    SCOPED_TRACE(std::string(instance) + ", " + std::to_string(ranks.size()) + " ranks");
    const CollectiveCost c = cost(instance, Collective::AllReduce, 8, ranks);
    EXPECT_EQ(c.algorithm, "single-step mesh");
    EXPECT_EQ(c.steps, 1);
    EXPECT_DOUBLE_EQ(c.latency_ns, expected);
    // Single-step Mesh sends the 8 bytes to each of the p - 1 peers: at most 63 x 8 bytes,
    // a few ns even over routed links.
    EXPECT_NEAR(c.duration_ns, expected, 10.0);
  }
  // Between instances the step crosses EFA.
  const CollectiveCost efa = cost("trn2.48xlarge", Collective::AllReduce, 8, {{0, 0}, {1, 0}});
  EXPECT_DOUBLE_EQ(efa.latency_ns, kFixedNs + kEfaHopNs);
  // The documented per-hop latency of Ring/KangaRing within a node is "about 1-2 us".
  EXPECT_GE(kIntraHopNs, 1000);
  EXPECT_LE(kIntraHopNs, 2000);
}

TEST(Collective, SmallMessagesTakeFewerSteps) {
  const auto four = one_per_chip(4);
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllGather, 8, four).algorithm, "mesh");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllGather, 8, four).steps, 1);
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kGiB, four).algorithm, "ring");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::Broadcast, 8, four).algorithm, "mesh");
  // Several ranks on each of several chips: a Mesh phase is two steps (to the closest rank of
  // every chip, then within the chip: intra-node collectives doc).
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllGather, 8, {{0, 0}, {0, 0}, {0, 1}, {0, 1}})
                .steps,
            2);
  // Recursive doubling needs a power-of-two group.
  for (uint64_t bytes : kSizes) {
    EXPECT_NE(cost("trn2.48xlarge", Collective::AllReduce, bytes, one_per_chip(3)).algorithm,
              "recursive doubling");
  }
}

TEST(Collective, BarrierIsOneStep) {
  EXPECT_DOUBLE_EQ(cost("trn2.3xlarge", Collective::Barrier, 0, on_one_chip(4)).duration_ns,
                   kFixedNs + kIntraHopNs);
  EXPECT_DOUBLE_EQ(cost("trn2.48xlarge", Collective::Barrier, kGiB, one_per_chip(5)).duration_ns,
                   kFixedNs + kIntraHopNs);
  const CollectiveCost c = cost("trn2.48xlarge", Collective::Barrier, kGiB, {{0, 0}, {1, 0}});
  EXPECT_DOUBLE_EQ(c.duration_ns, kFixedNs + kEfaHopNs);
  EXPECT_EQ(c.algbw_gbps, 0.0);
  EXPECT_EQ(c.busbw_gbps, 0.0);
}

TEST(Collective, SendRecvIsOneStepPlusBytes) {
  // Neighbouring Trainium1 chips: one link direction, 48 GB/s. Two trn2.48xlarge: the chip's
  // 200 Gbps EFA interface.
  const double n = 64.0 * kMiB;
  EXPECT_NEAR(cost("trn1.32xlarge", Collective::SendRecv, 64 * kMiB, one_per_chip(2)).duration_ns,
              kFixedNs + kIntraHopNs + n / kTrn1LinkDirGBps, 1e-6);
  EXPECT_NEAR(cost("trn2.48xlarge", Collective::SendRecv, 64 * kMiB, {{0, 0}, {1, 0}}).duration_ns,
              kFixedNs + kEfaHopNs + n / (kTrn2EfaGBps / 16), 1e-6);
}

TEST(Collective, DmaShareIsTheBytesItsEnginesMove) {
  // Note [Collective DMA share]: a 2-rank all-reduce moves the whole buffer out of each rank
  // (half in the reduce-scatter, half in the all-gather, or all at once by single-step Mesh),
  // at the core's DMA engines' rate.
  for (uint64_t bytes : {uint64_t{8}, kMiB, 256 * kMiB}) {
    const CollectiveCost t1 = cost("trn1.32xlarge", Collective::AllReduce, bytes, on_one_chip(2));
    EXPECT_DOUBLE_EQ(t1.dma_bytes, static_cast<double>(bytes));
    EXPECT_NEAR(t1.dma_ns, bytes / kTrn1CoreDmaGBps, 1e-9 * bytes);
    const CollectiveCost t2 = cost("trn2.3xlarge", Collective::AllReduce, bytes, on_one_chip(2));
    EXPECT_NEAR(t2.dma_ns, bytes / kTrn2CoreDmaGBps, 1e-9 * bytes);
    EXPECT_LE(t1.dma_ns, t1.duration_ns);
  }
  // A ring all-reduce of p ranks sends 2(p-1)/p of the buffer.
  const CollectiveCost ring = cost("trn2.48xlarge", Collective::AllReduce, kGiB, one_per_chip(16));
  EXPECT_EQ(ring.algorithm, "ring");
  EXPECT_NEAR(ring.dma_bytes, 2.0 * 15 / 16 * kGiB, 1.0);
}

TEST(Collective, LeavingTheInstanceCostsMore) {
  for (const char* instance : {"trn1.32xlarge", "trn2.48xlarge"}) {
    for (Collective op : kAllOps) {
      for (uint64_t bytes : {uint64_t{8}, kMiB, 256 * kMiB}) {
        EXPECT_GT(cost(instance, op, bytes, {{0, 0}, {1, 0}}).duration_ns,
                  cost(instance, op, bytes, one_per_chip(2)).duration_ns)
            << instance << " " << collective_name(op) << " " << bytes;
      }
    }
  }
}

// Ranks on logical cores first..first+count-1 of a trn1.32xlarge (2 per chip).
std::vector<RankPlace> trn1_cores(int first, int count) {
  std::vector<RankPlace> out;
  for (int c = first; c < first + count; ++c) out.push_back({0, c / 2});
  return out;
}

TEST(Collective, Neuron218RanTpThirtyTwoAllReducesAsRings) {
  // Note [Collective algorithms by release]: Neuron 2.18's runtime ran all-reduce's all-to-all
  // pattern on 16 ranks only, so 32 ranks of a trn1.32xlarge ran Ring: 2(p-1) = 62 hops.
  const InstanceSpec& trn1 = find_instance("trn1.32xlarge");
  const auto all32 = trn1_cores(0, 32);
  const CollectiveCost old =
      collective_cost(trn1, Collective::AllReduce, 8 * kKiB, all32, CollectiveAlgorithms::Neuron2_18);
  EXPECT_EQ(old.algorithm, "ring");
  EXPECT_EQ(old.steps, 62);
  EXPECT_DOUBLE_EQ(old.latency_ns, kFixedNs + 62 * kIntraHopNs);  // 83.2 us
  const CollectiveCost now = collective_cost(trn1, Collective::AllReduce, 8 * kKiB, all32);
  EXPECT_NE(now.algorithm, "ring");
  EXPECT_LT(now.duration_ns * 5, old.duration_ns);
  // All-gather and reduce-scatter had no other algorithm in its notes either.
  for (Collective op : {Collective::AllGather, Collective::ReduceScatter}) {
    const CollectiveCost c =
        collective_cost(trn1, op, 8 * kKiB, all32, CollectiveAlgorithms::Neuron2_18);
    EXPECT_EQ(c.algorithm, "ring") << collective_name(op);
    EXPECT_EQ(c.steps, 31) << collective_name(op);
  }
  // Between instances too (RDH and the inter-node mesh came later).
  const auto two_nodes = across_nodes(trn1, 2, 1);
  EXPECT_EQ(collective_cost(trn1, Collective::AllReduce, 8, two_nodes,
                            CollectiveAlgorithms::Neuron2_18).algorithm,
            "ring");
  EXPECT_NE(collective_cost(trn1, Collective::AllReduce, 8, two_nodes).algorithm, "ring");
  // The notes name nothing for the other operations: both sets run the same algorithms.
  for (Collective op : {Collective::Broadcast, Collective::AllToAll, Collective::SendRecv}) {
    EXPECT_DOUBLE_EQ(
        collective_cost(trn1, op, 8 * kKiB, all32, CollectiveAlgorithms::Neuron2_18).duration_ns,
        collective_cost(trn1, op, 8 * kKiB, all32).duration_ns)
        << collective_name(op);
  }
}

TEST(Collective, Neuron218RanTheAllToAllPatternOnSixteenRanksOfHalfATrn1) {
  // "enabled for 16 ranks on TRN1/TRN1N within the instance (intranode); choice of 16 ranks is
  // limited to NeuronCores 0-15 or 16-31" (runtime-lib 2.15.11.0 release notes).
  const InstanceSpec& trn1 = find_instance("trn1.32xlarge");
  for (int first : {0, 16}) {
    const CollectiveCost c = collective_cost(trn1, Collective::AllReduce, 8 * kKiB,
                                             trn1_cores(first, 16), CollectiveAlgorithms::Neuron2_18);
    EXPECT_EQ(c.algorithm, "mesh") << "cores " << first << "-" << first + 15;
    EXPECT_EQ(c.steps, 4);  // two phases, each to the other chips then within the chip
  }
  // Cores 8-23 straddle the halves; 8 ranks are not 16.
  EXPECT_EQ(collective_cost(trn1, Collective::AllReduce, 8 * kKiB, trn1_cores(8, 16),
                            CollectiveAlgorithms::Neuron2_18).algorithm,
            "ring");
  EXPECT_EQ(collective_cost(trn1, Collective::AllReduce, 8 * kKiB, trn1_cores(0, 8),
                            CollectiveAlgorithms::Neuron2_18).algorithm,
            "ring");
  // A Trainium2 instance has no such group.
  EXPECT_EQ(collective_cost(find_instance("trn2.48xlarge"), Collective::AllReduce, 8 * kKiB,
                            one_per_chip(16), CollectiveAlgorithms::Neuron2_18).algorithm,
            "ring");
}

TEST(Collective, AlgorithmSetsGoByName) {
  for (auto a : {CollectiveAlgorithms::Current, CollectiveAlgorithms::Neuron2_18}) {
    EXPECT_EQ(collective_algorithms_named(collective_algorithms_name(a)), a);
  }
  EXPECT_STREQ(collective_algorithms_name(CollectiveAlgorithms::Neuron2_18), "neuron-2.18");
  try {
    collective_algorithms_named("2.18");
    ADD_FAILURE() << "an unknown name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neuron-2.18"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trnsim
