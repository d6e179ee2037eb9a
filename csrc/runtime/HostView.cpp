#include "runtime/HostView.h"

#include <ATen/ops/empty_strided.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <typeinfo>
#include <vector>

#include "runtime/AllocateOnDevice.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

// Note [Recycled host views]: host execution makes a CPU view (a TensorImpl over a StorageImpl
// that does not own its bytes) of every tensor argument of every op, and drops it when the op
// returns. For small ops building and freeing them is a good part of the backend's overhead,
// so views that nothing else holds on to are kept per thread and re-dressed for the next op.
// A view is kept only when re-dressing makes it indistinguishable from a new one.
constexpr size_t kMaxSpareViews = 16;
struct SpareViewsTag;
std::vector<at::Tensor>& spare_views() {
  return per_thread<std::vector<at::Tensor>, SpareViewsTag>();
}

// A non-owning CPU DataPtr over the bytes of `storage` (the neuron storage owns them).
c10::DataPtr alias_data(const c10::Storage& storage) {
  return c10::DataPtr(storage.unsafeGetStorageImpl()->mutable_data(), c10::kCPU);
}

c10::Allocator* alias_allocator(bool resizable) {
  return resizable ? redirecting_cpu_allocator() : nullptr;
}

// Element by element: tensors have few dimensions, and this runs for every argument of every op
// (IntArrayRef's operator== calls memcmp).
bool same_sizes_and_strides(const c10::TensorImpl* a, const c10::TensorImpl* b) {
  const c10::IntArrayRef sizes_a = a->sizes(), sizes_b = b->sizes();
  if (sizes_a.size() != sizes_b.size()) return false;
  const c10::IntArrayRef strides_a = a->strides(), strides_b = b->strides();
  for (size_t d = 0; d < sizes_a.size(); ++d) {
    if (sizes_a[d] != sizes_b[d] || strides_a[d] != strides_b[d]) return false;
  }
  return true;
}

// The part of redress() that changes something: out of line, so that the common case (the
// same tensor as last time: an op repeated in a loop) runs no setter's code.
C10_NOINLINE void redress_changed(at::Tensor& view, const at::Tensor& tensor, bool resizable) {
  c10::TensorImpl* impl = view.unsafeGetTensorImpl();
  c10::StorageImpl* alias = impl->unsafe_storage().unsafeGetStorageImpl();
  const c10::Storage& storage = tensor.storage();
  void* data = storage.unsafeGetStorageImpl()->mutable_data();
  if (alias->data() != data) alias->set_data_ptr_noswap(c10::DataPtr(data, c10::kCPU));
  if (alias->nbytes() != storage.nbytes()) alias->set_nbytes(storage.nbytes());
  alias->set_allocator(alias_allocator(resizable));
  if (alias->resizable() != resizable) alias->set_resizable(resizable);
  if (impl->dtype() != tensor.dtype()) impl->set_storage_and_dtype(impl->storage(), tensor.dtype());
  if (!same_sizes_and_strides(impl, tensor.unsafeGetTensorImpl())) {
    impl->set_sizes_and_strides(tensor.sizes(), tensor.strides(), tensor.storage_offset());
  } else if (view.storage_offset() != tensor.storage_offset()) {
    impl->set_storage_offset(tensor.storage_offset());
  }
  if (view.is_conj() != tensor.is_conj()) view._set_conj(tensor.is_conj());
  if (view.is_neg() != tensor.is_neg()) view._set_neg(tensor.is_neg());
}

