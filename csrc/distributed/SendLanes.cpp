#include "distributed/SendLanes.h"

namespace torch_neuron {
namespace {

// A Work finished from a lane's thread (c10d::Work's own wait() and state do the rest).
class LaneWork final : public c10d::Work {
 public:
  void done(std::exception_ptr error) { finish(std::move(error)); }
};

}  // namespace

struct SendLanes::Lane {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<c10::intrusive_ptr<LaneWork>, std::function<void()>>> tasks;
  bool stopping = false;
  std::thread thread{[this] { serve(); }};

  void serve() {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      ready.wait(lock, [this] { return stopping || !tasks.empty(); });
      if (tasks.empty()) return;  // stopping, nothing left
      auto [work, task] = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      work->done(error);
      lock.lock();
    }
  }
};

SendLanes::SendLanes() = default;

SendLanes::~SendLanes() {
  for (auto& [key, lane] : lanes_) {
    {
      std::lock_guard<std::mutex> lock(lane->mutex);
      lane->stopping = true;
    }
    lane->ready.notify_one();
    lane->thread.join();
  }
}

c10::intrusive_ptr<c10d::Work> SendLanes::run(int peer, int tag, std::function<void()> task) {
  Lane* lane;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = lanes_[{peer, tag}];
    if (!slot) slot = std::make_unique<Lane>();
    lane = slot.get();
  }
  auto work = c10::make_intrusive<LaneWork>();
  {
    std::lock_guard<std::mutex> lock(lane->mutex);
    lane->tasks.emplace_back(work, std::move(task));
  }
  lane->ready.notify_one();
  return work;
}

}  // namespace torch_neuron
