// Tensor.record_stream(s): tells the caching HBM allocator that stream `s` uses the tensor, so
// its block is not reused before that stream's work is done (Note [Caching HBM allocator]).
// Only bookkeeping: nothing runs on the device.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "runtime/DeviceAllocator.h"

namespace torch_neuron {
namespace {

void record_stream(at::Tensor& self, c10::Stream stream) {
  device_allocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", TORCH_FN(record_stream)); }

}  // namespace torch_neuron
