#include "runtime/HostAllocator.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace torch_neuron {
namespace {

constexpr size_t kPageSize = 4096;

struct PinnedRegistry {
  std::mutex mutex;
  std::map<const char*, size_t> buffers;  // start -> size
  at::HostStats stats;
};

// Never destroyed: pinned tensors may be freed during interpreter shutdown.
PinnedRegistry& registry() {
  static auto* r = new PinnedRegistry();
  return *r;
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  auto& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.buffers.find(static_cast<const char*>(ptr));
    if (it != r.buffers.end()) {
      r.stats.active_requests.decrease(1);
      r.stats.active_bytes.decrease(it->second);
      r.stats.allocations.decrease(1);
      r.stats.allocated_bytes.decrease(it->second);
      ++r.stats.num_host_free;
      r.buffers.erase(it);
    }
  }
  std::free(ptr);
}

}  // namespace

NeuronHostAllocator& host_allocator() {
  static NeuronHostAllocator allocator;
  return allocator;
}

at::DataPtr NeuronHostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return {nullptr, nullptr, &free_pinned, at::Device(at::kCPU)};
  void* ptr = nullptr;
  const size_t size = (nbytes + kPageSize - 1) / kPageSize * kPageSize;
  TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&ptr, kPageSize, size) == 0,
                   "could not allocate ", nbytes, " bytes of pinned host memory");
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.buffers[static_cast<const char*>(ptr)] = size;
  r.stats.active_requests.increase(1);
  r.stats.active_bytes.increase(size);
  r.stats.allocations.increase(1);
  r.stats.allocated_bytes.increase(size);
  ++r.stats.num_host_alloc;
  return {ptr, ptr, &free_pinned, at::Device(at::kCPU)};
}

at::DeleterFnPtr NeuronHostAllocator::raw_deleter() const { return &free_pinned; }

void NeuronHostAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

at::HostStats NeuronHostAllocator::get_stats() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().stats;
}

void NeuronHostAllocator::reset_accumulated_stats() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& s = registry().stats;
  for (auto* stat : {&s.active_requests, &s.active_bytes, &s.allocations, &s.allocated_bytes}) {
    stat->reset_accumulated();
  }
  s.num_host_alloc = s.num_host_free = 0;
}

void NeuronHostAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& s = registry().stats;
  for (auto* stat : {&s.active_requests, &s.active_bytes, &s.allocations, &s.allocated_bytes}) {
    stat->reset_peak();
  }
}

bool NeuronHostAllocator::is_pinned(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto& buffers = registry().buffers;
  auto it = buffers.upper_bound(p);
  if (it == buffers.begin()) return false;
  --it;
  return p < it->first + it->second;
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &host_allocator())

}  // namespace torch_neuron
