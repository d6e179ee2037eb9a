#include "distributed/HostStaging.h"

#include <ATen/ops/empty.h>

#include "aten/KnownValues.h"
#include "aten/PredictOnly.h"

#include "runtime/HostView.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {

at::Tensor HostStaging::stage(const at::Tensor& tensor, Use use) {
  const bool neuron = tensor.device().type() == kNeuron;
  if (neuron) {
    staged_.push_back(tensor);
    if (use != Use::Read) written_.push_back(tensor);
  }
  if (neuron && !execution_enabled()) {
    // Predict-only: a meta tensor of the same geometry stands in for the bytes unless the
    // tensor can take part with values (Note [Known values in predict-only mode]).
    const bool usable = use == Use::Write ? tensor.nbytes() <= kKnownValuesMaxBytes
                                          : torch_neuron::values_known(tensor);
    if (!usable) {
      values_known_ = false;
      return as_gloo_dtype(at::empty(tensor.sizes(), tensor.options().device(at::kMeta)));
    }
  }
  // Not recycled (recycle_host_view): Gloo's worker threads use the view.
  at::Tensor host = host_view(tensor);
  if (host.is_contiguous()) return as_gloo_dtype(host);
  at::Tensor buffer = host.contiguous();
  if (use != Use::Read) copy_back_.emplace_back(tensor, buffer);
  return as_gloo_dtype(buffer);
}

at::Tensor HostStaging::input(const at::Tensor& tensor) { return stage(tensor, Use::Read); }
at::Tensor HostStaging::output(const at::Tensor& tensor) { return stage(tensor, Use::Write); }

std::vector<at::Tensor> HostStaging::inputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(stage(t, Use::Read));
  return out;
}

std::vector<at::Tensor> HostStaging::outputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(stage(t, Use::Write));
  return out;
}

std::vector<at::Tensor> HostStaging::in_outs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(stage(t, Use::ReadWrite));
  return out;
}

std::vector<std::vector<at::Tensor>> HostStaging::outputs(
    const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& list : lists) out.push_back(outputs(list));
  return out;
}

void HostStaging::mark_outputs_known() const {
  for (const auto& t : written_) mark_values_known(t);
}

void HostStaging::finish() {
  for (auto& [tensor, buffer] : copy_back_) {
    host_view(tensor).copy_(buffer);
  }
  copy_back_.clear();
}

void HostStaging::record_stream(const c10::Stream& stream) const {
  for (const auto& t : staged_) {
    if (t.device() != stream.device()) continue;
    device_allocator().recordStream(t.storage().data_ptr(), stream);
  }
}

at::Tensor as_gloo_dtype(const at::Tensor& host) {
  return at::isFloat8Type(host.scalar_type()) ? host.view(at::kByte) : host;
}

}  // namespace torch_neuron
