#include "trnsim/collective.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "trnsim/error.h"
#include "trnsim/topology.h"

namespace trnsim {
namespace {

// HBM touches per byte a rank passes on: the incoming write plus the read that forwards it
// ("1R1W"); a reducing step also reads the rank's own chunk ("2R1W"). Both from the KangaRing
// section of the intra-node doc, which says large collectives are HBM bandwidth bound.
constexpr double kMoveTouches = 2.0, kReduceTouches = 3.0;

// One level of the interconnect as one rank of the group sees it (Note [Collective latency]).
// Assumption (the docs give per-chip and per-instance figures only): a chip's HBM and links,
// and an instance's network, are shared evenly by the group's ranks on that chip or instance
// that use them at once.
struct Level {
  const char* name;
  double step_ns;
  double ring_gbps;  // wire GB/s of one rank's ring step, over all the rings run at once
  double pair_gbps;  // wire GB/s to one partner (recursive doubling/halving, trees, pairwise)
  double mesh_gbps;  // wire GB/s writing to every peer at once over routed paths
  double dma_gbps;   // the rank's DMA engines
  double hbm_gbps;   // the rank's share of its chip's HBM
  // Steps of one Mesh phase: 1, or 2 with several ranks on each of several chips (to the
  // closest rank of every other chip, then within each chip: intra-node collectives doc).
  int mesh_steps = 1;
  // Bytes per ns a step forwards or reduces: transfer and reduction are pipelined in slices
  // (both Neuron collective docs), so a step runs at its slowest resource.
  double move(double wire) const {
    return std::min({wire, dma_gbps, hbm_gbps / kMoveTouches});
  }
  double reduce(double wire) const {
    return std::min({wire, dma_gbps, hbm_gbps / kReduceTouches});
  }
};

// Cost of one algorithm, linear in nccl-tests' size S.
struct Cost {
  int steps = 0;
  double latency_ns = 0;
  double ns_per_byte = 0;    // time per byte of S
  double sent_per_byte = 0;  // bytes this rank's DMA engines move per byte of S
  double at(double bytes) const { return latency_ns + ns_per_byte * bytes; }
};
struct Algorithm {
  const char* name;
  Cost cost;
};
// The algorithms that can run one stage; the cheapest for the size runs, as the Neuron runtime
// picks its algorithm by message size.
using Stage = std::vector<Algorithm>;

// One term of a cost: `share` bytes per byte of S at `gbps`.
struct Term {
  double share, gbps;
};

Algorithm algorithm(const char* name, const Level& l, int steps, double scale,
                    std::initializer_list<Term> terms) {
  Cost c;
  c.steps = steps;
  c.latency_ns = steps * l.step_ns;
  for (const Term& t : terms) {
    c.ns_per_byte += scale * t.share / t.gbps;
    c.sent_per_byte += scale * t.share;
  }
  return {name, c};
}

int ceil_log2(int p) {
  int steps = 0;
  while ((1 << steps) < p) ++steps;
  return steps;
}

// `op` among `p` ranks on one level. `scale` is this stage's buffer per byte of S. Formulas from
// Thakur, Rabenseifner, Gropp (IJHPCA 2005) and the Neuron runtime's collective docs, with
// beta = 1/move() and the reduction's gamma folded into 1/reduce().
Stage flat_stage(Collective op, const Level& l, int p, double scale) {
  if (p <= 1) return {{"none", {}}};
  const double f = (p - 1.0) / p;
  const int lg = ceil_log2(p);
  const bool pow2 = (p & (p - 1)) == 0;  // recursive doubling/halving pair ranks up exactly
  const double ring_mv = l.move(l.ring_gbps), ring_rd = l.reduce(l.ring_gbps);
  const double pair_mv = l.move(l.pair_gbps), pair_rd = l.reduce(l.pair_gbps);
  const double mesh_mv = l.move(l.mesh_gbps), mesh_rd = l.reduce(l.mesh_gbps);
  auto A = [&](const char* name, int steps, std::initializer_list<Term> terms) {
    return algorithm(name, l, steps, scale, terms);
  };
  const int ms = l.mesh_steps;
  Stage s;
  switch (op) {
    case Collective::AllReduce:
      // Ring: reduce-scatter then all-gather around the ring. Mesh: the same two phases in one
      // step each; single-step Mesh: every rank sends its whole buffer to every peer and
      // reduces what it receives (intra- and inter-node docs). Recursive doubling swaps the
      // whole buffer log2 p times; recursive halving + doubling (RDH) moves the ring's bytes.
      s.push_back(A("ring", 2 * (p - 1), {{f, ring_rd}, {f, ring_mv}}));
      s.push_back(A("mesh", 2 * ms, {{f, mesh_rd}, {f, mesh_mv}}));
      s.push_back(A("single-step mesh", 1, {{p - 1.0, mesh_rd}}));
      if (pow2) {
        s.push_back(A("recursive doubling", lg, {{double(lg), pair_rd}}));
        s.push_back(A("recursive halving + doubling", 2 * lg, {{f, pair_rd}, {f, pair_mv}}));
      }
      break;
    case Collective::AllGather:
      s.push_back(A("ring", p - 1, {{f, ring_mv}}));
      s.push_back(A("mesh", ms, {{f, mesh_mv}}));
      if (pow2) s.push_back(A("recursive doubling", lg, {{f, pair_mv}}));
      break;
    case Collective::ReduceScatter:
      s.push_back(A("ring", p - 1, {{f, ring_rd}}));
      s.push_back(A("mesh", ms, {{f, mesh_rd}}));
      if (pow2) s.push_back(A("recursive halving", lg, {{f, pair_rd}}));
      break;
    case Collective::Broadcast:
      s.push_back(A("binomial tree", lg, {{double(lg), pair_mv}}));
      s.push_back(A("scatter + ring all-gather", lg + p - 1, {{f, pair_mv}, {f, ring_mv}}));
      s.push_back(A("mesh", 1, {{p - 1.0, mesh_mv}}));
      break;
    case Collective::Reduce:
      s.push_back(A("binomial tree", lg, {{double(lg), pair_rd}}));
      s.push_back(A("ring reduce-scatter + gather", p - 1 + lg, {{f, ring_rd}, {f, pair_mv}}));
      break;
    case Collective::Gather:
    case Collective::Scatter:
      // The root receives (or sends) every other rank's part either way.
      s.push_back(A("ring", p - 1, {{f, ring_mv}}));
      s.push_back(A("binomial tree", lg, {{f, pair_mv}}));
      s.push_back(A("mesh", ms, {{f, mesh_mv}}));
      break;
    case Collective::AllToAll:
      s.push_back(A("pairwise exchange", p - 1, {{f, pair_mv}}));
      s.push_back(A("mesh", ms, {{f, mesh_mv}}));
      break;
    case Collective::SendRecv:
      // Every rank sends S to the next and receives S from the previous (nccl-tests sendrecv).
      s.push_back(A("point-to-point", 1, {{1.0, pair_mv}}));
      break;
    case Collective::Barrier:
      // Semaphore writes, no data: every rank to every other in one step.
      s.push_back(A("mesh", 1, {}));
      break;
  }
  return s;
}

// The algorithms of a stage running `op` that `algorithms` allows (Note [Collective
// algorithms by release]); `all_to_all_group`: a group the 2.18 runtime ran all-reduce's
// all-to-all pattern on.
Stage allowed(Stage stage, Collective op, CollectiveAlgorithms algorithms,
              bool all_to_all_group) {
  const bool restricted = op == Collective::AllReduce || op == Collective::AllGather ||
                          op == Collective::ReduceScatter;
  if (algorithms == CollectiveAlgorithms::Current || !restricted) return stage;
  Stage out;
  for (const Algorithm& a : stage) {
    const std::string name = a.name;
    if (name == "none" || name == "ring" ||
        (op == Collective::AllReduce && all_to_all_group && name == "mesh")) {
      out.push_back(a);
    }
  }
  return out;
}

// "16 ranks on TRN1/TRN1N within the instance ... limited to NeuronCores 0-15 or 16-31"
// (Note [Collective algorithms by release]): logical core c of an instance sits on chip
// c / logical_cores_per_chip, so cores 0-15 are the first 16 / logical_cores_per_chip chips.
bool trn1_all_to_all_group(const InstanceSpec& inst, const std::vector<RankPlace>& ranks) {
  if (inst.chip->name != "Trainium1" || ranks.size() != 16 || inst.core_count() < 32) {
    return false;
  }
  auto half = [&](const RankPlace& r) { return r.chip * inst.logical_cores_per_chip / 16; };
  return std::all_of(ranks.begin(), ranks.end(), [&](const RankPlace& r) {
    return r.node == ranks.front().node && half(r) == half(ranks.front());
  });
}

const Algorithm& cheapest(const Stage& stage, double bytes) {
  return *std::min_element(stage.begin(), stage.end(), [&](const auto& x, const auto& y) {
    return x.cost.at(bytes) < y.cost.at(bytes);
  });
}

// Where the group sits: how many instances, how crowded its busiest chip and instance are, and
// the chips it uses on each instance.
struct Layout {
  int nodes = 0;
  int ranks_per_node = 0;  // the most of the group's ranks on one instance
  int ranks_per_chip = 0;  // the most on one chip
  bool crosses_chips = false;  // some instance holds ranks on more than one chip
  std::vector<std::vector<int>> chips;  // per instance, the chips the group uses
  std::vector<int> node_ids;
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
  for (const auto& [node, chips] : chips_of_node) {
    out.crosses_chips |= chips.size() > 1;
    out.chips.emplace_back(chips.begin(), chips.end());
    out.node_ids.push_back(node);
  }
  return out;
}

// The levels as one rank sees them when `k` of the group's ranks share its chip.
Level on_chip(const InstanceSpec& inst, int k) {
  // Between the cores of one chip a step is a DMA within the chip's HBM: no link, so the
  // rank's DMA engines and HBM share bound it.
  const double dma = inst.core_dma_gbps();
  return {"on-chip", kCollectiveStepNs, dma, dma, dma, dma, inst.chip->hbm_gbps / k};
}

Level neuron_link(const InstanceSpec& inst, const Layout& g, int k) {
  // Rings: each ring leaves a chip once per step, whichever of its k ranks sends, so the
  // chip's ring links carry one chunk per ring per step. Partners and Mesh writes share the
  // chip's links among its k ranks. The slowest instance of the group sets the pace.
  const double b = neuronlink_direction_gbps(inst);
  int rings = neuronlinks_per_chip(inst);
  double hops = 1;
  for (const auto& chips : g.chips) {
    rings = std::min(rings, ring_count(inst, chips));
    hops = std::max(hops, mean_neuronlink_hops(inst, chips));
  }
  // Mesh: the chip's k ranks all write off the chip at once over the links into the group,
  // each byte crossing the mean number of links of a routed path.
  return {"NeuronLink",
          kCollectiveStepNs,
          rings * b,
          b / k,
          rings * b / (k * hops),
          inst.core_dma_gbps(),
          inst.chip->hbm_gbps / k,
          k > 1 ? 2 : 1};
}

// Between `x` instances of one UltraServer: same-coordinate chips in a ring of instances.
Level ultraserver(const InstanceSpec& inst, int x, int k) {
  const double b = ultraserver_link_direction_gbps(inst);
  const int rings = x > 2 ? 2 : 1;  // the ring of instances, both ways, once it is a cycle
  const double hops = x > 2 ? 4.0 / 3.0 : 1.0;  // mean distance on a ring of 3 or 4
  return {"UltraServer NeuronLink", kCollectiveStepNs, rings * b / k, b / k,
          b * rings / (k * hops), inst.core_dma_gbps(), inst.chip->hbm_gbps / k};
}

// `senders` of the group's ranks on one instance use its network at once, `k` of them on one
// chip. Each Trainium2 chip has its own 200 Gbps EFA interface, 3.2 Tbps per trn2.48xlarge, so
// "each rank gets 3.2 Tbps / 64" at LNC=2 (neuron-runtime/about/collectives.rst): a rank gets
// at most its chip's share of the instance's network, shared with the chip's other ranks.
// Assumption: Trainium1 instances split their network over their chips the same way.
Level network(const InstanceSpec& inst, int k, int senders) {
  const double wire =
      std::min(inst.network_gbps / senders, inst.network_gbps / inst.chips / k);
  return {inst.efa ? "EFA" : "network", kCollectiveEfaStepNs, wire, wire, wire,
          inst.core_dma_gbps(), inst.chip->hbm_gbps / k};
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

const char* collective_algorithms_name(CollectiveAlgorithms algorithms) {
  return algorithms == CollectiveAlgorithms::Neuron2_18 ? "neuron-2.18" : "current";
}

CollectiveAlgorithms collective_algorithms_named(const std::string& name) {
  for (auto a : {CollectiveAlgorithms::Current, CollectiveAlgorithms::Neuron2_18}) {
    if (name == collective_algorithms_name(a)) return a;
  }
  throw Error("unknown collective algorithms '" + name +
              "'; expected current or neuron-2.18 (the Neuron release whose runtime's "
              "collective algorithms to model)");
}

CollectiveCost collective_cost(const InstanceSpec& instance, Collective op, uint64_t bytes,
                               const std::vector<RankPlace>& ranks,
                               CollectiveAlgorithms algorithms) {
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
  const Level intra = g.crosses_chips ? neuron_link(instance, g, k) : on_chip(instance, k);
  // Instances of one UltraServer are joined by NeuronLink (Note [NeuronLink topology]).
  const int us = instance.ultraserver_instances;
  const bool one_ultraserver =
      us > 1 && x <= us &&
      std::all_of(g.node_ids.begin(), g.node_ids.end(),
                  [&](int n) { return n / us == g.node_ids.front() / us; });
  const bool all_to_all_group = trn1_all_to_all_group(instance, ranks);
  std::vector<Stage> stages;
  int inter = -1;  // index of the stage between instances, when hierarchical
  Level all = intra, one = intra;
  if (x == 1) {
    stages.push_back(allowed(flat_stage(op, intra, p, 1.0), op, algorithms, all_to_all_group));
  } else {
    // Between instances (Neuron docs, "Inter-node Collective Communications"): stages within
    // each instance and between instances, each with its own step latency and bandwidth.
    // Every rank of an instance uses the network at once in the symmetric ops; one per
    // instance in the rooted ones.
    all = one_ultraserver ? ultraserver(instance, x, k) : network(instance, k, y);
    one = one_ultraserver ? ultraserver(instance, x, 1) : network(instance, k, 1);
    auto add = [&](Collective o, const Level& l, int n, double scale, bool between) {
      if (between) inter = static_cast<int>(stages.size());
      stages.push_back(allowed(flat_stage(o, l, n, scale), o, algorithms, false));
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
        // stay inside; every step may leave the instance, so every step pays its latency.
        const double off = double(p - y) / p, on = double(y - 1) / p;
        inter = 0;
        stages.push_back({algorithm("pairwise exchange", all, p - 1, 1.0,
                                    {{off, all.move(all.pair_gbps)},
                                     {on, intra.move(intra.pair_gbps)}})});
        break;
      }
      case Collective::SendRecv:
      case Collective::Barrier:
        inter = 0;
        stages.push_back(flat_stage(op, all, p, 1.0));
        break;
    }
  }

  const double size = static_cast<double>(bytes);
  out.duration_ns = out.latency_ns = kCollectiveFixedNs;
  double best_ns_per_byte = 0;  // of the bandwidth-optimal algorithms: sets the busbw ceiling
  for (size_t i = 0; i < stages.size(); ++i) {
    const Algorithm& a = cheapest(stages[i], size);
    out.duration_ns += a.cost.at(size);
    out.latency_ns += a.cost.latency_ns;
    out.steps += a.cost.steps;
    out.dma_bytes += a.cost.sent_per_byte * size;
    double least = a.cost.ns_per_byte;
    for (const Algorithm& c : stages[i]) least = std::min(least, c.cost.ns_per_byte);
    best_ns_per_byte += least;
    if (stages.size() == 1 && x == 1) out.algorithm = a.name;
    if (static_cast<int>(i) == inter) {
      out.algorithm = y > 1 && stages.size() > 1 ? std::string("hierarchical ") + a.name : a.name;
    }
  }
  out.dma_ns = out.dma_bytes / instance.core_dma_gbps();
  out.link = x > 1 ? all.name : intra.name;
  if (op == Collective::Barrier || best_ns_per_byte == 0) return out;  // moves no data
  const double factor = bus_factor(op, p);
  out.link_gbps = factor / best_ns_per_byte;
  out.algbw_gbps = size / out.duration_ns;
  out.busbw_gbps = out.algbw_gbps * factor;
  return out;
}

}  // namespace trnsim
