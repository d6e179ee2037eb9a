#include "distributed/SpmdCpuBackend.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include "distributed/PremulFactor.h"

namespace torch_neuron {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// A Work that is already done, with `outputs` as its result.
WorkPtr done(std::vector<at::Tensor> outputs) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
  future->markCompleted(c10::IValue(std::move(outputs)));
  return c10d::Work::create_from_future(future);
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

// `output` filled with `copies` copies of `input`, one after another.
void fill_repeated(at::Tensor& output, const at::Tensor& input, int copies) {
  TORCH_CHECK(output.numel() == input.numel() * copies, "all_gather_into_tensor: the output has ",
              output.numel(), " elements; the group of ", copies, " ranks gathers ",
              input.numel() * copies);
  output.copy_(input.reshape({-1}).repeat({copies}).view(output.sizes()));
}

}  // namespace

SpmdCpuBackend::SpmdCpuBackend(int rank, int size, std::vector<int> gloo_ranks,
                               c10::intrusive_ptr<c10d::Backend> gloo)
    : Backend(rank, size), gloo_ranks_(std::move(gloo_ranks)), gloo_(std::move(gloo)) {}

void SpmdCpuBackend::reduce_copies(at::Tensor& tensor, const c10d::ReduceOp& op) const {
  const int n = getSize();
  const bool boolean = tensor.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      if (!boolean) tensor.mul_(n);  // a sum of booleans is their OR
      return;
    case c10d::ReduceOp::PRODUCT:
      if (!boolean) tensor.pow_(n);
      return;
    case c10d::ReduceOp::BXOR:
      if (n % 2 == 0) tensor.zero_();
      return;
    case c10d::ReduceOp::PREMUL_SUM:
      tensor.mul_(*premul_factor(op) * n);
      return;
    default:  // AVG, MIN, MAX, BAND, BOR of equal tensors: the tensor itself
      return;
  }
}

WorkPtr SpmdCpuBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions&) {
  return done(tensors);
}

WorkPtr SpmdCpuBackend::allreduce(std::vector<at::Tensor>& tensors,
                                  const c10d::AllreduceOptions& opts) {
  for (auto& t : tensors) reduce_copies(t, opts.reduceOp);
  return done(tensors);
}

WorkPtr SpmdCpuBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                            const c10d::AllreduceCoalescedOptions& opts) {
  for (auto& t : tensors) reduce_copies(t, opts.reduceOp);
  return done(tensors);
}

WorkPtr SpmdCpuBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  if (opts.rootRank == getRank()) {
    for (auto& t : tensors) reduce_copies(t, opts.reduceOp);
  }
  return done(tensors);
}

WorkPtr SpmdCpuBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                  std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    for (auto& out : outputs[i]) out.copy_(inputs[i]);
  }
  return done(flat(outputs));
}

WorkPtr SpmdCpuBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                        const c10d::AllgatherOptions&) {
  fill_repeated(output, input, getSize());
  return done({output});
}

WorkPtr SpmdCpuBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const c10d::AllgatherOptions&) {
  for (auto& per_rank : outputs) {
    for (size_t k = 0; k < per_rank.size() && k < inputs.size(); ++k) per_rank[k].copy_(inputs[k]);
  }
  return done(flat(outputs));
}

WorkPtr SpmdCpuBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::AllgatherOptions&) {
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    fill_repeated(outputs[i], inputs[i], getSize());
  }
  return done(outputs);
}

WorkPtr SpmdCpuBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                               std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  if (opts.rootRank == getRank() && !outputs.empty() && !inputs.empty()) {
    for (auto& out : outputs[0]) out.copy_(inputs[0]);
  }
  return done(flat(outputs));
}

WorkPtr SpmdCpuBackend::scatter(std::vector<at::Tensor>& outputs,
                                std::vector<std::vector<at::Tensor>>& inputs,
                                const c10d::ScatterOptions& opts) {
  // A virtual root's list is not known here: the output keeps what it holds.
  if (opts.rootRank == getRank() && !outputs.empty() && !inputs.empty()) {
    outputs[0].copy_(inputs[0].at(getRank()));
  }
  return done(outputs);
}

WorkPtr SpmdCpuBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                       std::vector<std::vector<at::Tensor>>& inputs,
                                       const c10d::ReduceScatterOptions& opts) {
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    outputs[i].copy_(inputs[i].at(getRank()));
    reduce_copies(outputs[i], opts.reduceOp);
  }
  return done(outputs);
}

WorkPtr SpmdCpuBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                             const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "reduce_scatter_tensor: the input has ",
              input.numel(), " elements; the group of ", getSize(), " ranks needs ",
              output.numel() * getSize());
  output.copy_(input.reshape({-1}).chunk(getSize()).at(getRank()).view(output.sizes()));
  reduce_copies(output, opts.reduceOp);
  return done({output});
}

WorkPtr SpmdCpuBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::ReduceScatterOptions& opts) {
  for (size_t i = 0; i < outputs.size() && i < inputs.size(); ++i) {
    _reduce_scatter_base(outputs[i], inputs[i], opts);
  }
  return done(outputs);
}

WorkPtr SpmdCpuBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                      std::vector<int64_t>& output_split_sizes,
                                      std::vector<int64_t>& input_split_sizes,
                                      const c10d::AllToAllOptions&) {
  // Rank j sends this rank its chunk for this rank, equal (SPMD) to this rank's own.
  const int n = getSize();
  const auto in = input_split_sizes.empty() ? input.chunk(n, 0).at(getRank())
                                            : input.narrow(0, [&] {
                                                int64_t start = 0;
                                                for (int j = 0; j < getRank(); ++j)
                                                  start += input_split_sizes.at(j);
                                                return start;
                                              }(), input_split_sizes.at(getRank()));
  int64_t start = 0;
  for (int j = 0; j < n; ++j) {
    const int64_t rows = output_split_sizes.empty() ? output.size(0) / n : output_split_sizes.at(j);
    TORCH_CHECK(rows == in.size(0), "all_to_all in a virtual world: rank ", j, " would send ",
                in.size(0), " rows (what this rank sends it, by the SPMD assumption) into ",
                rows, " rows of the output; give every rank the same split sizes");
    output.narrow(0, start, rows).copy_(in);
    start += rows;
  }
  return done({output});
}

WorkPtr SpmdCpuBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::AllToAllOptions&) {
  for (auto& out : outputs) out.copy_(inputs.at(getRank()));
  return done(outputs);
}

WorkPtr SpmdCpuBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  const int peer = gloo_ranks_.at(dst_rank);
  return peer >= 0 ? gloo_->send(tensors, peer, tag) : done(tensors);
}

WorkPtr SpmdCpuBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  const int peer = gloo_ranks_.at(src_rank);
  return peer >= 0 ? gloo_->recv(tensors, peer, tag) : done(tensors);
}

WorkPtr SpmdCpuBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false, "recv from any source is not supported in a virtual world (the sender ",
              "could be a virtual rank); name the source rank");
}

WorkPtr SpmdCpuBackend::barrier(const c10d::BarrierOptions& opts) { return gloo_->barrier(opts); }

void SpmdCpuBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  gloo_->monitoredBarrier(opts, wait_all_ranks);
}

}  // namespace torch_neuron
