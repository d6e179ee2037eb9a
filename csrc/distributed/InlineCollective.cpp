#include "distributed/InlineCollective.h"

#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_or.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>

namespace torch_neuron {
namespace {

using Combine = std::function<void(at::Tensor& acc, const at::Tensor& x)>;

// acc <- acc (op) x, as Gloo's reductions do (its ReduceOps; AVG and PREMUL_SUM are not
// among them: PREMUL_SUM arrives here as SUM of premultiplied inputs).
std::optional<Combine> reduction(c10d::ReduceOp op, at::ScalarType dtype) {
  if (dtype == at::kBool || at::isComplexType(dtype)) return std::nullopt;
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/false);
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return Combine([](at::Tensor& acc, const at::Tensor& x) { acc.add_(x); });
    case c10d::ReduceOp::PRODUCT:
      return Combine([](at::Tensor& acc, const at::Tensor& x) { acc.mul_(x); });
    case c10d::ReduceOp::MIN:
      return Combine([](at::Tensor& acc, const at::Tensor& x) { at::minimum_out(acc, acc, x); });
    case c10d::ReduceOp::MAX:
      return Combine([](at::Tensor& acc, const at::Tensor& x) { at::maximum_out(acc, acc, x); });
    case c10d::ReduceOp::BAND:
      if (!integral) return std::nullopt;
      return Combine([](at::Tensor& acc, const at::Tensor& x) { acc.bitwise_and_(x); });
    case c10d::ReduceOp::BOR:
      if (!integral) return std::nullopt;
      return Combine([](at::Tensor& acc, const at::Tensor& x) { acc.bitwise_or_(x); });
    case c10d::ReduceOp::BXOR:
      if (!integral) return std::nullopt;
      return Combine([](at::Tensor& acc, const at::Tensor& x) { acc.bitwise_xor_(x); });
    default:
      return std::nullopt;
  }
}

// `bytes` seen as a flat tensor of `like`'s dtype.
at::Tensor as_values(const at::Tensor& bytes, const at::Tensor& like) {
  return bytes.view(like.scalar_type()).view(like.sizes());
}

// Reduces what every rank sent, in rank order, into `out`: every rank adds the same terms in
// the same order, so every rank gets the same bits. (A floating-point sum or product over
// more than 2 ranks can differ in its last bits from Gloo's, whose ring adds in another
// order; Note [Collectives that carry their data].)
void reduce_into(const at::Tensor& out, const std::vector<at::Tensor>& received,
                 const Combine& combine) {
  at::Tensor acc = as_values(received[0], out).clone();
  for (size_t r = 1; r < received.size(); ++r) combine(acc, as_values(received[r], out));
  out.copy_(acc);
}

}  // namespace

at::Tensor host_bytes(const at::Tensor& host) {
  return host.reshape({-1}).view(at::kByte);
}

std::optional<InlinePlan> inline_all_reduce(const at::Tensor& host, c10d::ReduceOp op,
                                            int size) {
  auto combine = reduction(op, host.scalar_type());
  if (!combine) return std::nullopt;
  InlinePlan plan;
  plan.payloads.assign(size, host);
  plan.combine = [host, combine = *combine](const std::vector<at::Tensor>& received) {
    reduce_into(host, received, combine);
  };
  return plan;
}

std::optional<InlinePlan> inline_reduce(const at::Tensor& host, c10d::ReduceOp op, int root,
                                        int rank, int size) {
  auto combine = reduction(op, host.scalar_type());
  if (!combine) return std::nullopt;
  InlinePlan plan;
  plan.payloads.resize(size);
  plan.payloads[root] = host;
  plan.combine = [host, root, rank, combine = *combine](const std::vector<at::Tensor>& received) {
    if (rank == root) reduce_into(host, received, combine);
  };
  return plan;
}

InlinePlan inline_broadcast(const at::Tensor& host, int root, int rank, int size) {
  InlinePlan plan;
  plan.payloads.resize(size);
  if (rank == root) plan.payloads.assign(size, host);
  plan.combine = [host, root, rank](const std::vector<at::Tensor>& received) {
    if (rank != root) host.copy_(as_values(received[root], host));
  };
  return plan;
}

InlinePlan inline_all_gather(const std::vector<at::Tensor>& outputs, const at::Tensor& input) {
  InlinePlan plan;
  plan.payloads.assign(outputs.size(), input);
  plan.combine = [outputs](const std::vector<at::Tensor>& received) {
    for (size_t r = 0; r < outputs.size(); ++r) {
      outputs[r].copy_(as_values(received[r], outputs[r]));
    }
  };
  return plan;
}

std::optional<InlinePlan> inline_reduce_scatter(const at::Tensor& output,
                                                const std::vector<at::Tensor>& chunks,
                                                c10d::ReduceOp op) {
  auto combine = reduction(op, output.scalar_type());
  if (!combine) return std::nullopt;
  InlinePlan plan;
  plan.payloads = chunks;
  plan.combine = [output, combine = *combine](const std::vector<at::Tensor>& received) {
    reduce_into(output, received, combine);
  };
  return plan;
}

InlinePlan inline_all_to_all(const std::vector<at::Tensor>& outputs,
                             const std::vector<at::Tensor>& inputs) {
  InlinePlan plan;
  plan.payloads = inputs;
  plan.combine = [outputs](const std::vector<at::Tensor>& received) {
    for (size_t r = 0; r < outputs.size(); ++r) {
      outputs[r].copy_(as_values(received[r], outputs[r]));
    }
  };
  return plan;
}

}  // namespace torch_neuron
