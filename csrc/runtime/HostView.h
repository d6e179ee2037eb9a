// Simulated HBM is host memory, so a neuron tensor's data can be read and written by ATen's CPU
// kernels through a CPU tensor that aliases it: same bytes, sizes, strides and offset; and a CPU
// tensor a kernel allocated in HBM becomes a neuron tensor without a copy.
#pragma once

#include <ATen/core/Tensor.h>

#include "runtime/Runtime.h"

namespace torch_neuron {

// Whether `t` is a (defined) neuron tensor.
inline bool on_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNeuron;
}

// A CPU tensor aliasing `tensor`'s memory. It does not own the memory: keep `tensor` alive while
// the view is used. CPU tensors and undefined tensors are returned unchanged.
// A `resizable` view may be resized by a CPU kernel: its storage then grows through the CPU
// allocator (which allocates in HBM inside an AllocateOnDevice scope, Note [Host execution]).
at::Tensor host_view(const at::Tensor& tensor, bool resizable = false);
// The same for a caller that makes several views in one op and asked
// c10::InferenceMode::is_enabled() once (a library call reading a thread-local).
at::Tensor host_view(const at::Tensor& tensor, bool resizable, bool inference_mode);

// Hands a view made by host_view back once the caller is done with it, so that a later
// host_view on this thread can reuse it (Note [Recycled host views]). Views that something
// else still references or that a kernel changed beyond what host_view resets are dropped.
void recycle_host_view(at::Tensor view);

// Note [Host view slots]: a typed host kernel (Note [Unboxed host execution]) keeps, per op,
// thread and argument position, the view it made last time, instead of handing it to the
// spare views and taking one back: an op called over and over saves the round trip. The slot
// owns its view between calls; a view something else still holds (a kernel returned it, say)
// is left to its holders and the slot makes another.
class HostViewSlot {
 public:
  // This slot's view re-dressed as a (non-resizable) view of the neuron tensor `tensor`, valid
  // until give_back(); nullptr while an outer call on this thread holds the slot.
  at::Tensor* take(const at::Tensor& tensor, bool inference_mode);
  void give_back() { busy_ = false; }

 private:
  at::Tensor view_;
  bool busy_ = false;
};

// A tensor for dispatch key `key` (CPU or PrivateUse1) over `storage`, with `like`'s dtype,
// sizes, strides, storage offset and lazy conj/neg bits: the one way tensors are re-dressed
// between neuron and host views.
at::Tensor tensor_like(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like);

// Turns a CPU tensor that a kernel produced inside AllocateOnDevice(device) into a neuron tensor:
// without a copy when its memory is in that device's HBM (the usual case), by a copy otherwise.
// Pass the result by std::move: a tensor only the caller holds is converted in place.
at::Tensor adopt_host_result(at::Tensor cpu_result, c10::DeviceIndex device);

// Makes the storage of `t`, which a CPU kernel allocated in `device`'s HBM, a neuron storage.
void adopt_storage(const at::Tensor& t, c10::DeviceIndex device);

}  // namespace torch_neuron
