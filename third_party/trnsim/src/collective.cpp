#include "trnsim/collective.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "trnsim/error.h"

namespace trnsim {
namespace {

// Per-hop latency within an instance, on one chip or over NeuronLink: "about 1-2 us (HBM load
// dependent)" for Ring/KangaRing (Neuron runtime docs, "Intra-node Collective Communications").
constexpr double kIntraNodeHopNs = 1500.0;
// Per-hop latency between instances over EFA: "~15us" (Neuron runtime docs, "Inter-node
// Collective Communications"). Assumption: a plain network without EFA is no faster.
constexpr double kInterNodeHopNs = 15000.0;
// HBM touches per byte a rank passes on: the incoming write plus the read that forwards it
// ("1R1W"); a reducing step also reads the rank's own chunk ("2R1W"). Both from the KangaRing
// section of the intra-node doc, which says large collectives are HBM bandwidth bound.
constexpr double kMoveTouches = 2.0, kReduceTouches = 3.0;
// Assumption: recursive doubling/halving and binomial trees talk to partners that are not ring
// neighbours, over routed paths the Neuron docs call partly over-subscribed (RDH link
// utilisation "> Mesh; < Ring", no figure given); they get half the wire.
constexpr double kRecursiveWireShare = 0.5;

// One level of the interconnect as one rank of the group sees it. Assumption (the docs give
// per-chip and per-instance figures only): the chip's DMA engines, HBM and NeuronLink ports, and
// the instance's network, are shared evenly by the group's ranks on that chip or instance that
// use them at once. With every core of a chip in the group the HBM share is
// InstanceSpec::core_hbm_gbps(); one rank alone on a chip has all of it, which is what lets a
// Trn2 chip's 2.9 TB/s feed its 1,024 GB/s of NeuronLink.
struct Link {
  const char* name;
  double alpha_ns;   // per hop
  double wire_gbps;  // this rank's share of the wire: DMA engines, NeuronLink or network
  double hbm_gbps;   // this rank's share of its chip's HBM
  // Bytes per ns this rank forwards or reduces. Transfer and reduction are pipelined in slices
  // (both Neuron collective docs), so a step runs at its slowest resource: a roofline.
  double move(double share = 1.0) const {
    return std::min(wire_gbps * share, hbm_gbps / kMoveTouches);
  }
  double reduce(double share = 1.0) const {
    return std::min(wire_gbps * share, hbm_gbps / kReduceTouches);
  }
};

// Cost of one algorithm, linear in nccl-tests' size S: hop latencies plus time per byte of S.
struct Cost {
  double latency_ns = 0;
  double ns_per_byte = 0;
  double at(double bytes) const { return latency_ns + ns_per_byte * bytes; }
};
struct Algorithm {
  const char* name;
  Cost cost;
};
// The algorithms that can run one stage; the cheapest for the size runs, as the Neuron runtime
// picks its algorithm by message size.
using Stage = std::vector<Algorithm>;

int ceil_log2(int p) {
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  return steps;
}

// `op` among `p` ranks on one level. `scale` is this stage's buffer per byte of S. Formulas from
// Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication Operations in MPICH"
// (IJHPCA 2005), with beta = 1/move() and the reduction's gamma folded into 1/reduce().
Stage flat_stage(Collective op, const Link& l, int p, double scale) {
  if (p <= 1) return {{"none", {}}};
  const double a = l.alpha_ns, f = (p - 1.0) / p, lg = ceil_log2(p);
  const bool pow2 = (p & (p - 1)) == 0;  // recursive doubling/halving pair ranks up exactly
  const double mv = scale / l.move(), rd = scale / l.reduce();
  // Two ranks are each other's ring neighbour, whatever the algorithm.
  const double share = p > 2 ? kRecursiveWireShare : 1.0;
  const double mv_tree = scale / l.move(share), rd_tree = scale / l.reduce(share);
  Stage s;
  switch (op) {
    case Collective::AllReduce:
      // Ring reduce-scatter then ring all-gather; recursive doubling swaps the whole buffer.
      s.push_back({"ring", {2 * (p - 1) * a, f * rd + f * mv}});
      if (pow2) s.push_back({"recursive doubling", {lg * a, lg * rd_tree}});
      break;
    case Collective::AllGather:
      s.push_back({"ring", {(p - 1) * a, f * mv}});
      if (pow2) s.push_back({"recursive doubling", {lg * a, f * mv_tree}});
      break;
    case Collective::ReduceScatter:
      s.push_back({"ring", {(p - 1) * a, f * rd}});
      if (pow2) s.push_back({"recursive halving", {lg * a, f * rd_tree}});
      break;
    case Collective::Broadcast:
      s.push_back({"binomial tree", {lg * a, lg * mv_tree}});
      s.push_back({"scatter + ring all-gather", {(lg + p - 1) * a, f * mv_tree + f * mv}});
      break;
    case Collective::Reduce:
      s.push_back({"binomial tree", {lg * a, lg * rd_tree}});
      s.push_back({"ring reduce-scatter + gather", {(p - 1 + lg) * a, f * rd + f * mv_tree}});
      break;
    case Collective::Gather:
    case Collective::Scatter:
      // The root receives (or sends) every other rank's part either way.
      s.push_back({"ring", {(p - 1) * a, f * mv}});
      s.push_back({"binomial tree", {lg * a, f * mv_tree}});
      break;
    case Collective::AllToAll:
      s.push_back({"pairwise exchange", {(p - 1) * a, f * mv}});
      break;
    case Collective::SendRecv:
      // Every rank sends S to the next and receives S from the previous (nccl-tests sendrecv).
      s.push_back({"point-to-point", {a, mv}});
      break;
    case Collective::Barrier:
      s.push_back({"dissemination", {lg * a, 0}});
      break;
  }
  return s;
}

const Algorithm& cheapest(const Stage& stage, double bytes) {
  return *std::min_element(stage.begin(), stage.end(), [&](const auto& x, const auto& y) {
    return x.cost.at(bytes) < y.cost.at(bytes);
  });
}

// Where the group sits: how many instances, and how crowded its busiest chip and instance are.
struct Layout {
  int nodes = 0;
  int ranks_per_node = 0;  // the most of the group's ranks on one instance
  int ranks_per_chip = 0;  // the most on one chip
  bool crosses_chips = false;  // some instance holds ranks on more than one chip
};

Layout layout_of(const InstanceSpec& instance, const std::vector<RankPlace>& ranks) {
  std::map<std::pair<int, int>, int> per_chip;
  std::map<int, int> per_node;
  std::map<int, std::set<int>> chips_of_node;
  for (const RankPlace& r : ranks) {
    if (r.node < 0 || r.chip < 0 || r.chip >= instance.chips) {
      throw Error("collective rank placed on node " + std::to_string(r.node) + " chip " +
                  std::to_string(r.chip) + ", but nodes are numbered from 0 and " +
                  instance.name + " has chips 0.." + std::to_string(instance.chips - 1));
    }
    ++per_chip[{r.node, r.chip}];
    ++per_node[r.node];
    chips_of_node[r.node].insert(r.chip);
  }
  Layout out;
  out.nodes = static_cast<int>(per_node.size());
  for (const auto& [place, n] : per_chip) out.ranks_per_chip = std::max(out.ranks_per_chip, n);
  for (const auto& [node, n] : per_node) out.ranks_per_node = std::max(out.ranks_per_node, n);
  for (const auto& [node, chips] : chips_of_node) out.crosses_chips |= chips.size() > 1;
  return out;
}

// The levels as one rank sees them when `k` of the group's ranks share its chip.
Link on_chip(const InstanceSpec& inst, int k) {
  return {"on-chip", kIntraNodeHopNs, inst.chip->dma_gbps / k, inst.chip->hbm_gbps / k};
}
Link neuron_link(const InstanceSpec& inst, int k) {
  return {"NeuronLink", kIntraNodeHopNs,
          std::min(inst.chip->link_gbps, inst.chip->dma_gbps) / k, inst.chip->hbm_gbps / k};
}
// `senders` of the group's ranks on one instance use its network at once.
Link network(const InstanceSpec& inst, int k, int senders) {
  return {inst.efa ? "EFA" : "network", kInterNodeHopNs,
          std::min(inst.network_gbps / senders, inst.chip->dma_gbps / k),
          inst.chip->hbm_gbps / k};
}

}  // namespace

const char* collective_name(Collective op) {
  static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                "reduce",     "all_to_all", "gather",         "scatter",
                                "send_recv",  "barrier"};
  return names[static_cast<int>(op)];
}

