// The host tensors a collective hands to Gloo for neuron tensors. Simulated HBM is host
// memory, so a contiguous neuron tensor is passed as a CPU alias of its bytes (no copy); a
// non-contiguous one goes through a contiguous host buffer, copied back for outputs. In
// predict-only mode meta tensors stand in for the bytes, except for tensors that can take part
// with known values (Note [Known values in predict-only mode]).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>

#include <utility>
#include <vector>

namespace torch_neuron {

class HostStaging {
 public:
  // A host tensor with `tensor`'s contents that the collective only reads.
  at::Tensor input(const at::Tensor& tensor);
  // A host tensor the collective writes (and does not read); finish() puts what was written
  // back into `tensor` when it had to be staged in a buffer.
  at::Tensor output(const at::Tensor& tensor);
  std::vector<at::Tensor> inputs(const std::vector<at::Tensor>& tensors);
  std::vector<at::Tensor> outputs(const std::vector<at::Tensor>& tensors);
  std::vector<std::vector<at::Tensor>> outputs(const std::vector<std::vector<at::Tensor>>& lists);
  // Tensors the collective reads and writes (all_reduce, a broadcast's root).
  std::vector<at::Tensor> in_outs(const std::vector<at::Tensor>& tensors);

  // Predict-only mode (Note [Known values in predict-only mode]): whether every tensor read
  // has known values and every tensor written is small enough to take them, so that the
  // collective can move values. Always true when computing.
  bool values_known() const { return values_known_; }
  // Marks every neuron tensor written as holding known values (after the collective's charge).
  void mark_outputs_known() const;

  // Copies staged outputs back into their neuron tensors. Call once the collective is done.
  void finish();
  // Tells the caching allocator that `stream` (the collective's) uses every staged neuron
  // tensor, so that their blocks are reused only after the collective's simulated end (as
  // ProcessGroupNCCL records its stream on the tensors it is given).
  void record_stream(const c10::Stream& stream) const;

 private:
  enum class Use { Read, Write, ReadWrite };
  at::Tensor stage(const at::Tensor& tensor, Use use);

  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;  // (neuron tensor, host buffer)
  std::vector<at::Tensor> staged_;                             // every neuron tensor
  std::vector<at::Tensor> written_;                            // the neuron tensors written
  bool values_known_ = true;
};

// Gloo moves float8 data only as bytes: every float8 type is one byte wide, so a uint8 view
// keeps the shape. Other dtypes are returned unchanged.
at::Tensor as_gloo_dtype(const at::Tensor& host);

}  // namespace torch_neuron
