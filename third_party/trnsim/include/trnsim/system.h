// The simulated machine: an instance type and the NeuronCores a process may see.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trnsim/device.h"
#include "trnsim/instance.h"

namespace trnsim {

// How a program configures its simulated machine, in the Neuron runtime's own terms and syntax
// (neuron-runtime/nrt-configurable-parameters.rst). trnsim reads no environment: the framework
// on top passes these in. An empty field keeps the default.
struct SystemConfig {
  std::string instance;           // instance type ("trn1.32xlarge"); default kDefaultInstance
  std::string logical_nc_config;  // as NEURON_LOGICAL_NC_CONFIG: physical cores per device
  std::string visible_cores;      // as NEURON_RT_VISIBLE_CORES: "2", "0-3", "0,2-3"
  std::string num_cores;          // as NEURON_RT_NUM_CORES: the first N cores, "0" for all
};

class System {
 public:
  // `visible_cores` lists NeuronCore ids of the instance; device i is visible_cores[i].
  System(const InstanceSpec& instance, std::vector<int> visible_cores);
  // Devices refer to instance_, so a System stays where it was built.
  System(const System&) = delete;
  System& operator=(const System&) = delete;

  // The machine `config` describes. As the Neuron runtime does, visible_cores wins over
  // num_cores when both are set. Throws trnsim::Error naming the bad field's runtime variable.
  static std::unique_ptr<System> create(const SystemConfig& config);

  const InstanceSpec& instance() const { return instance_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  // Throws trnsim::Error naming the valid range.
  Device& device(int index);
  // The device whose HBM holds `ptr`, or nullopt for host memory.
  std::optional<int> device_of(const void* ptr) const;
  // Whether devices a and b sit on the same chip (device-to-device copies stay off NeuronLink).
  bool same_chip(int a, int b) const;
  // Arms a simulated fault given as "<kind>:<device>:<launch>" ("hbm_ue:1:500": the 500th
  // launch on device 1 fails); throws trnsim::Error saying what is wrong with the spec.
  void arm_fault(const std::string& spec);

 private:
  void check_index(int index) const;  // throws trnsim::Error naming the valid range

  const InstanceSpec instance_;  // a copy: logical_nc_config may change the table's
  std::vector<std::unique_ptr<Device>> devices_;
};

// Parses a NEURON_RT_VISIBLE_CORES value against an instance with `core_count` cores.
std::vector<int> parse_visible_cores(const std::string& value, int core_count);
// Parses a NEURON_RT_NUM_CORES value: 0 (all) to core_count.
int parse_num_cores(const std::string& value, int core_count);
// `instance` with NEURON_LOGICAL_NC_CONFIG=`value` physical cores per logical core (device).
InstanceSpec with_logical_nc_config(const InstanceSpec& instance, const std::string& value);

}  // namespace trnsim
