#include "distributed/HostStaging.h"

#include "runtime/HostView.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {

at::Tensor HostStaging::stage(const at::Tensor& tensor, bool is_output) {
  if (tensor.device().type() == kNeuron) staged_.push_back(tensor);
  // Not recycled (recycle_host_view): Gloo's worker threads use the view.
  at::Tensor host = host_view(tensor);
  if (host.is_contiguous()) return as_gloo_dtype(host);
  at::Tensor buffer = host.contiguous();
  if (is_output) copy_back_.emplace_back(tensor, buffer);
  return as_gloo_dtype(buffer);
}

at::Tensor HostStaging::input(const at::Tensor& tensor) { return stage(tensor, false); }
at::Tensor HostStaging::output(const at::Tensor& tensor) { return stage(tensor, true); }

std::vector<at::Tensor> HostStaging::inputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(input(t));
  return out;
}

std::vector<at::Tensor> HostStaging::outputs(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) out.push_back(output(t));
  return out;
}

std::vector<std::vector<at::Tensor>> HostStaging::outputs(
    const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& list : lists) out.push_back(outputs(list));
  return out;
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
