// In-place random fills drawn from the neuron device's generator (see runtime/Generator.h), so
// torch.neuron.manual_seed() decides the numbers, as torch.cuda.manual_seed() does on CUDA.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "aten/HostView.h"
#include "aten/Launch.h"
#include "runtime/Generator.h"

namespace torch_neuron {
namespace {

const at::Generator& gen_for(const at::Tensor& self, const std::optional<at::Generator>& gen) {
  return host_generator_for(gen, self.device().index());
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  host_view(self).normal_(mean, std, gen_for(self, gen));
  launch_streaming("aten::normal_", self, self.nbytes());
  return self;
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  host_view(self).uniform_(from, to, gen_for(self, gen));
  launch_streaming("aten::uniform_", self, self.nbytes());
  return self;
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  host_view(self).random_(gen_for(self, gen));
  launch_streaming("aten::random_", self, self.nbytes());
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  host_view(self).random_(to, gen_for(self, gen));
  launch_streaming("aten::random_", self, self.nbytes());
  return self;
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  host_view(self).random_(from, to, gen_for(self, gen));
  launch_streaming("aten::random_", self, self.nbytes());
  return self;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  host_view(self).bernoulli_(p, gen_for(self, gen));
  launch_streaming("aten::bernoulli_", self, self.nbytes());
  return self;
}

// Probabilities from a tensor (torch.bernoulli(p) lands here), which may be a neuron or CPU tensor.
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  TORCH_CHECK(p.device() == self.device() || p.device().is_cpu(),
              "bernoulli_: the probabilities are on ", p.device(), " but the tensor is on ",
              self.device());
  host_view(self).bernoulli_(host_view(p), gen_for(self, gen));
  launch_streaming("aten::bernoulli_", self, self.nbytes() + p.nbytes());
  return self;
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  host_view(self).exponential_(lambd, gen_for(self, gen));
  launch_streaming("aten::exponential_", self, self.nbytes());
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("random_", TORCH_FN(random_));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("exponential_", TORCH_FN(exponential_));
}

}  // namespace torch_neuron
