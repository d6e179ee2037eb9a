#include "runtime/Runtime.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <trnsim/error.h>

#include "runtime/Settings.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

// -1 until the thread first asks: it then starts at the process's launch device.
TORCH_NEURON_THREAD_LOCAL c10::DeviceIndex tls_current_device = -1;
std::atomic<bool> bad_fork{false};

void mark_child_as_bad_fork() { bad_fork = true; }

// The simulated machine the settings describe (Note [Settings table]): the instance and the
// Neuron runtime's core selection, then a fault to arm, if any.
std::unique_ptr<trnsim::System> system_from_settings() {
  trnsim::SystemConfig config;
  config.instance = settings::read_text("TORCH_NEURON_INSTANCE");
  const auto& table = trnsim::instance_table();
  TORCH_CHECK(std::any_of(table.begin(), table.end(),
                          [&](const auto& spec) { return spec.name == config.instance; }),
              "unknown Trainium instance type '", config.instance,
              "' (TORCH_NEURON_INSTANCE); valid names are: ", trnsim::instance_names());
  config.logical_nc_config = settings::read("NEURON_LOGICAL_NC_CONFIG").text;
  config.visible_cores = settings::read_text("NEURON_RT_VISIBLE_CORES");
  config.num_cores = settings::read("NEURON_RT_NUM_CORES").text;
  auto system = trnsim::System::create(config);
  const std::string fault = settings::read_text("TORCH_NEURON_INJECT_FAULT");
  if (!fault.empty()) {
    try {
      system->arm_fault(fault);
    } catch (const trnsim::Error& e) {
      throw trnsim::Error(std::string("TORCH_NEURON_INJECT_FAULT: ") + e.what());
    }
  }
  return system;
}

}  // namespace

trnsim::System& system() {
  // Created once; if the environment is invalid the error is raised on every use, so a user who
  // fixes nothing keeps getting the same clear message instead of a half-initialized runtime.
  // Deliberately never destroyed: tensors freed during shutdown still release into its HBM.
  static std::atomic<trnsim::System*> ready{nullptr};
  if (auto* s = ready.load(std::memory_order_acquire)) return *s;  // every call after the first
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    try {
      ready.store(system_from_settings().release(), std::memory_order_release);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  auto* s = ready.load(std::memory_order_acquire);
  TORCH_CHECK(s, error);
  return *s;
}

c10::DeviceIndex visible_device_count() { return static_cast<c10::DeviceIndex>(system().device_count()); }

c10::DeviceIndex device_count_or_zero() noexcept {
  try {
    return visible_device_count();
  } catch (...) {
    return 0;
  }
}

void check_device_index(c10::DeviceIndex index) {
  const auto count = visible_device_count();
  TORCH_CHECK(index >= 0 && index < count, "invalid device neuron:", static_cast<int>(index),
              ": the simulated ", system().instance().name, " has ", static_cast<int>(count),
              " visible NeuronCore(s), so valid devices are neuron:0..neuron:",
              static_cast<int>(count) - 1,
              " (set TORCH_NEURON_INSTANCE or NEURON_RT_VISIBLE_CORES to change them)");
}

bool in_bad_fork() { return bad_fork; }

trnsim::Device& device(c10::DeviceIndex index) {
  // Word for word CUDA's message with the device's name (tools match it); Python's
  // torch.neuron._lazy_init raises the same text.
  TORCH_CHECK(!bad_fork,
              "Cannot re-initialize neuron in forked subprocess. To use neuron with "
              "multiprocessing, you must use the 'spawn' start method");
  check_device_index(index);
  // The first real use of a device makes later forks unable to use it (see in_bad_fork).
  static std::atomic<bool> armed{false};
  if (!armed.load(std::memory_order_acquire)) {
    static std::once_flag fork_handler;
    std::call_once(fork_handler, [] { pthread_atfork(nullptr, nullptr, &mark_child_as_bad_fork); });
    armed.store(true, std::memory_order_release);
  }
  // (A device that hit a simulated fault is checked where work starts: launches, allocations,
  // synchronization. Not here: stream and guard queries reach this from noexcept code.)
  return system().device(index);
}

c10::DeviceIndex launch_device() {
  // A rank started by torchrun (or accelerate, which uses it) owns neuron:LOCAL_RANK, so that is
  // where its threads start, as Habana's HPU backend does. accelerate relies on it: for "neuron"
  // it takes the rank's device from current_device() instead of calling set_device. A LOCAL_RANK
  // that names no visible core leaves neuron:0 (the process group then reports the mismatch).
  static const c10::DeviceIndex index = [] {
    std::optional<int64_t> rank;
    try {
      rank = settings::read_int("LOCAL_RANK");
    } catch (const c10::Error&) {
      return c10::DeviceIndex{0};  // not a number: no core of ours
    }
    if (!rank || *rank < 0 || *rank >= device_count_or_zero()) return c10::DeviceIndex{0};
    return static_cast<c10::DeviceIndex>(*rank);
  }();
  return index;
}

c10::DeviceIndex current_device() {
  if (tls_current_device < 0) tls_current_device = launch_device();
  return tls_current_device;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  tls_current_device = index;
}

c10::DeviceIndex resolve_device(c10::DeviceIndex index) {
  if (index == -1) return current_device();
  // Other negative indices are not "the current device": torch.device("neuron", 200) wraps
  // to -56 in PyTorch's 8-bit device index, and must not land silently on neuron:0.
  check_device_index(index);
  return index;
}

}  // namespace torch_neuron
