// Allocating ops: empty and empty_strided on a neuron device, from the caching HBM allocator.
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/HostExecution.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

c10::Device target_device(std::optional<c10::Device> device) {
  // Every neuron op starts from a tensor made here, so this is the moment to make sure the
  // host kernels are in place (Note [Composite kernels on neuron]); after the first call it is
  // one atomic load.
  register_host_kernels();
  const auto index = resolve_device(device.has_value() ? device->index() : -1);
  check_device_index(index);
  return c10::Device(kNeuron, index);
}

// The allocator serves the current device: switch only when the target is another one.
std::optional<c10::Device> guard_for(const c10::Device& device) {
  if (device.index() == current_device()) return std::nullopt;
  return device;
}

void check_layout(std::optional<c10::Layout> layout) {
  TORCH_CHECK(!layout.has_value() || *layout == c10::kStrided,
              "neuron supports only strided (dense) tensors, got layout ", *layout,
              "; convert sparse tensors with .to_dense() first");
}

// Sparse layouts dispatch to their own keys; without a kernel there, PyTorch's error would name
// an internal "Sparseneuron" backend. Say what is wrong instead.
at::Tensor refuse_sparse_empty(c10::IntArrayRef, std::optional<c10::ScalarType>,
                               std::optional<c10::Layout> layout, std::optional<c10::Device>,
                               std::optional<bool>, std::optional<c10::MemoryFormat>) {
  check_layout(layout.value_or(c10::kSparse));
  TORCH_INTERNAL_ASSERT(false, "unreachable: a sparse empty with a strided layout");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_layout(layout);
  const c10::OptionalDeviceGuard guard(guard_for(target_device(device)));
  return at::detail::empty_generic(size, &device_allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_layout(layout);
  const c10::OptionalDeviceGuard guard(guard_for(target_device(device)));
  return at::detail::empty_strided_generic(size, stride, &device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(refuse_sparse_empty));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(refuse_sparse_empty));
}

}  // namespace torch_neuron
