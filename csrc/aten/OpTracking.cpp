#include "aten/OpTracking.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace torch_neuron {
namespace {

struct Counters {
  std::mutex mutex;
  std::map<std::string, int64_t> executed, fallback;
};

Counters& counters() {
  static auto* c = new Counters();  // never destroyed: ops may run during shutdown
  return *c;
}

bool fallback_error_from_env() {
  const char* mode = std::getenv("TORCH_NEURON_FALLBACK");
  return mode != nullptr && std::strcmp(mode, "error") == 0;
}

std::atomic<bool> fallback_error{fallback_error_from_env()};

}  // namespace

void count_executed_op(const std::string& name) {
  std::lock_guard<std::mutex> lock(counters().mutex);
  ++counters().executed[name];
}

void count_fallback_op(const std::string& name) {
  std::lock_guard<std::mutex> lock(counters().mutex);
  ++counters().fallback[name];
  ++counters().executed[name];
}

std::map<std::string, int64_t> executed_ops() {
  std::lock_guard<std::mutex> lock(counters().mutex);
  return counters().executed;
}

std::map<std::string, int64_t> fallback_ops() {
  std::lock_guard<std::mutex> lock(counters().mutex);
  return counters().fallback;
}

void clear_op_tracking() {
  std::lock_guard<std::mutex> lock(counters().mutex);
  counters().executed.clear();
  counters().fallback.clear();
}

void set_fallback_error(bool on) { fallback_error = on; }
bool fallback_is_error() { return fallback_error; }

}  // namespace torch_neuron
