#include "aten/OpTracking.h"

#include "runtime/Settings.h"

#include <c10/util/Exception.h>

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

// -1: not read yet; then 0 or 1.
std::atomic<int> fallback_error{-1};

}  // namespace

OpCounter& op_counter(const std::string& name) {
  std::lock_guard<std::mutex> lock(counters().mutex);
  auto& slot = counters().by_name[name];
  if (!slot) slot = std::make_unique<OpCounter>();
  return *slot;
}

std::map<std::string, int64_t> executed_ops() { return snapshot(&OpCounter::executed); }
std::map<std::string, int64_t> fallback_ops() { return snapshot(&OpCounter::fallback); }

void reset_op_counts() {
  std::lock_guard<std::mutex> lock(counters().mutex);
  for (auto& [name, counter] : counters().by_name) {
    counter->executed = 0;
    counter->fallback = 0;
  }
}

void set_fallback_raises(bool on) {
  settings::set_from_api("TORCH_NEURON_FALLBACK", on ? "error" : "allow");
  fallback_error = on ? 1 : 0;
}
bool fallback_is_error() {
  // Read when first needed (not at the library's load), so that a bad value raises an error
  // naming the variable instead of being ignored.
  if (fallback_error < 0) {
    fallback_error = settings::read_text("TORCH_NEURON_FALLBACK") == "error" ? 1 : 0;
  }
  return fallback_error == 1;
}

}  // namespace torch_neuron
