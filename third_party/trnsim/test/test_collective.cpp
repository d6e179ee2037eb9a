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

// Figures from the docs, written out again here so the tests check the model against them.
constexpr double kIntraHopNs = 1500;   // Neuron runtime, intra-node: "about 1-2 us" per hop
constexpr double kEfaHopNs = 15000;    // Neuron runtime, inter-node: "~15us" per hop
constexpr double kTrn2LinkGBps = 1024;  // Trn2 page: intra-instance NeuronLink-v3 per chip
constexpr double kTrn2HbmGBps = 2900;   // Trn2 page: 2.9 TB/s per chip
constexpr double kTrn2EfaGBps = 3200.0 / 8;  // Trn2 page: 3.2 Tbps EFAv3 per instance

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

TEST(Collective, Trn2ReachesItsNeuronLinkPeak) {
  // One rank per chip has the chip's 1,024 GB/s of NeuronLink and 2.9 TB/s of HBM to itself,
  // enough for three HBM touches per reduced byte, so large collectives run near the link rate.
  const auto ranks = one_per_chip(4);
  EXPECT_DOUBLE_EQ(cost("trn2.48xlarge", Collective::AllGather, kGiB, ranks).link_gbps,
                   kTrn2LinkGBps);
  for (Collective op : kBusOps) {
    EXPECT_GE(cost("trn2.48xlarge", op, kGiB, ranks).busbw_gbps, 0.9 * kTrn2LinkGBps)
        << collective_name(op);
    EXPECT_LE(cost("trn2.48xlarge", op, kGiB, ranks).busbw_gbps, kTrn2LinkGBps);
  }
}

TEST(Collective, Trn1ReductionsAreHbmBound) {
  // 820 GB/s of HBM feeds 384 GB/s of NeuronLink at two touches per forwarded byte but not at
  // three per reduced byte: the intra-node doc's "HBM bandwidth bound" large sizes.
  const auto ranks = one_per_chip(2);
  const double hbm = find_instance("trn1.32xlarge").chip->hbm_gbps;
  EXPECT_DOUBLE_EQ(cost("trn1.32xlarge", Collective::AllGather, kGiB, ranks).link_gbps, 384.0);
  EXPECT_DOUBLE_EQ(cost("trn1.32xlarge", Collective::ReduceScatter, kGiB, ranks).link_gbps,
                   hbm / 3);
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
  // A ring of p ranks takes 2(p-1) hops and moves 2(p-1)/p of the buffer: both grow with p.
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  int rings_compared = 0;
  for (uint64_t bytes : {uint64_t{8}, 64 * kKiB, kMiB, 16 * kMiB, 256 * kMiB}) {
    for (int p = 3; p <= 16; ++p) {
      const CollectiveCost fewer =
          collective_cost(s, Collective::AllReduce, bytes, one_per_chip(p - 1));
      const CollectiveCost more =
          collective_cost(s, Collective::AllReduce, bytes, one_per_chip(p));
      if (fewer.algorithm != "ring" || more.algorithm != "ring") continue;
      EXPECT_GE(more.duration_ns, fewer.duration_ns) << p << " ranks, " << bytes << " B";
      ++rings_compared;
    }
  }
  EXPECT_GT(rings_compared, 30);
  // Whatever the algorithm, doubling the group never helps.
  for (uint64_t bytes : kSizes) {
    for (int p = 2; p <= 8; p *= 2) {
      EXPECT_GE(collective_cost(s, Collective::AllReduce, bytes, one_per_chip(2 * p)).duration_ns,
                collective_cost(s, Collective::AllReduce, bytes, one_per_chip(p)).duration_ns);
    }
  }
  // On one chip more ranks also split its HBM further.
  const InstanceSpec& one = find_instance("trn2.3xlarge");
  EXPECT_GE(collective_cost(one, Collective::AllReduce, kGiB, on_one_chip(3)).duration_ns,
            collective_cost(one, Collective::AllReduce, kGiB, on_one_chip(2)).duration_ns);
}

