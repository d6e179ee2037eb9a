#include "trnsim/cost.h"

namespace trnsim {

double streaming_duration_ns(const InstanceSpec& instance, uint64_t bytes) {
  // GB/s is bytes per ns.
  return kLaunchOverheadNs + static_cast<double>(bytes) / instance.core_hbm_gbps();
}

}  // namespace trnsim
