// Small collectives whose data rides in their agreement messages (Note [Collectives that carry
// their data] in ProcessGroupNeuron.cpp): what each rank sends each other rank, and how it
// computes its outputs from what the others sent it, instead of a Gloo collective after the
// agreement.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace torch_neuron {

struct InlinePlan {
  // Per group rank, the host tensor (contiguous) whose bytes this rank sends it; undefined:
  // nothing. The entry for this rank is what it "sends itself".
  std::vector<at::Tensor> payloads;
  // Writes the host outputs from `received`: per group rank, the bytes (uint8, 1-D) that rank
  // sent this one. Runs only once every rank has agreed on the call.
  std::function<void(const std::vector<at::Tensor>& received)> combine;
};

// Plans for one host tensor per rank (all of a group's ranks run as processes). nullopt when
// the reduction has no inline form (it then goes to Gloo, which raises what it does not do).
std::optional<InlinePlan> inline_all_reduce(const at::Tensor& host, c10d::ReduceOp op,
                                            int size);
std::optional<InlinePlan> inline_reduce(const at::Tensor& host, c10d::ReduceOp op, int root,
                                        int rank, int size);
InlinePlan inline_broadcast(const at::Tensor& host, int root, int rank, int size);
// `outputs`: the group's size of host tensors, rank r's input lands in outputs[r].
InlinePlan inline_all_gather(const std::vector<at::Tensor>& outputs, const at::Tensor& input);
// `chunks`: the group's size of host tensors, chunks[r] is reduced into rank r's output.
std::optional<InlinePlan> inline_reduce_scatter(const at::Tensor& output,
                                                const std::vector<at::Tensor>& chunks,
                                                c10d::ReduceOp op);
// Equal chunks: inputs[r] goes to rank r, rank r's chunk for this rank lands in outputs[r].
InlinePlan inline_all_to_all(const std::vector<at::Tensor>& outputs,
                             const std::vector<at::Tensor>& inputs);

// The bytes of a contiguous host tensor, as a flat uint8 tensor sharing its memory.
at::Tensor host_bytes(const at::Tensor& host);

}  // namespace torch_neuron
