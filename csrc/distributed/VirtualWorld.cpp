#include "distributed/VirtualWorld.h"

#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <sstream>

#include "runtime/Runtime.h"
#include "runtime/Settings.h"

namespace torch_neuron {
namespace {

std::vector<int> parse_ranks(const std::string& text, int world_size) {
  std::vector<int> ranks;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int rank = -1;
    try {
      rank = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TORCH_CHECK(used == item.size() && rank >= 0 && rank < world_size,
                settings::invalid_value("TORCH_NEURON_VIRTUAL_RANKS", text,
                                        c10::str("'", item, "' is not a rank of the ",
                                                 world_size, " ranks of WORLD_SIZE")));
    ranks.push_back(rank);
  }
  TORCH_CHECK(!ranks.empty(), settings::invalid_value("TORCH_NEURON_VIRTUAL_RANKS", text,
                                                      "it names no rank"));
  return ranks;
}

std::unique_ptr<VirtualWorld> read_world() {
  const std::string ranks = settings::read_text("TORCH_NEURON_VIRTUAL_RANKS");
  if (ranks.empty()) return nullptr;
  const auto size = settings::read_int("WORLD_SIZE");
  const auto per_node = settings::read_int("LOCAL_WORLD_SIZE");
  TORCH_CHECK(size && per_node && *size >= 1 && *per_node >= 1,
              "a virtual world (TORCH_NEURON_VIRTUAL_RANKS) needs WORLD_SIZE and "
              "LOCAL_WORLD_SIZE; start it with python -m torch_neuron run --virtual");
  auto world = std::make_unique<VirtualWorld>();
  world->size = static_cast<int>(*size);
  world->running.assign(world->size, false);
  for (int r : parse_ranks(ranks, world->size)) world->running[r] = true;
  world->places = torchrun_places(system().instance(), world->size, static_cast<int>(*per_node));
  return world;
}

}  // namespace

const VirtualWorld* virtual_world() {
  // Read once: a process belongs to one job.
  static std::once_flag once;
  static std::unique_ptr<VirtualWorld> world;
  std::call_once(once, [] { world = read_world(); });
  return world.get();
}

std::vector<trnsim::RankPlace> torchrun_places(const trnsim::InstanceSpec& instance, int ranks,
                                               int ranks_per_node) {
  if (ranks_per_node == 0) ranks_per_node = instance.core_count();
  TORCH_CHECK_VALUE(ranks >= 1 && ranks_per_node >= 1 && ranks_per_node <= instance.core_count(),
                    "rank placement needs ranks >= 1 and 1 <= ranks_per_node <= ",
                    instance.core_count(), " (the NeuronCores of ", instance.name,
                    "); got ranks=", ranks, ", ranks_per_node=", ranks_per_node,
                    ". Choose a larger instance or fewer ranks per node");
  std::vector<trnsim::RankPlace> places;
  places.reserve(ranks);
  for (int r = 0; r < ranks; ++r) {
    places.push_back({r / ranks_per_node, (r % ranks_per_node) / instance.logical_cores_per_chip});
  }
  return places;
}

}  // namespace torch_neuron
