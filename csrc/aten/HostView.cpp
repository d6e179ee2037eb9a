#include "aten/HostView.h"

#include <c10/core/StorageImpl.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>

#include "runtime/Runtime.h"

namespace torch_neuron {

at::Tensor host_view(const at::Tensor& tensor, bool resizable) {
  if (!tensor.defined() || tensor.device().type() != kNeuron) return tensor;
  const c10::Storage& storage = tensor.storage();
  // A non-owning CPU DataPtr over the same bytes (no deleter: the neuron storage owns them).
  c10::Storage alias(c10::Storage::use_byte_size_t(), storage.nbytes(),
                     c10::DataPtr(storage.unsafeGetStorageImpl()->mutable_data(), c10::kCPU),
                     resizable ? c10::GetCPUAllocator() : nullptr, resizable);
  // Lazy conjugation and negation are part of the value (ops that understand them, like mm and
  // copy_, receive them unresolved), so the view keeps them.
  return tensor_like(std::move(alias), c10::DispatchKey::CPU, tensor);
}

at::Tensor tensor_like(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                      c10::DispatchKeySet(key), like.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                    like.storage_offset());
  out._set_conj(like.is_conj());
  out._set_neg(like.is_neg());
  return out;
}

}  // namespace torch_neuron
