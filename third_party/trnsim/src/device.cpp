#include "trnsim/device.h"

#include <algorithm>
#include <iterator>

#include "trnsim/error.h"

namespace trnsim {

Device::Device(int index, int core, const InstanceSpec& instance)
    : index_(index), core_(core), instance_(instance), queues_(kMaxQueues) {}

Device::~Device() {
  for (auto& q : queues_) delete q.load();
}

Hbm& Device::hbm() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!hbm_) hbm_ = std::make_unique<Hbm>(index_, instance_.hbm_bytes_per_core());
  return *hbm_;
}

bool Device::hbm_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hbm_ != nullptr;
}

Queue& Device::queue(int id) {
  if (id < 0 || id >= kMaxQueues) {
    throw Error("queue id " + std::to_string(id) + " is out of range [0, " +
                std::to_string(kMaxQueues) + ")");
  }
  if (Queue* q = queues_[id].load(std::memory_order_acquire)) return *q;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queues_[id].load()) queues_[id].store(new Queue(index_, id, &health_, &engines_), std::memory_order_release);
  return *queues_[id].load();
}

double Device::dma_free_ns() {
  OpCost dma;
  dma.hbm_ns = 1;  // any use of the DMA queues
  std::lock_guard<decltype(engines_.mutex)> lock(engines_.mutex);
  return engines_.earliest_start(dma);
}

double Device::synchronize_ns() {
  std::lock_guard<std::mutex> lock(mutex_);
  double t = 0;
  for (const auto& slot : queues_) {
    if (Queue* q = slot.load(std::memory_order_acquire)) t = std::max(t, q->now_ns());
  }
  return t;
}

std::vector<TraceRecord> Device::take_trace() {
  std::vector<TraceRecord> all;
  for (auto& slot : queues_) {
    if (Queue* q = slot.load(std::memory_order_acquire)) {
      auto records = q->take_trace();
      all.insert(all.end(), std::make_move_iterator(records.begin()),
                 std::make_move_iterator(records.end()));
    }
  }
  return all;
}

}  // namespace trnsim
