#include "aten/OpTracking.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace torch_neuron {
namespace {

struct Counters {
  std::mutex mutex;  // guards the map, not the counts
  std::map<std::string, std::unique_ptr<OpCounter>> by_name;
};

Counters& counters() {
  static auto* c = new Counters();  // never destroyed: ops may run during shutdown
  return *c;
}

std::map<std::string, int64_t> snapshot(std::atomic<int64_t> OpCounter::*field) {
  std::lock_guard<std::mutex> lock(counters().mutex);
  std::map<std::string, int64_t> out;
  for (const auto& [name, counter] : counters().by_name) {
    const int64_t n = ((*counter).*field).load();
    if (n > 0) out[name] = n;
  }
  return out;
}

// Read when first needed (not at the library's load), so that a bad value raises an error
// naming the variable instead of being ignored.
bool fallback_error_from_env() {
  const char* mode = std::getenv("TORCH_NEURON_FALLBACK");
  if (mode == nullptr || *mode == '\0') return false;
  TORCH_CHECK(std::strcmp(mode, "error") == 0, "TORCH_NEURON_FALLBACK='", mode,
              "' is not a valid value; set it to 'error' (CPU fallbacks raise) or unset it");
  return true;
}

// -1: not read yet; then 0 or 1.
std::atomic<int> fallback_error{-1};

}  // namespace

OpCounter& op_counter(const std::string& name) {
  std::lock_guard<std::mutex> lock(counters().mutex);
  auto& slot = counters().by_name[name];
  if (!slot) slot = std::make_unique<OpCounter>();
  return *slot;
}

void count_executed_op(const std::string& name) { ++op_counter(name).executed; }

void count_fallback_op(const std::string& name) {
  auto& counter = op_counter(name);
  ++counter.fallback;
  ++counter.executed;
}

std::map<std::string, int64_t> executed_ops() { return snapshot(&OpCounter::executed); }
std::map<std::string, int64_t> fallback_ops() { return snapshot(&OpCounter::fallback); }

void clear_op_tracking() {
  std::lock_guard<std::mutex> lock(counters().mutex);
  for (auto& [name, counter] : counters().by_name) {
    counter->executed = 0;
    counter->fallback = 0;
  }
}

void set_fallback_error(bool on) { fallback_error = on ? 1 : 0; }
bool fallback_is_error() {
  if (fallback_error < 0) fallback_error = fallback_error_from_env() ? 1 : 0;
  return fallback_error == 1;
}

}  // namespace torch_neuron
