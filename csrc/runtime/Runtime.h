// Access to the simulated machine (trnsim::System) and the current device of each thread.
#pragma once

#include <c10/core/Device.h>

#include <trnsim/system.h>

namespace torch_neuron {

// The neuron device is PyTorch's PrivateUse1 device type, renamed to "neuron".
constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;

// The simulated instance, created on first use from TORCH_NEURON_INSTANCE and
// NEURON_RT_VISIBLE_CORES. Throws c10::Error when those variables are invalid.
trnsim::System& system();

c10::DeviceIndex visible_device_count();
// For interfaces that must not throw: 0 when the environment is invalid.
c10::DeviceIndex device_count_or_zero() noexcept;

// True in a child forked after the parent used a neuron device. The child shares the parent's
// simulated HBM copy-on-write and its runtime state is not its own, so, as with CUDA, device
// work there raises an error that says to use the 'spawn' start method.
bool in_bad_fork();

// Throws c10::Error naming the valid range when `index` is not a visible device.
void check_device_index(c10::DeviceIndex index);
// The simulated core behind `index` (checked, and refused in a bad fork).
trnsim::Device& device(c10::DeviceIndex index);

// The device a thread starts on: neuron:LOCAL_RANK in a process a launcher started for a rank
// (LOCAL_RANK set and naming a visible core), else neuron:0.
c10::DeviceIndex launch_device();
// The calling thread's current device (starts at launch_device()), as
// torch.neuron.current_device() sees it.
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// `index` if it is >= 0, else the current device.
c10::DeviceIndex resolve_device(c10::DeviceIndex index);

}  // namespace torch_neuron
