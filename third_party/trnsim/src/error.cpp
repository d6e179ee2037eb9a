#include "trnsim/error.h"

#include <cstdio>

namespace trnsim {

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[64];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%llu bytes", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  }
  return text;
}

static std::string oom_message(int device, uint64_t requested, uint64_t free, uint64_t capacity) {
  return "neuron:" + std::to_string(device) + " out of HBM: tried to allocate " +
         format_bytes(requested) + " (free: " + format_bytes(free) + " of " +
         format_bytes(capacity) + " capacity). Free tensors you no longer need, use smaller batches, or pick an "
         "instance with more HBM per core.";
}

OutOfMemory::OutOfMemory(int device, uint64_t requested, uint64_t free, uint64_t capacity)
    : Error(oom_message(device, requested, free, capacity)),
      device_(device),
      requested_(requested),
      free_(free),
      capacity_(capacity) {}

}  // namespace trnsim
