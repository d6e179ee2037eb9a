// In-place random fills drawn from the neuron device's generator (see runtime/Generator.h), so
// torch.neuron.manual_seed() decides the numbers, as torch.cuda.manual_seed() does on CUDA.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include "aten/DtypePolicy.h"
#include "aten/Charge.h"
#include "aten/OpWork.h"
#include "runtime/HostView.h"
#include "aten/PredictOnly.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/Generator.h"
#include "runtime/Runtime.h"

namespace torch_neuron {
namespace {

const at::Generator& gen_for(const at::Tensor& self, const std::optional<at::Generator>& gen) {
  // A neuron generator's dispatch key outranks the CPU's, so a random op on a CPU tensor given
  // a neuron generator lands here. Refused as CUDA refuses a CUDA generator there.
  TORCH_CHECK(self.device().type() == kNeuron, "Expected a '", self.device().type(),
              "' device type for generator but found 'neuron'; use a generator of the "
              "tensor's device (torch.Generator(device='", self.device().type(), "'))");
  return host_generator_for(gen, self.device().index());
}

// A random fill of `self`: `draw` writes its host view (not in predict-only mode), and the
// fill is charged as one VectorE pass moving `bytes`, whether drawn or not.
template <class Draw>
at::Tensor& random_fill(at::Tensor& self, const OpHandle& op, uint64_t bytes, Draw draw) {
  if (execution_enabled()) draw(host_view(self));
  charge(self.device().index(), op, vector_pass(self, bytes),
         [&] { return describe_tensors({self}); });
  return self;
}

// The generator is checked in predict-only mode too (gen_for).
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::normal_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.normal_(mean, std, generator); });
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::uniform_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.uniform_(from, to, generator); });
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(), [&](at::Tensor view) { view.random_(generator); });
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.random_(to, generator); });
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.random_(from, to, generator); });
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::bernoulli_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.bernoulli_(p, generator); });
}

// Probabilities from a tensor (torch.bernoulli(p) lands here), which may be a neuron or CPU tensor.
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  TORCH_CHECK(p.device() == self.device() || p.device().is_cpu(),
              "bernoulli_: the probabilities are on ", p.device(), " but the tensor is on ",
              self.device());
  static const OpHandle op("aten::bernoulli_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes() + p.nbytes(),
                     [&](at::Tensor view) { view.bernoulli_(host_view(p), generator); });
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::exponential_");
  const at::Generator& generator = gen_for(self, gen);
  return random_fill(self, op, self.nbytes(),
                     [&](at::Tensor view) { view.exponential_(lambd, generator); });
}

// Note [Dropout draws from the neuron generator]
// native_dropout (what F.dropout and nn.Dropout call on accelerators) has no Generator argument:
// its CPU kernel draws its mask from the CPU's default generator. Run through host execution,
// dropout on neuron would therefore ignore torch.neuron.manual_seed/set_rng_state and consume
// the CPU's random stream (shifting DataLoader shuffles, for one). This kernel is ATen's CPU
// kernel (native_dropout_cpu: a bool mask from bernoulli_(1 - p), then input * mask * scale) on
// device memory, with the mask drawn from the device's generator, as CUDA draws from its own.
void charge_dropout(c10::DeviceIndex device, const at::Tensor& input, const at::Tensor& output,
                    const at::Tensor& mask) {
  static const OpHandle op("aten::native_dropout");
  charge(device, op, describe_kernel(OpClass::Vector, op.name, {input}, {output, mask}),
         [&] { return describe_tensors({input}); });
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const auto device = input.device().index();
  if (!execution_enabled()) {  // Note [Predict-only execution]: charged, not drawn
    at::Tensor output = at::empty_like(input);
    at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
    charge_dropout(device, input, output, mask);
    return {output, mask};
  }
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;  // p == 1 drops everything, without NaNs
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  at::Tensor output;
  {
    AllocateOnDevice allocate_on(device);
    const at::Tensor host_mask = host_view(mask);
    host_mask.bernoulli_(keep, host_generator_for(std::nullopt, device));
    // float64 computes in float32, as every device op does (DtypePolicy.h).
    const bool narrow = input.scalar_type() == at::kDouble && float64_mode() == Float64Mode::Narrow;
    if (narrow) warn_float64_narrowing();
    const at::Tensor host_input = narrow ? host_view(input).to(at::kFloat) : host_view(input);
    output = host_input.mul(host_mask).mul_(scale);
    if (narrow) output = output.to(at::kDouble);
  }
  output = adopt_host_result(std::move(output), device);
  charge_dropout(device, input, output, mask);
  return {output, mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", TORCH_FN(native_dropout));
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
