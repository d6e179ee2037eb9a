#include "aten/KnownValues.h"

#include <ATen/core/ivalue.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "runtime/HostView.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

// Read by execution_enabled() in predict-only mode, per op: no __tls_get_addr call (Note
// [Per-op thread locals]).
TORCH_NEURON_THREAD_LOCAL bool computing = false;

std::mutex& known_mutex() {
  static std::mutex m;
  return m;
}

// storage -> its bytes when marked (a StorageImpl reused for other bytes is not known)
std::unordered_map<const c10::StorageImpl*, const void*>& known() {
  static std::unordered_map<const c10::StorageImpl*, const void*> map;
  return map;
}

}  // namespace

// Whether the map may hold anything: checked without the lock (may_know_values()).
std::atomic<bool> detail::any_known_values{false};

ComputeKnownValues::ComputeKnownValues() : previous_(computing) { computing = true; }
ComputeKnownValues::~ComputeKnownValues() { computing = previous_; }
bool computing_known_values() { return computing; }

void mark_values_known(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return;
  std::lock_guard<std::mutex> lock(known_mutex());
  known()[t.storage().unsafeGetStorageImpl()] = t.storage().data();
  detail::any_known_values.store(true, std::memory_order_relaxed);
}

bool values_known(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || !may_know_values()) {
    return false;
  }
  std::lock_guard<std::mutex> lock(known_mutex());
  const auto it = known().find(t.storage().unsafeGetStorageImpl());
  return it != known().end() && it->second == t.storage().data();
}

void forget_known_values() {
  if (!may_know_values()) return;
  std::lock_guard<std::mutex> lock(known_mutex());
  known().clear();
  detail::any_known_values.store(false, std::memory_order_relaxed);
}

bool small_and_known(c10::ArrayRef<c10::IValue> values) {
  uint64_t bytes = 0;
  bool any = false;
  auto check = [&](const at::Tensor& t) {
    if (!t.defined() || !on_neuron(t)) return true;
    any = true;
    bytes += t.nbytes();
    return bytes <= kKnownValuesMaxBytes && values_known(t);
  };
  for (const auto& value : values) {
    if (value.isTensor()) {
      if (!check(value.toTensor())) return false;
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList().vec()) {
        if (!check(t)) return false;
      }
    } else if (value.isOptionalTensorList()) {
      for (std::optional<at::Tensor> t : value.toOptionalTensorList()) {
        if (t.has_value() && !check(*t)) return false;
      }
    }
  }
  return any;
}

}  // namespace torch_neuron
