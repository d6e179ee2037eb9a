#include "distributed/PointToPoint.h"

#include <ATen/ops/empty.h>
#include <ATen/record_function.h>

#include <vector>

namespace torch_neuron {

SharedSize::SharedSize(c10::intrusive_ptr<c10d::Work> work, at::Tensor value)
    : work_(std::move(work)), value_(std::move(value)) {}

uint64_t SharedSize::get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) {
    try {
      work_->wait();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_ = true;
  }
  if (error_) std::rethrow_exception(error_);
  return static_cast<uint64_t>(value_.data_ptr<double>()[0]);
}

namespace {

std::shared_ptr<SharedSize> post_size(c10d::Backend& gloo, int peer, int tag) {
  std::vector<at::Tensor> value{at::empty({1}, at::kDouble)};
  // Not a profiler event: posted ahead, the receive may outlive the profiler (PostedInboxes.cpp).
  at::DisableRecordFunctionGuard unprofiled;
  auto work = gloo.recv(value, peer, tag);
  return std::make_shared<SharedSize>(std::move(work), value[0]);
}

}  // namespace

std::shared_ptr<SharedSize> PostedSizes::next(c10d::Backend& gloo, int peer, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& posted = posted_[{peer, tag}];
  auto size = posted ? std::move(posted) : post_size(gloo, peer, tag);
  try {
    posted = post_size(gloo, peer, tag);
  } catch (const std::exception&) {
    posted = nullptr;  // (the peer has gone: this send's size receive raises it)
  }
  return size;
}

void SendQueue::push(std::shared_ptr<PendingSend> send) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!sends_.empty() && sends_.front()->settled) sends_.pop_front();
  sends_.push_back(std::move(send));
}

std::shared_ptr<PendingSend> SendQueue::front() {
  std::lock_guard<std::mutex> lock(mutex_);
  return sends_.empty() ? nullptr : sends_.front();
}

void SendQueue::pop(const std::shared_ptr<PendingSend>& send) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!sends_.empty() && sends_.front() == send) sends_.pop_front();
}

SendQueue& SendQueues::of(int peer, int tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = queues_[{peer, tag}];
  if (!slot) slot = std::make_unique<SendQueue>();
  return *slot;
}

}  // namespace torch_neuron
