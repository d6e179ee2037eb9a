// Simulated HBM is host memory, so a neuron tensor's data can be read and written by ATen's CPU
// kernels through a CPU tensor that aliases it: same bytes, sizes, strides and offset.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_neuron {

// A CPU tensor aliasing `tensor`'s memory. It does not own the memory: keep `tensor` alive while
// the view is used. CPU tensors and undefined tensors are returned unchanged.
// A `resizable` view may be resized by a CPU kernel: its storage then grows through the CPU
// allocator (which allocates in HBM inside an AllocateOnDevice scope, Note [Host execution]).
at::Tensor host_view(const at::Tensor& tensor, bool resizable = false);

// Hands a view made by host_view back once the caller is done with it, so that a later
// host_view on this thread can reuse it (Note [Recycled host views]). Views that something
// else still references or that a kernel changed beyond what host_view resets are dropped.
void recycle_host_view(at::Tensor view);

// A tensor for dispatch key `key` (CPU or PrivateUse1) over `storage`, with `like`'s dtype,
// sizes, strides, storage offset and lazy conj/neg bits: the one way tensors are re-dressed
// between neuron and host views.
at::Tensor tensor_like(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like);

}  // namespace torch_neuron
