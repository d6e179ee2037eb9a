// torch_neuron's C++ API for libtorch programs.
//
// Linking libtorch_neuron registers the "neuron" device with PyTorch, so after that
//   torch::Tensor x = torch::randn({4, 4}).to(torch::Device("neuron:0"));
// works. Call torch_neuron::init() once at startup: it makes the dependency on the library
// explicit (so the linker keeps it) and reports a bad TORCH_NEURON_INSTANCE early.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_neuron {

// Checks the environment and returns the number of visible neuron devices.
int init();
int device_count();
// Name of the simulated instance type ("trn2.3xlarge").
std::string instance_name();
// Waits for all work on `device` (-1: current device). Returns the device's simulated clock in
// nanoseconds: when all work queued on it so far would have finished on Trainium.
double synchronize(int device = -1);

// Op tracking: counts by operator name ("aten::add.Tensor").
std::map<std::string, int64_t> get_executed_ops();
std::map<std::string, int64_t> get_fallback_ops();
void clear_op_tracking();
void set_fallback_error(bool on);

}  // namespace torch_neuron