// Re-dresses `view`, a view host_view made that nothing else holds, as a view of `tensor`.
void redress(at::Tensor& view, const at::Tensor& tensor, bool resizable) {
  c10::TensorImpl* impl = view.unsafeGetTensorImpl();
  const c10::TensorImpl* source = tensor.unsafeGetTensorImpl();
  c10::StorageImpl* alias = impl->unsafe_storage().unsafeGetStorageImpl();
  // (Null for a tensor without storage: redress_changed's storage() raises for it.)
  c10::StorageImpl* storage = source->unsafe_storage().unsafeGetStorageImpl();
  const bool unchanged =
      storage != nullptr && alias->data() == storage->mutable_data() &&
      alias->nbytes() == storage->nbytes() && alias->allocator() == alias_allocator(resizable) &&
      alias->resizable() == resizable && impl->dtype() == source->dtype() &&
      same_sizes_and_strides(impl, source) && impl->storage_offset() == source->storage_offset() &&
      impl->is_conj() == source->is_conj() && impl->is_neg() == source->is_neg();
  if (!unchanged) redress_changed(view, tensor, resizable);
}

// Whether `view`, made by host_view, can be re-dressed as a new one: only this reference to it
// and to its storage, and nothing a kernel could have attached (autograd metadata, a Python
// object, a copy-on-write or owning DataPtr, a materializer) or changed beyond what redress()
// resets. A view made in another inference mode has other dispatch keys than a new one would.
bool can_redress(const at::Tensor& view, bool inference_mode) {
  c10::TensorImpl* impl = view.unsafeGetTensorImpl();
  const c10::StorageImpl* alias = impl->unsafe_storage().unsafeGetStorageImpl();
  if (alias == nullptr) return false;
  // The storage's counts are read through the view's own reference, borrowed without touching
  // the counts (reclaim, then release).
  auto alias_ref = c10::intrusive_ptr<c10::StorageImpl>::reclaim(
      const_cast<c10::StorageImpl*>(alias));
  const bool alias_unshared = alias_ref.use_count() == 1 && alias_ref.weak_use_count() == 1;
  alias_ref.release();
  // (The view is a plain TensorImpl: host_view made it, and a TensorImpl keeps its type.)
  return view.use_count() == 1 && view.weak_use_count() == 1 && alias_unshared &&
         view.is_cpu() && impl->is_inference() == inference_mode &&
         impl->autograd_meta() == nullptr && impl->pyobj_slot()->load_pyobj() == nullptr &&
         alias->pyobj_slot()->load_pyobj() == nullptr &&
         alias->data_ptr().get_context() == nullptr && !alias->has_materializer() &&
         !impl->is_wrapped_number() && impl->allow_tensor_metadata_change() &&
         !impl->has_symbolic_sizes_strides();
}

// A spare view re-dressed as a view of `tensor`, or an undefined tensor when there is none.
at::Tensor reuse_spare_view(const at::Tensor& tensor, bool resizable, bool inference_mode) {
  auto& spares = spare_views();
  while (!spares.empty()) {
    at::Tensor view = std::move(spares.back());
    spares.pop_back();
    if (view.unsafeGetTensorImpl()->is_inference() != inference_mode) continue;
    redress(view, tensor, resizable);
    return view;
  }
  return at::Tensor();
}

// A new view of `tensor`.
at::Tensor new_host_view(const at::Tensor& tensor, bool resizable) {
  const c10::Storage& storage = tensor.storage();
  c10::Storage alias(c10::Storage::use_byte_size_t(), storage.nbytes(), alias_data(storage),
                     alias_allocator(resizable), resizable);
  // Lazy conjugation and negation are part of the value (ops that understand them, like mm and
  // copy_, receive them unresolved), so the view keeps them.
  return tensor_like(std::move(alias), c10::DispatchKey::CPU, tensor);
}

// A plain dense CPU tensor, as at::empty makes it outside inference mode, that only the caller
// references (no Python object, no other owner): what a CPU kernel's new output usually is.
bool is_fresh_cpu_tensor(const at::Tensor& t) {
  static const c10::DispatchKeySet cpu_dense =
      c10::DispatchKeySet(c10::DispatchKey::CPU) |
      c10::getAutogradRelatedKeySetFromBackend(c10::BackendComponent::CPUBit) |
      c10::getAutocastRelatedKeySetFromBackend(c10::BackendComponent::CPUBit);
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return t.use_count() == 1 && t.weak_use_count() == 1 &&
         typeid(*impl) == typeid(c10::TensorImpl) && impl->key_set() == cpu_dense &&
         impl->pyobj_slot()->load_pyobj() == nullptr && !impl->is_wrapped_number() &&
         impl->allow_tensor_metadata_change();
}

}  // namespace

