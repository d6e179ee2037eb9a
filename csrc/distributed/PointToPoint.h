// The bookkeeping of the neuron group's point-to-point protocol (Note [Point-to-point sizes] in
// ProcessGroupNeuron.cpp): the receiver's size each send learns, and the sends of one peer and
// tag that still owe their receiver a bulk message.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace torch_neuron {

// A Gloo receive of one number (a receiver's size) that several threads may wait for: the
// first waits for Gloo, the others for it. (A Gloo receive must not be waited for twice: the
// second wait blocks for another message.)
class SharedSize {
 public:
  SharedSize(c10::intrusive_ptr<c10d::Work> work, at::Tensor value);
  // Waits for the number; rethrows the receive's failure.
  uint64_t get();

 private:
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor value_;  // one double
  bool done_ = false;
  std::exception_ptr error_;
};

// The receives of the receivers' sizes, one posted ahead per peer and tag (Note [Receives
// posted in advance] in PostedInboxes.h): a receiver sends its size when its receive is
// issued, usually while the matching send is being issued, and a size receive posted only then
// would cost the send a second message latency.
class PostedSizes {
 public:
  // The size of the next receive that Gloo rank `peer` posts on `tag`, and the receive of the
  // one after it posted now.
  std::shared_ptr<SharedSize> next(c10d::Backend& gloo, int peer, int tag);

 private:
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::shared_ptr<SharedSize>> posted_;
};

// One send, from its issue until it is settled: until what it owes its receiver's bulk receive
// (its data, a filler, or nothing) is known and sent.
struct PendingSend {
  std::shared_ptr<SharedSize> wanted;  // the receiver's size in bytes
  uint64_t bytes = 0;                  // this send's size
  bool moves_data = true;              // false in predict-only mode: only the header travels
  at::Tensor bulk;                     // the data as bytes when too large to go inline
  std::shared_ptr<void> keep_alive;    // what `bulk` is a view of
  std::atomic<bool> settled{false};
  // Who settles a large send: its wait(), or its lane when wait() has not claimed it in time.
  std::mutex claim_mutex;
  std::condition_variable claim_cv;
  bool claimed = false;
};

// The unsettled sends of one (peer, tag) in issue order: their bulk messages must leave in
// that order, since the receiver's bulk receives are matched in order.
class SendQueue {
 public:
  // Appends `send`, first dropping the settled sends at the front.
  void push(std::shared_ptr<PendingSend> send);
  // The oldest send still queued, or nullptr.
  std::shared_ptr<PendingSend> front();
  // Drops `send` if it is the oldest.
  void pop(const std::shared_ptr<PendingSend>& send);
  // Held by whoever sends the queue's bulk messages (its lane, or a caller's wait()).
  std::mutex settling;

 private:
  std::mutex mutex_;
  std::deque<std::shared_ptr<PendingSend>> sends_;
};

class SendQueues {
 public:
  SendQueue& of(int peer, int tag);

 private:
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::unique_ptr<SendQueue>> queues_;
};

}  // namespace torch_neuron
