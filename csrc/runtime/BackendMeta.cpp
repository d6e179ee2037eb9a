// Backend metadata of neuron tensors: named boolean flags a tensor carries beside its data
// (c10::BackendMeta), set and read with torch._C._set_tensor_metadata/_get_tensor_metadata and
// kept by torch.save/torch.load (PyTorch's pickler asks the functions registered here), by
// detach() and shallow copies (TensorImpl clones it), and by FakeTensor conversion. PyTorch's
// own keys ("conj", "neg") stay PyTorch's: only other keys are stored here.
#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>
#include <unordered_map>

#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

struct NeuronBackendMeta final : c10::BackendMeta {
  std::map<std::string, bool> flags;  // ordered: the same metadata serializes the same way

  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>&) const override {
    auto copy = c10::make_intrusive<NeuronBackendMeta>();
    copy->flags = flags;
    return copy;
  }
};

bool pytorch_key(const std::string& key) { return key == "conj" || key == "neg"; }

void get_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& out) {
  auto* meta = dynamic_cast<NeuronBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) return;
  for (const auto& [key, value] : meta->flags) out[key] = value;
}

void set_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& in) {
  std::map<std::string, bool> flags;
  for (const auto& [key, value] : in) {
    if (!pytorch_key(key)) flags[key] = value;
  }
  if (flags.empty()) return;
  auto* impl = t.unsafeGetTensorImpl();
  auto* meta = dynamic_cast<NeuronBackendMeta*>(impl->get_backend_meta());
  if (meta == nullptr) {
    auto fresh = c10::make_intrusive<NeuronBackendMeta>();
    meta = fresh.get();
    impl->set_backend_meta(std::move(fresh));
  }
  for (const auto& [key, value] : flags) meta->flags[key] = value;
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(kNeuron, &get_metadata, &set_metadata);
  return true;
}();

}  // namespace
}  // namespace torch_neuron