TEST(Collective, RingAllReduceMatchesClosedForm) {
  // Thakur et al.: 2(p-1)a + (p-1)/p n (reduce-scatter) + (p-1)/p n (all-gather), each step at
  // the slower of NeuronLink and HBM over its touches per byte (3 to reduce, 2 to forward).
  const double n = 256.0 * kMiB, p = 4, f = (p - 1) / p;
  const double expected = 2 * (p - 1) * kIntraHopNs +
                          f * n / std::min(kTrn2LinkGBps, kTrn2HbmGBps / 3) +
                          f * n / std::min(kTrn2LinkGBps, kTrn2HbmGBps / 2);
  const CollectiveCost c =
      cost("trn2.48xlarge", Collective::AllReduce, 256 * kMiB, one_per_chip(4));
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_NEAR(c.duration_ns, expected, expected * 0.01);
}

TEST(Collective, HierarchicalAllReduceMatchesClosedForm) {
  // Two trn2.48xlarge, two ranks each on chips 0 and 1 (Neuron inter-node doc): intra-instance
  // ring reduce-scatter, all-reduce of the half shards over EFA, both ranks of an instance
  // sharing its 3.2 Tbps, then intra-instance ring all-gather. Between two instances recursive
  // doubling is one hop carrying the whole shard: the ring's bytes in half its hops.
  const double n = kGiB;
  const double rs = kIntraHopNs + 0.5 * n / (kTrn2HbmGBps / 3);
  const double efa = kTrn2EfaGBps / 2;
  const double ar = kEfaHopNs + (n / 2) / efa;
  const double ag = kIntraHopNs + 0.5 * n / kTrn2LinkGBps;
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  const CollectiveCost c = collective_cost(s, Collective::AllReduce, kGiB, across_nodes(s, 2, 2));
  EXPECT_EQ(c.algorithm, "hierarchical recursive doubling");
  EXPECT_EQ(c.link, "EFA");
  EXPECT_NEAR(c.duration_ns, rs + ar + ag, (rs + ar + ag) * 0.01);
}

TEST(Collective, LargeAllReduceAcrossFourInstancesIsAHierarchicalRing) {
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  const CollectiveCost c = collective_cost(s, Collective::AllReduce, kGiB, across_nodes(s, 4, 4));
  EXPECT_EQ(c.algorithm, "hierarchical ring");
  EXPECT_EQ(c.link, "EFA");
}

TEST(Collective, SmallMessagesTakeFewerHops) {
  const auto four = one_per_chip(4);
  const CollectiveCost tiny = cost("trn2.48xlarge", Collective::AllReduce, 8, four);
  EXPECT_EQ(tiny.algorithm, "recursive doubling");
  EXPECT_NEAR(tiny.duration_ns, 2 * kIntraHopNs, 1.0);  // log2(4) hops, not 2(4-1)
  EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, kGiB, four).algorithm, "ring");
  EXPECT_EQ(cost("trn2.48xlarge", Collective::Broadcast, 8, four).algorithm, "binomial tree");
  // Recursive doubling needs a power-of-two group.
  for (uint64_t bytes : kSizes) {
    EXPECT_EQ(cost("trn2.48xlarge", Collective::AllReduce, bytes, one_per_chip(3)).algorithm,
              "ring");
  }
}

TEST(Collective, BarrierIsLogarithmicHops) {
  EXPECT_DOUBLE_EQ(cost("trn2.3xlarge", Collective::Barrier, 0, on_one_chip(4)).duration_ns,
                   2 * kIntraHopNs);
  EXPECT_DOUBLE_EQ(cost("trn2.48xlarge", Collective::Barrier, kGiB, one_per_chip(5)).duration_ns,
                   3 * kIntraHopNs);
  const CollectiveCost c = cost("trn2.48xlarge", Collective::Barrier, kGiB, {{0, 0}, {1, 0}});
  EXPECT_DOUBLE_EQ(c.duration_ns, kEfaHopNs);
  EXPECT_EQ(c.algbw_gbps, 0.0);
  EXPECT_EQ(c.busbw_gbps, 0.0);
}

TEST(Collective, SendRecvIsOneHopPlusBytes) {
  const double n = 64.0 * kMiB;
  EXPECT_NEAR(cost("trn1.32xlarge", Collective::SendRecv, 64 * kMiB, one_per_chip(2)).duration_ns,
              kIntraHopNs + n / 384.0, 1.0);
  EXPECT_NEAR(cost("trn2.48xlarge", Collective::SendRecv, 64 * kMiB, {{0, 0}, {1, 0}}).duration_ns,
              kEfaHopNs + n / kTrn2EfaGBps, 1.0);
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

}  // namespace
}  // namespace trnsim
