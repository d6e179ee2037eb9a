#include "trnsim/hbm.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "trnsim/error.h"
#include "trnsim/instance.h"

namespace trnsim {
namespace {

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// Freed ranges at least this large are handed back to the OS, so a process that once touched
// many GiB of simulated HBM does not keep them resident.
constexpr uint64_t kReturnToOsBytes = 2 * kMiB;
constexpr uint64_t kPage = 4096;

}  // namespace

Hbm::Hbm(int device, uint64_t capacity) : device_(device), capacity_(capacity) {
  if (capacity == 0) throw Error("HBM capacity must be positive");
  // MAP_NORESERVE: reserve address space only; the kernel commits pages when first touched.
  void* base = mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    throw Error("could not reserve " + format_bytes(capacity) +
                " of host address space for the HBM of neuron:" + std::to_string(device) + ": " +
                std::strerror(errno) + ". Check `ulimit -v` and vm.overcommit_memory.");
  }
  base_ = static_cast<char*>(base);
  free_[0] = capacity;
}

Hbm::~Hbm() { munmap(base_, capacity_); }

void* Hbm::allocate(uint64_t bytes) {
  if (bytes == 0) return nullptr;
  // Checked before rounding: round_up would wrap a size near 2^64 to a tiny block.
  if (bytes > capacity_) throw OutOfMemory(device_, bytes, free_bytes(), capacity_);
  const uint64_t size = round_up(bytes, kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  // First fit in address order keeps the low end dense and leaves large ranges at the top.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const uint64_t offset = it->first, remaining = it->second - size;
    free_.erase(it);
    if (remaining > 0) free_[offset + size] = remaining;
    used_[offset] = size;
    used_bytes_ += size;
    return base_ + offset;
  }
  throw OutOfMemory(device_, bytes, capacity_ - used_bytes_, capacity_);
}

void Hbm::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = contains(ptr) ? used_.find(static_cast<char*>(ptr) - base_) : used_.end();
  if (it == used_.end()) {
    throw Error("pointer is not the start of a live HBM allocation of neuron:" +
                std::to_string(device_));
  }
  uint64_t offset = it->first, size = it->second;
  used_.erase(it);
  used_bytes_ -= size;
  // Coalesce with the free neighbours on both sides.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[offset] = size;
  if (size >= kReturnToOsBytes) {
    const uint64_t begin = round_up(offset, kPage), end = (offset + size) / kPage * kPage;
    if (end > begin) madvise(base_ + begin, end - begin, MADV_DONTNEED);
  }
}

bool Hbm::contains(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  return p >= base_ && p < base_ + capacity_;
}

uint64_t Hbm::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

uint64_t Hbm::largest_free_block() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace trnsim
