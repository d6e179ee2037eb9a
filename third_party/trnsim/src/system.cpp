#include "trnsim/system.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trnsim/error.h"

namespace trnsim {

System::System(const InstanceSpec& instance, std::vector<int> visible_cores)
    : instance_(instance) {
  // Devices refer to this System's copy of the spec, which may differ from the table entry
  // (NEURON_LOGICAL_NC_CONFIG).
  for (size_t i = 0; i < visible_cores.size(); ++i) {
    devices_.push_back(std::make_unique<Device>(static_cast<int>(i), visible_cores[i], instance_));
  }
}

std::unique_ptr<System> System::create(const SystemConfig& config) {
  InstanceSpec instance =
      find_instance(config.instance.empty() ? kDefaultInstance : std::string_view(config.instance));
  if (!config.logical_nc_config.empty()) {
    instance = with_logical_nc_config(instance, config.logical_nc_config);
  }
  std::vector<int> cores;
  // The Neuron runtime gives NEURON_RT_VISIBLE_CORES precedence over NEURON_RT_NUM_CORES
  // (neuron-runtime/guides/configuration-guide.rst, "Notes").
  if (!config.visible_cores.empty()) {
    cores = parse_visible_cores(config.visible_cores, instance.core_count());
  } else {
    const int count =
        config.num_cores.empty() ? 0 : parse_num_cores(config.num_cores, instance.core_count());
    // 0 means all cores. The runtime reserves the first free cores; no other process shares
    // a simulated instance, so those are cores 0..count-1.
    for (int c = 0; c < (count ? count : instance.core_count()); ++c) cores.push_back(c);
  }
  return std::make_unique<System>(instance, cores);
}

void System::arm_fault(const std::string& spec) {
  // "<kind>:<device>:<launch>", e.g. "hbm_ue:1:500": the 500th launch on neuron:1 fails.
  const auto first = spec.find(':');
  const auto second = first == std::string::npos ? first : spec.find(':', first + 1);
  const auto bad = [&](const std::string& why) {
    return Error("fault '" + spec + "': " + why +
                 "; expected <kind>:<device>:<launch>, e.g. hbm_ue:1:500 (kinds: hbm_ue, "
                 "timeout, lost; the launch counts from 1)");
  };
  if (second == std::string::npos) throw bad("not three fields");
  FaultKind kind;
  try {
    kind = parse_fault_kind(spec.substr(0, first));
  } catch (const Error& e) {
    throw bad(e.what());
  }
  int index = -1;
  long long launch = 0;
  try {
    size_t used = 0;
    const std::string device_text = spec.substr(first + 1, second - first - 1);
    index = std::stoi(device_text, &used);
    if (used != device_text.size()) throw std::invalid_argument("device");
    const std::string launch_text = spec.substr(second + 1);
    launch = std::stoll(launch_text, &used);
    if (used != launch_text.size()) throw std::invalid_argument("launch");
  } catch (const std::exception&) {
    throw bad("the device and the launch must be integers");
  }
  if (index < 0 || index >= device_count()) {
    throw bad("there is no device " + std::to_string(index) + " (" +
              std::to_string(device_count()) + " visible)");
  }
  if (launch < 1) throw bad("the launch must be >= 1");
  devices_[index]->health().arm(kind, static_cast<uint64_t>(launch));
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

int parse_num_cores(const std::string& value, int core_count) {
  int count = -1;
  char extra = 0;
  std::stringstream s(value);
  if (!(s >> count) || (s >> extra) || count < 0 || count > core_count) {
    throw Error("NEURON_RT_NUM_CORES='" + value + "' is not valid; use a number of NeuronCores " +
                "from 1 to " + std::to_string(core_count) + ", or 0 for all of them");
  }
  return count;
}

InstanceSpec with_logical_nc_config(const InstanceSpec& instance, const std::string& value) {
  // LNC groups physical NeuronCores into one logical core (one device). Trainium2 supports 1
  // and 2 (default 2); Trainium1 has no grouping, so only 1 describes it
  // (about-neuron/arch/neuron-features/logical-neuroncore-config.rst).
  const int physical = instance.chip->physical_cores;
  const int default_lnc = instance.physical_cores_per_logical();
  const std::string allowed = default_lnc == 1 ? "1" : "1 or " + std::to_string(default_lnc);
  int lnc = 0;
  char extra = 0;
  std::stringstream s(value);
  if (!(s >> lnc) || (s >> extra) || lnc < 1 || lnc > default_lnc || physical % lnc != 0) {
    throw Error("NEURON_LOGICAL_NC_CONFIG='" + value + "' is not valid for " + instance.name +
                " (" + instance.chip->name + "); use " + allowed + " or unset it");
  }
  InstanceSpec spec = instance;
  spec.logical_cores_per_chip = physical / lnc;
  return spec;
}

}  // namespace trnsim