double bus_factor(Collective op, int ranks) {
  if (ranks < 1) throw Error("a collective group has at least one rank");
  const double p = ranks;
  switch (op) {
    case Collective::AllReduce: return 2 * (p - 1) / p;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return (p - 1) / p;
    default: return 1.0;
  }
}

CollectiveCost collective_cost(const InstanceSpec& instance, Collective op, uint64_t bytes,
                               const std::vector<RankPlace>& ranks) {
  if (ranks.empty()) {
    throw Error(std::string("collective ") + collective_name(op) +
                " needs at least one rank in its group");
  }
  const Layout g = layout_of(instance, ranks);
  const int p = static_cast<int>(ranks.size());
  CollectiveCost out;
  out.algorithm = "none";
  out.link = "on-chip";
  if (p == 1) return out;

  const int k = g.ranks_per_chip, x = g.nodes, y = g.ranks_per_node;
  const Link intra = g.crosses_chips ? neuron_link(instance, k) : on_chip(instance, k);
  std::vector<Stage> stages;
  int inter = -1;  // index of the stage between instances, when hierarchical
  if (x == 1) {
    stages.push_back(flat_stage(op, intra, p, 1.0));
  } else {
    // Between instances (Neuron docs, "Inter-node Collective Communications"): stages within
    // each instance and between instances, each with its own alpha and bandwidth. Every rank
    // of an instance uses the network at once in the symmetric ops; one per instance in the
    // rooted ones.
    const Link all = network(instance, k, y), one = network(instance, k, 1);
    auto add = [&](Collective o, const Link& l, int n, double scale, bool between) {
      if (between) inter = static_cast<int>(stages.size());
      stages.push_back(flat_stage(o, l, n, scale));
    };
    switch (op) {
      case Collective::AllReduce:  // reduce-scatter, all-reduce of the shards, all-gather
        add(Collective::ReduceScatter, intra, y, 1.0, false);
        add(Collective::AllReduce, all, x, 1.0 / y, true);
        add(Collective::AllGather, intra, y, 1.0, false);
        break;
      case Collective::AllGather:  // inter first: the network carries the smaller stage
        add(Collective::AllGather, all, x, 1.0 / y, true);
        add(Collective::AllGather, intra, y, 1.0, false);
        break;
      case Collective::ReduceScatter:
        add(Collective::ReduceScatter, intra, y, 1.0, false);
        add(Collective::ReduceScatter, all, x, 1.0 / y, true);
        break;
      case Collective::Broadcast:
        add(Collective::Broadcast, one, x, 1.0, true);
        add(Collective::Broadcast, intra, y, 1.0, false);
        break;
      case Collective::Reduce:
        add(Collective::Reduce, intra, y, 1.0, false);
        add(Collective::Reduce, one, x, 1.0, true);
        break;
      case Collective::Gather:
        add(Collective::Gather, intra, y, 1.0 / x, false);
        add(Collective::Gather, one, x, 1.0, true);
        break;
      case Collective::Scatter:
        add(Collective::Scatter, one, x, 1.0, true);
        add(Collective::Scatter, intra, y, 1.0 / x, false);
        break;
      case Collective::AllToAll: {
        // Pairwise over all p ranks: the parts for other instances cross the network, the rest
        // stay inside; every step may leave the instance, so every hop pays the network alpha.
        const double off = double(p - y) / p, on = double(y - 1) / p;
        stages.push_back({{"pairwise exchange",
                           {(p - 1) * all.alpha_ns, off / all.move() + on / intra.move()}}});
        break;
      }
      case Collective::SendRecv:
      case Collective::Barrier:
        stages.push_back(flat_stage(op, all, p, 1.0));
        break;
    }
  }

  const double size = static_cast<double>(bytes);
  double best_ns_per_byte = 0;  // of the bandwidth-optimal algorithms: sets the busbw ceiling
  for (size_t i = 0; i < stages.size(); ++i) {
    const Algorithm& a = cheapest(stages[i], size);
    out.duration_ns += a.cost.at(size);
    double least = a.cost.ns_per_byte;
    for (const Algorithm& c : stages[i]) least = std::min(least, c.cost.ns_per_byte);
    best_ns_per_byte += least;
    if (stages.size() == 1) out.algorithm = a.name;
    if (static_cast<int>(i) == inter) {
      out.algorithm = y > 1 ? std::string("hierarchical ") + a.name : a.name;
    }
  }
  out.link = x > 1 ? network(instance, k, y).name : intra.name;
  if (op == Collective::Barrier || best_ns_per_byte == 0) return out;  // moves no data
  const double factor = bus_factor(op, p);
  out.link_gbps = factor / best_ns_per_byte;
  out.algbw_gbps = size / out.duration_ns;
  out.busbw_gbps = out.algbw_gbps * factor;
  return out;
}

}  // namespace trnsim
