// Copies into, out of and between neuron devices. The bytes move with ATen's CPU copy over
// host views (which handles dtype conversion, broadcasting and any strides); the simulated
// clock is charged what the DMA would take: over the host link for host <-> device, over HBM on
// one chip, or over NeuronLink between chips.
#include <ATen/core/Tensor.h>
#include <ATen/ops/copy.h>
#include <torch/library.h>

#include <trnsim/transfer.h>

#include "aten/HostView.h"
#include "aten/OpTracking.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

bool on_neuron(const at::Tensor& t) { return t.device().type() == kNeuron; }

trnsim::CopyKind copy_kind(const at::Tensor& src, const at::Tensor& dst) {
  if (!on_neuron(src)) return trnsim::CopyKind::HostToDevice;
  if (!on_neuron(dst)) return trnsim::CopyKind::DeviceToHost;
  return system().same_chip(src.device().index(), dst.device().index())
             ? trnsim::CopyKind::DeviceToDeviceSameChip
             : trnsim::CopyKind::DeviceToDeviceCrossChip;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // `self` is the source. Both may be neuron (any two devices, like CUDA peer copies) or one
  // may be a CPU tensor; anything else is a device PyTorch does not let us read.
  for (const auto* t : {&self, &dst}) {
    TORCH_CHECK(on_neuron(*t) || t->device().is_cpu(), "cannot copy between ", self.device(),
                " and ", dst.device(), "; move the tensor to the CPU first");
  }
  const auto kind = copy_kind(self, dst);
  // The DMA runs on the current stream of the device that issues it: the destination device
  // for uploads and peer copies, the source device for downloads.
  const auto& issuer = on_neuron(dst) ? dst : self;
  auto& queue = current_queue(issuer.device().index());
  host_view(dst).copy_(host_view(self), non_blocking);
  const uint64_t bytes = static_cast<uint64_t>(dst.numel()) * self.element_size();
  queue.launch("aten::copy_", trnsim::copy_duration_ns(system().instance(), kind, bytes));
  count_executed_op("aten::copy_");
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
}

}  // namespace torch_neuron
