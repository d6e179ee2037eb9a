// Note [Virtual world]
// `python -m torch_neuron run --virtual --nnodes N --nproc-per-node M --run-ranks LIST` runs a
// job of N*M ranks with only the ranks of LIST as processes, all in predict-only mode; the
// others are virtual. Each running rank sees the whole world (WORLD_SIZE = N*M, its RANK as
// torchrun would give it) and the groups it creates have their full size; a group's Gloo group
// holds only its running members. A collective over a group with virtual members is timed by
// the collective model for the whole group, on the cores where torchrun would place them;
// it starts when the group's running members arrive (they agree on the time as in a real job):
// virtual ranks are assumed to arrive when the running ones do, as they would in an SPMD job
// whose ranks do equal work. CPU tensors in such a group follow the same assumption: every
// virtual rank holds what this rank holds (SpmdCpuBackend.h). A point-to-point op with a virtual
// peer is timed as a transfer on the link between the two cores, starting when this rank
// arrives. What it cannot capture: ranks that do unequal work (load imbalance, stragglers,
// data-dependent control flow), values that differ between ranks.
#pragma once

#include <trnsim/collective.h>
#include <trnsim/instance.h>

#include <vector>

namespace torch_neuron {

struct VirtualWorld {
  int size = 0;                           // WORLD_SIZE
  std::vector<bool> running;              // per global rank: runs as a process
  std::vector<trnsim::RankPlace> places;  // per global rank
};

// The process's virtual world (TORCH_NEURON_VIRTUAL_RANKS, WORLD_SIZE, LOCAL_WORLD_SIZE), or
// null in a job whose every rank is a process. Raises for settings that do not describe one.
const VirtualWorld* virtual_world();

// Where `ranks` ranks sit when torchrun starts `ranks_per_node` per instance (0: every
// NeuronCore of one instance): rank r on instance r / ranks_per_node, on the chip of device
// r % ranks_per_node. Raises for counts the instance cannot hold.
std::vector<trnsim::RankPlace> torchrun_places(const trnsim::InstanceSpec& instance, int ranks,
                                               int ranks_per_node);

}  // namespace torch_neuron
