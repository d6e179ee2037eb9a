// Copies into, out of and between neuron devices. The bytes move with ATen's CPU copy over
// host views (which handles dtype conversion, broadcasting and any strides); the simulated
// clock is charged what the DMA would take: over the host link for host <-> device, over HBM on
// one chip, or over NeuronLink between chips.
#include <ATen/core/Tensor.h>
#include <ATen/ops/copy.h>
#include <torch/library.h>

#include <optional>

#include <trnsim/transfer.h>

#include "runtime/HostView.h"
#include "aten/Charge.h"
#include "aten/KnownValues.h"
#include "aten/OpWork.h"
#include "aten/OpTracking.h"
#include "aten/PredictOnly.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

// Note [Copies between devices]
// A copy from one neuron device to another orders like CUDA's peer copy (ATen's
// copy_device_to_device): it runs on the source device's current stream, after that stream's
// earlier work and after the destination's current stream has reached its own clock (a
// two-way barrier: nothing still reads or writes the destination), and the destination's
// current stream waits for the copy's end before its later work. So a model split across
// devices in one process is predicted as its stages one after another plus the transfers, not
// as the longest stage. Both streams' clocks are one simulated timeline (Note [Simulated time]).

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
  // Note [Predict-only execution]: the DMA is charged, no bytes move; the CPU gets none,
  // except the known values of small uploads (Note [Known values in predict-only mode]).
  const uint64_t bytes = static_cast<uint64_t>(dst.numel()) * self.element_size();
  const bool keep_values =
      !execution_enabled() && bytes <= kKnownValuesMaxBytes &&
      (kind == trnsim::CopyKind::HostToDevice || (on_neuron(self) && values_known(self)));
  std::optional<ComputeKnownValues> computing;
  if (keep_values) computing.emplace();
  const bool execute = execution_enabled();
  if (!execute && kind == trnsim::CopyKind::DeviceToHost) {
    refuse_without_values("copying a neuron tensor to the CPU (.cpu(), .to(\"cpu\"), .numpy(), "
                          "printing it)");
  }
  // The DMA runs on the current stream of the device that issues it: the destination device
  // for uploads, the source device for downloads and copies between devices (Note [Copies
  // between devices]).
  const auto& issuer = on_neuron(self) ? self : dst;
  auto& queue = current_queue(issuer.device().index());
  trnsim::Queue* dst_queue = nullptr;
  if (on_neuron(self) && on_neuron(dst) && self.device().index() != dst.device().index()) {
    dst_queue = &current_queue(dst.device().index());
    queue.wait_until(dst_queue->now_ns());
  }
  if (execute) {
    at::Tensor dst_view = host_view(dst);
    at::Tensor src_view = host_view(self);
    if (self.storage().is_alias_of(dst.storage())) {
      // One storage, one alias: ATen's copy then sees the overlap (and refuses a partial one).
      src_view.unsafeGetTensorImpl()->set_storage_keep_dtype(dst_view.storage());
    }
    dst_view.copy_(src_view, non_blocking);
    // The source first: it may hold the destination's alias, which then is recycled too.
    recycle_host_view(std::move(src_view));
    recycle_host_view(std::move(dst_view));
  } else {
    // The shapes still have to fit, as the copy would check.
    meta_like(dst).copy_(meta_like(self));
  }
  static const OpHandle op("aten::copy_");
  const double end = charge(queue, op.name, op.counter, {trnsim::Copy{kind, bytes}},
                            [&] { return describe_tensors({self}) + " -> " + dst.device().str(); });
  if (dst_queue != nullptr) dst_queue->wait_until(end);
  if (keep_values && on_neuron(dst)) mark_values_known(dst);
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

// A lazily conjugated or negated source reaches copy_from as it is: the host views carry the
// bits and ATen's CPU copy resolves them. Without this, the Conjugate/Negative fallbacks would
// materialize the source with clone(), whose copy_ calls _copy_from again, endlessly.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_neuron