at::Tensor host_view(const at::Tensor& tensor, bool resizable) {
  return host_view(tensor, resizable, c10::InferenceMode::is_enabled());
}

at::Tensor host_view(const at::Tensor& tensor, bool resizable, bool inference_mode) {
  if (!tensor.defined() || tensor.device().type() != kNeuron) return tensor;
  at::Tensor view = reuse_spare_view(tensor, resizable, inference_mode);
  if (view.defined()) return view;
  return new_host_view(tensor, resizable);
}

void recycle_host_view(at::Tensor view) {
  auto& spares = spare_views();
  if (spares.size() >= kMaxSpareViews || !view.defined()) return;
  if (!can_redress(view, view.unsafeGetTensorImpl()->is_inference())) return;
  spares.push_back(std::move(view));
}

at::Tensor* HostViewSlot::take(const at::Tensor& tensor, bool inference_mode) {
  if (busy_) return nullptr;  // a call on this thread, inside one that holds the slot
  if (view_.defined() && can_redress(view_, inference_mode)) {
    redress(view_, tensor, /*resizable=*/false);
  } else {
    view_ = host_view(tensor, /*resizable=*/false, inference_mode);
  }
  busy_ = true;
  return &view_;
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

namespace {

void adopt_storage_impl(c10::StorageImpl* storage, c10::DeviceIndex device) {
  auto& data_ptr = storage->mutable_data_ptr();
  if (data_ptr.device().type() == kNeuron) return;
  data_ptr.unsafe_set_device(c10::Device(kNeuron, device));
  storage->set_allocator(&device_allocator());
}

}  // namespace

void adopt_storage(const at::Tensor& t, c10::DeviceIndex device) {
  adopt_storage_impl(t.storage().unsafeGetStorageImpl(), device);
}

at::Tensor adopt_host_result(at::Tensor t, c10::DeviceIndex device) {
  if (!t.defined() || on_neuron(t) || !t.device().is_cpu()) return t;
  const c10::Storage& storage = t.storage();  // (checked once: raises for storage-less tensors)
  if (storage.nbytes() == 0) {
    // Zero-byte storages may come from any allocator; give them a neuron identity.
    c10::Storage empty(c10::Storage::use_byte_size_t(), 0,
                       device_allocator().allocate_on(device, 0), &device_allocator(), true);
    return tensor_like(empty, c10::DispatchKey::PrivateUse1, t);
  }
  if (NeuronDeviceAllocator::owns(storage.data_ptr())) {
    adopt_storage_impl(storage.unsafeGetStorageImpl(), device);
    if (is_fresh_cpu_tensor(t)) {
      // Nobody else sees the kernel's output: it becomes the neuron tensor itself, which saves
      // building and freeing a TensorImpl per op. Setting its own storage again makes its
      // device follow the adopted storage; moved, not copied (no reference count traffic).
      auto* impl = t.unsafeGetTensorImpl();
      c10::Storage own = std::move(const_cast<c10::Storage&>(impl->unsafe_storage()));
      impl->set_storage_keep_dtype(std::move(own));
      impl->_change_backend_component_keys(c10::Device(kNeuron, device));
      return t;
    }
    return tensor_like(storage, c10::DispatchKey::PrivateUse1, t);
  }
  // Memory the kernel did not get from the CPU allocator (a cached constant): copy it over.
  at::Tensor out =
      at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::Device(kNeuron, device)));
  host_view(out).copy_(t);
  return out;
}

}  // namespace torch_neuron
