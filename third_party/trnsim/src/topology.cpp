#include "trnsim/topology.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "trnsim/error.h"

namespace trnsim {
namespace {

void check_chip(const InstanceSpec& instance, int chip) {
  if (chip < 0 || chip >= instance.chips) {
    throw Error("chip " + std::to_string(chip) + " is not on " + instance.name +
                ", whose chips are 0.." + std::to_string(instance.chips - 1));
  }
}

// Steps between two coordinates on a ring of n.
int ring_distance(int a, int b, int n) {
  const int d = std::abs(a - b) % n;
  return std::min(d, n - d);
}

}  // namespace

int neuronlink_hops(const InstanceSpec& instance, int a, int b) {
  check_chip(instance, a);
  check_chip(instance, b);
  if (a == b || instance.torus_x == 0) return 0;
  const int x = instance.torus_x, y = instance.torus_y;
  return ring_distance(a % x, b % x, x) + ring_distance(a / x, b / x, y);
}

int neuronlinks_per_chip(const InstanceSpec& instance) {
  return instance.torus_x == 0 ? 0 : instance.chip->neuronlinks;
}

double neuronlink_direction_gbps(const InstanceSpec& instance) {
  if (neuronlinks_per_chip(instance) == 0) return 0;
  return instance.chip->link_gbps / instance.chip->neuronlinks / 2;
}

double ultraserver_link_direction_gbps(const InstanceSpec& instance) {
  if (instance.ultraserver_instances <= 1) return 0;
  // Two neighbours on the ring of instances (one when there are only two instances: the
  // docs' figure is for the four-instance ring).
  return instance.ultraserver_link_gbps / 2 / 2;
}

int ring_count(const InstanceSpec& instance, const std::vector<int>& chips) {
  if (chips.size() < 2) return 1;
  int fewest = neuronlinks_per_chip(instance);
  for (int a : chips) {
    int linked = 0;
    for (int b : chips) linked += neuronlink_hops(instance, a, b) == 1;
    fewest = std::min(fewest, linked);
  }
  return std::max(fewest, 1);
}

double mean_neuronlink_hops(const InstanceSpec& instance, const std::vector<int>& chips) {
  double hops = 0;
  int pairs = 0;
  for (int a : chips) {
    for (int b : chips) {
      if (a == b) continue;
      hops += neuronlink_hops(instance, a, b);
      ++pairs;
    }
  }
  return pairs == 0 ? 1.0 : hops / pairs;
}

}  // namespace trnsim
