// What a copy costs on the simulated clock. Host <-> device goes over the host link; device <->
// device goes through the DMA engines, over HBM on one chip or NeuronLink between chips.
#pragma once

#include <cstdint>

#include "trnsim/instance.h"

namespace trnsim {

// Assumption (not in the Neuron docs): usable host link bandwidth of one Trainium device,
// PCIe Gen4 x16 class, GB/s.
constexpr double kHostLinkGBps = 25.0;
// Assumption: fixed cost of setting up one DMA transfer (descriptor write and completion), ns.
constexpr double kDmaSetupNs = 2000.0;

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDeviceSameChip, DeviceToDeviceCrossChip };

// Simulated duration of moving `bytes` on `instance` (ns). Zero bytes cost nothing.
double copy_duration_ns(const InstanceSpec& instance, CopyKind kind, uint64_t bytes);

}  // namespace trnsim
