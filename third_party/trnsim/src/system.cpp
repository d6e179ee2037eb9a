#include "trnsim/system.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "trnsim/error.h"

namespace trnsim {

System::System(const InstanceSpec& instance, std::vector<int> visible_cores)
    : instance_(instance) {
  for (size_t i = 0; i < visible_cores.size(); ++i) {
    devices_.push_back(std::make_unique<Device>(static_cast<int>(i), visible_cores[i], instance));
  }
}

std::unique_ptr<System> System::from_environment() {
  const char* name = std::getenv("TORCH_NEURON_INSTANCE");
  const InstanceSpec& instance =
      find_instance(name && *name ? std::string_view(name) : kDefaultInstance);
  std::vector<int> cores;
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  if (visible && *visible) {
    cores = parse_visible_cores(visible, instance.core_count());
  } else {
    for (int c = 0; c < instance.core_count(); ++c) cores.push_back(c);
  }
  return std::make_unique<System>(instance, cores);
}

Device& System::device(int index) {
  check_index(index);
  return *devices_[index];
}

void System::check_index(int index) const {
  if (index < 0 || index >= device_count()) {
    throw Error("invalid device neuron:" + std::to_string(index) + "; this " + instance_.name +
                " process sees " + std::to_string(device_count()) + " NeuronCore(s), valid " +
                "indices are 0.." + std::to_string(device_count() - 1));
  }
}

std::optional<int> System::device_of(const void* ptr) const {
  for (const auto& d : devices_) {
    if (d->hbm_reserved() && d->hbm().contains(ptr)) return d->index();
  }
  return std::nullopt;
}

bool System::same_chip(int a, int b) const {
  check_index(a);
  check_index(b);
  return devices_[a]->chip() == devices_[b]->chip();
}

std::vector<int> parse_visible_cores(const std::string& value, int core_count) {
  const std::string usage = "NEURON_RT_VISIBLE_CORES='" + value +
                            "' is not valid; use a core id, a range or a list such as '0', "
                            "'0-3' or '0,2-3' with ids in 0.." + std::to_string(core_count - 1);
  std::vector<int> cores;
  std::stringstream items(value);
  std::string item;
  while (std::getline(items, item, ',')) {
    int first = 0, last = 0;
    char dash = 0, extra = 0;
    std::stringstream s(item);
    if (!(s >> first)) throw Error(usage);
    if (s >> dash) {
      if (dash != '-' || !(s >> last) || (s >> extra)) throw Error(usage);
    } else {
      last = first;
    }
    if (first < 0 || last >= core_count || first > last) throw Error(usage);
    for (int c = first; c <= last; ++c) {
      if (std::find(cores.begin(), cores.end(), c) != cores.end()) throw Error(usage);
      cores.push_back(c);
    }
  }
  if (cores.empty()) throw Error(usage);
  return cores;
}

}  // namespace trnsim
