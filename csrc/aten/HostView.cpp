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
  auto view = at::detail::make_tensor<c10::TensorImpl>(
      std::move(alias), c10::DispatchKeySet(c10::DispatchKey::CPU), tensor.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(tensor.sizes(), tensor.strides(),
                                                     tensor.storage_offset());
  // Lazy conjugation and negation are part of the value (ops that understand them, like mm and
  // copy_, receive them unresolved).
  view._set_conj(tensor.is_conj());
  view._set_neg(tensor.is_neg());
  return view;
}

}  // namespace torch_neuron
