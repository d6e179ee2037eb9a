// The NeuronLink topology (topology.h) against the Neuron docs: 4 links per chip, a 4 x 4 torus
// of 16 chips on trn1.32xlarge and trn2.48xlarge, a ring of 4 instances in a Trn2 UltraServer,
// and per-link bandwidths derived from the per-chip figures (Note [NeuronLink topology]).
#include <gtest/gtest.h>

#include <vector>

#include "trnsim/error.h"
#include "trnsim/instance.h"
#include "trnsim/topology.h"

namespace trnsim {
namespace {

std::vector<int> chips(int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}

TEST(Topology, Trn1AndTrn2AreFourByFourTori) {
  for (const char* name : {"trn1.32xlarge", "trn2.48xlarge", "trn2u.48xlarge"}) {
    SCOPED_TRACE(name);
    const InstanceSpec& s = find_instance(name);
    EXPECT_EQ(neuronlinks_per_chip(s), 4);  // "each chip is connected to 4 neighbors"
    // Chip c at (c % 4, c / 4): neighbours along rows and columns, with wrap-around.
    EXPECT_EQ(neuronlink_hops(s, 0, 0), 0);
    EXPECT_EQ(neuronlink_hops(s, 0, 1), 1);
    EXPECT_EQ(neuronlink_hops(s, 0, 3), 1);   // row wrap
    EXPECT_EQ(neuronlink_hops(s, 0, 12), 1);  // column wrap
    EXPECT_EQ(neuronlink_hops(s, 0, 5), 2);
    EXPECT_EQ(neuronlink_hops(s, 0, 10), 4);  // the farthest chip
    for (int a = 0; a < 16; ++a) {
      int neighbours = 0;
      for (int b = 0; b < 16; ++b) {
        neighbours += neuronlink_hops(s, a, b) == 1;
        EXPECT_EQ(neuronlink_hops(s, a, b), neuronlink_hops(s, b, a));
      }
      EXPECT_EQ(neighbours, 4) << "chip " << a;
    }
    // Mean distance between distinct chips of a 4 x 4 torus: 2 x 1 x 16/15.
    EXPECT_NEAR(mean_neuronlink_hops(s, chips(16)), 32.0 / 15, 1e-12);
    EXPECT_THROW(neuronlink_hops(s, 0, 16), Error);
  }
}

TEST(Topology, SingleChipInstancesHaveNoNeuronLink) {
  for (const char* name : {"trn1.2xlarge", "trn2.3xlarge"}) {
    const InstanceSpec& s = find_instance(name);
    EXPECT_EQ(neuronlinks_per_chip(s), 0) << name;
    EXPECT_EQ(neuronlink_direction_gbps(s), 0.0) << name;
    EXPECT_EQ(ultraserver_link_direction_gbps(s), 0.0) << name;
  }
}

TEST(Topology, LinkBandwidthIsTheChipFigureOverItsLinks) {
  // Trn1 page: NeuronLink-v2 384 GB/s per device; Trn2 page: 1,024 GB/s per chip within an
  // instance and 256 GB/s between UltraServer instances; 4 torus links, 2 UltraServer links,
  // both directions counted in the per-chip figure.
  EXPECT_DOUBLE_EQ(neuronlink_direction_gbps(find_instance("trn1.32xlarge")), 48.0);
  EXPECT_DOUBLE_EQ(neuronlink_direction_gbps(find_instance("trn2.48xlarge")), 128.0);
  EXPECT_DOUBLE_EQ(ultraserver_link_direction_gbps(find_instance("trn2u.48xlarge")), 64.0);
  EXPECT_EQ(ultraserver_link_direction_gbps(find_instance("trn2.48xlarge")), 0.0);
  // The links out of a chip add back up to its figure.
  const InstanceSpec& t2 = find_instance("trn2.48xlarge");
  EXPECT_DOUBLE_EQ(neuronlink_direction_gbps(t2) * 2 * neuronlinks_per_chip(t2),
                   t2.chip->link_gbps);
}

TEST(Topology, RingsFollowTheLinksBetweenTheGroupsChips) {
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  // All 16 chips: 2 Hamiltonian cycles run both ways (intra-node collectives doc).
  EXPECT_EQ(ring_count(s, chips(16)), 4);
  // A row of the torus is a cycle; three chips of a row are a path (its ends have one link into
  // the group); two neighbours share one link; two chips with no link talk over a routed path.
  EXPECT_EQ(ring_count(s, chips(4)), 2);
  EXPECT_EQ(ring_count(s, chips(3)), 1);
  EXPECT_EQ(ring_count(s, {0, 1}), 1);
  EXPECT_EQ(ring_count(s, {0, 10}), 1);
  EXPECT_EQ(ring_count(s, {0}), 1);
  // A 2 x 2 block: each chip has 2 neighbours in it.
  EXPECT_EQ(ring_count(s, {0, 1, 4, 5}), 2);
}

TEST(Topology, Trn2UltraServerIsFourInstances) {
  const InstanceSpec& s = find_instance("trn2u.48xlarge");
  EXPECT_EQ(s.ultraserver_instances, 4);
  EXPECT_EQ(s.chips, 16);
  EXPECT_EQ(s.core_count(), 64);
  EXPECT_DOUBLE_EQ(s.ultraserver_link_gbps, 256.0);
}

}  // namespace
}  // namespace trnsim
