// Ops that only change a tensor's metadata (sizes, strides, offset, storage): views, set_ and
// resize_. They are free on the device, so they are not launched or charged.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/alias_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

// Grows `storage` to at least `nbytes`, keeping its contents (like resize_bytes on CPU, but with
// the HBM allocator of the storage's own device).
void grow_storage(const c10::Storage& storage, size_t nbytes) {
  auto* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(),
              "trying to resize a storage that is not resizable (it was created from external "
              "memory); clone() the tensor first");
  c10::DataPtr fresh = device_allocator().allocate_on(impl->device().index(), nbytes);
  if (impl->nbytes() > 0) std::memcpy(fresh.get(), impl->data(), impl->nbytes());
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

void ensure_storage(const at::Tensor& self) {
  const size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                         self.dtype().itemsize(),
                                                         self.storage_offset());
  if (needed > self.storage().nbytes()) grow_storage(self.storage(), needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  for (auto s : size) {
    TORCH_CHECK(s >= 0, "resize_: sizes must be non-negative, got ", size);
  }
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size || memory_format.has_value()) {
    impl->set_sizes_contiguous(size);
    if (memory_format.has_value()) {
      TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve,
                  "resize_ does not support memory_format=torch.preserve_format");
      impl->empty_tensor_restride(*memory_format);
    }
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device(), "set_: the storage is on ", source.device(),
              " but the tensor is on ", self.device(), "; move one of them first");
  TORCH_CHECK(storage_offset >= 0, "set_: storage_offset must be non-negative, got ",
              storage_offset);
  auto* impl = self.unsafeGetTensorImpl();
  if (!self.storage().is_alias_of(source)) impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset);
  if (stride.data() != nullptr) {
    TORCH_CHECK(stride.size() == size.size(), "set_: got ", size.size(), " sizes but ",
                stride.size(), " strides");
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage(self);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0,
                     device_allocator().allocate_on(self.device().index(), 0),
                     &device_allocator(), /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

// Whether `from`'s data can be put under `self` (param.data = tensor). Dense strided tensors of
// neuron and the CPU share one TensorImpl layout, as CPU and CUDA tensors do; saying so keeps
// Module.to("neuron") updating parameters in place, so optimizers made before the move keep
// working (accelerate and many training scripts rely on it).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.device().type() == kNeuron || t.is_cpu());
  };
  return dense(self) && dense(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  // ATen's own view kernels only rewrite metadata and work for any device.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("alias", TORCH_FN(at::native::alias));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace torch_neuron
