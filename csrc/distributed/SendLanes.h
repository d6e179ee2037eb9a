// Background threads that finish large point-to-point sends in order per (peer, tag), so that a
// send's completion never waits for the caller to wait() on it (Note [Point-to-point sizes]
// in ProcessGroupNeuron.cpp).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace torch_neuron {

class SendLanes {
 public:
  SendLanes();
  SendLanes(const SendLanes&) = delete;
  SendLanes& operator=(const SendLanes&) = delete;
  // Lets every queued task run (a task blocked in Gloo ends at the group's timeout), then joins.
  ~SendLanes();

  // Runs `task` on the lane of (peer, tag), after the tasks queued there before it. The Work
  // completes when the task has run, failed with its exception if it threw.
  c10::intrusive_ptr<c10d::Work> run(int peer, int tag, std::function<void()> task);

 private:
  struct Lane;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<Lane>> lanes_;
};

}  // namespace torch_neuron
