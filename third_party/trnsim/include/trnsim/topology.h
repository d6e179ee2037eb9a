// The NeuronLink topology of an instance: which chips are linked, and what one link carries.
//
// Note [NeuronLink topology]
// The docs give NeuronLink bandwidth per chip; a collective's ring runs over individual links,
// so the model works per link:
//   - Trainium1 and Trainium2 chips each have 4 NeuronLinks (NKI architecture guides,
//     nki/guides/architecture/trainium_inferentia2_arch.rst: "4 (Trainium) NeuronLink-v2";
//     trainium2_arch.rst: "4 NeuronLink-v3"), and the 16 chips of a trn1.32xlarge or
//     trn2.48xlarge form a 2-D torus (Trn1 and Trn2 architecture pages) in which "each chip is
//     connected to 4 neighbors with a NeuronLink" (neuron-runtime/about/collectives.rst). The
//     only 2-D torus of 16 chips with 4 distinct neighbours each is 4 x 4 (also the intra-node
//     collectives doc's "4D hyper-cube" view of it). Assumption: chip c sits at
//     (c % 4, c / 4).
//   - A Trn2 UltraServer links four trn2u.48xlarge instances: chips with the same coordinates
//     form a ring across the instances (Trn2 architecture page), a third torus dimension with
//     "connections on the Z dimensions to 2 neighbors with a bidirectional NeuronLink between
//     each pair" (collectives.rst).
//   - One link's bandwidth is the chip's figure over its links: 384 / 4 = 96 GB/s on
//     Trainium1 (Trn1 page: NeuronLink-v2 384 GB/s per device), 1,024 / 4 = 256 GB/s within a
//     Trn2 instance and 256 / 2 = 128 GB/s between the instances of an UltraServer (Trn2 page:
//     intra- and inter-instance NeuronLink-v3 GB/s per chip). Assumption (the docs do not say):
//     the per-chip figure counts both directions of each link, as device-to-device bandwidth is
//     quoted for NVLink, so one direction of one link carries half of that.
#pragma once

#include <vector>

#include "trnsim/instance.h"

namespace trnsim {

// Links of the shortest NeuronLink path between chips `a` and `b` of one instance (0 for the
// same chip). Throws trnsim::Error for a chip outside the instance.
int neuronlink_hops(const InstanceSpec& instance, int a, int b);

// NeuronLinks from one chip to the other chips of its instance (4 in a 4 x 4 torus, 0 for a
// single-chip instance).
int neuronlinks_per_chip(const InstanceSpec& instance);

// GB/s one direction of one NeuronLink carries within an instance, and between the instances
// of an UltraServer (0 where there is none).
double neuronlink_direction_gbps(const InstanceSpec& instance);
double ultraserver_link_direction_gbps(const InstanceSpec& instance);

// Link-disjoint directed rings a ring collective can run at once over `chips` (distinct chips
// of one instance) on direct links between them: the fewest of the other chips in the set any
// one of them is linked to (a ring enters and leaves a chip on a link each, so a chip with d
// links into the set carries at most d rings counting both directions; the torus reaches that:
// 2 Hamiltonian cycles of the 16 chips, each run both ways, as the intra-node collectives doc
// says). At least 1: chips with no direct link talk over routed paths.
int ring_count(const InstanceSpec& instance, const std::vector<int>& chips);

// Mean links a byte crosses between two distinct chips of `chips` (1 for fewer than 2 chips).
double mean_neuronlink_hops(const InstanceSpec& instance, const std::vector<int>& chips);

}  // namespace trnsim
