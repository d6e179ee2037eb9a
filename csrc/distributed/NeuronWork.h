// The Work that the neuron process group returns.
//
// Note [Collective completion]: collectives run synchronously when issued (Gloo moves the bytes
// at once; simulated HBM is host memory), so their results are in the output tensors when the
// op returns. What is asynchronous is the simulated clock: the collective occupies the group's
// collective stream until `end_ns`, and wait()/synchronize() make the caller's current stream
// wait until then, as CUDA's ProcessGroupNCCL makes it wait on the NCCL stream. Receives cannot
// finish when issued (the sender may post later, batch_isend_irecv orders them freely): their
// Work holds Gloo's pending work and a `finish` step that runs once it completes.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace torch_neuron {

class NeuronWork final : public c10d::Work {
 public:
  // A finished collective whose outputs are `outputs`, ending at `end_ns` on `stream`
  // (a collective stream; nullopt when only CPU tensors took part).
  NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
             std::optional<c10::Stream> stream, double end_ns);
  // A pending point-to-point op: complete once `pending` is; `finish` then runs once (copying
  // data into place) and returns the simulated end time.
  NeuronWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
             std::optional<c10::Stream> stream, c10::intrusive_ptr<c10d::Work> pending,
             std::function<double()> finish, std::string context);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  void blockCurrentStream() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  // Runs `finish` and completes the future, once; rethrows a failure of the pending work.
  void complete();
  void make_future();

  std::vector<at::Tensor> outputs_;
  std::optional<c10::Stream> stream_;
  c10::intrusive_ptr<c10d::Work> pending_;
  std::function<double()> finish_;
  std::string context_;  // names the op and peer in errors
  double end_ns_ = 0;
  bool done_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace torch_neuron
