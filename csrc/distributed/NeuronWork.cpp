#include "distributed/NeuronWork.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include "runtime/Stream.h"

namespace torch_neuron {

NeuronWork::NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                       std::optional<c10::Stream> stream, double end_ns)
    : Work(rank, type), outputs_(std::move(outputs)), stream_(stream), end_ns_(end_ns) {
  make_future();
  done_ = true;
  if (stream_) {
    // The future's completion event is recorded on the current stream: make that the
    // collective stream, whose clock is the collective's end, so that waiting on the future
    // (DDP's communication hooks do) waits for the collective on the simulated clock.
    c10::StreamGuard guard(*stream_);
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

NeuronWork::NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                       std::optional<c10::Stream> stream, c10::intrusive_ptr<c10d::Work> pending,
                       std::function<double()> finish, std::string context)
    : Work(rank, type),
      outputs_(std::move(outputs)),
      stream_(stream),
      pending_(std::move(pending)),
      finish_(std::move(finish)),
      context_(std::move(context)) {
  make_future();
}

void NeuronWork::make_future() {
  std::vector<c10::Device> devices;
  if (stream_) devices.push_back(stream_->device());
  future_ = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), devices);
}

void NeuronWork::complete() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) {
    done_ = true;
    if (!pending_->isSuccess()) {
      error_ = pending_->exception();
    } else {
      try {
        end_ns_ = finish_();
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    if (error_) {
      future_->setError(error_);
    } else if (stream_) {
      c10::StreamGuard guard(*stream_);
      future_->markCompleted(c10::IValue(outputs_));
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }
  if (error_) std::rethrow_exception(error_);
}

bool NeuronWork::isCompleted() {
  if (pending_ && pending_->isCompleted()) complete();
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool NeuronWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !error_;
}

std::exception_ptr NeuronWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

int NeuronWork::sourceRank() const {
  TORCH_CHECK(pending_, "sourceRank() is only defined for receive operations");
  return pending_->sourceRank();
}

std::vector<at::Tensor> NeuronWork::result() { return outputs_; }

bool NeuronWork::wait(std::chrono::milliseconds timeout) {
  if (pending_) {
    try {
      pending_->wait(timeout);
    } catch (const c10::Error& e) {
      // (what() would carry the inner error's C++ backtrace into the message)
      C10_THROW_ERROR(DistBackendError, context_ + " failed: " + e.what_without_backtrace());
    } catch (const std::exception& e) {
      C10_THROW_ERROR(DistBackendError, context_ + " failed: " + e.what());
    }
    complete();
  }
  if (stream_) current_queue(stream_->device_index()).wait_until(end_ns_);
  return true;
}

void NeuronWork::synchronize() { wait(); }

void NeuronWork::blockCurrentStream() { wait(); }

c10::intrusive_ptr<c10::ivalue::Future> NeuronWork::getFuture() { return future_; }

}  // namespace torch_neuron
