#include "trnsim/transfer.h"

#include <algorithm>

namespace trnsim {

double copy_duration_ns(const InstanceSpec& instance, CopyKind kind, uint64_t bytes) {
  if (bytes == 0) return 0.0;
  double gbps = 0;  // GB/s == bytes per ns
  switch (kind) {
    case CopyKind::HostToDevice:
    case CopyKind::DeviceToHost:
      gbps = kHostLinkGBps;
      break;
    case CopyKind::DeviceToDeviceSameChip:
      // A copy reads and writes HBM; the DMA engines of one logical core get their share of
      // the chip's DMA bandwidth, bounded by their share of HBM bandwidth for read + write.
      gbps = std::min(instance.chip->dma_gbps, instance.chip->hbm_gbps / 2) /
             instance.logical_cores_per_chip;
      break;
    case CopyKind::DeviceToDeviceCrossChip:
      // NeuronLink is a per-chip resource shared by its logical cores, and the data still
      // passes through HBM on both ends.
      gbps = std::min(instance.chip->link_gbps,
                      std::min(instance.chip->dma_gbps, instance.chip->hbm_gbps / 2)) /
             instance.logical_cores_per_chip;
      break;
  }
  return kDmaSetupNs + static_cast<double>(bytes) / gbps;
}

}  // namespace trnsim
