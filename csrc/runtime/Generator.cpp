#include "runtime/Generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

#include "runtime/Runtime.h"

namespace torch_neuron {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNeuron, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) { host_.set_current_seed(seed); }
void NeuronGeneratorImpl::set_offset(uint64_t offset) { host_.set_offset(offset); }
uint64_t NeuronGeneratorImpl::get_offset() const { return host_.get_offset(); }
uint64_t NeuronGeneratorImpl::current_seed() const { return host_.current_seed(); }
uint64_t NeuronGeneratorImpl::seed() { return host_.seed(); }

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  host_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  return host_.unsafeGetGeneratorImpl()->get_state();
}

c10::DeviceType NeuronGeneratorImpl::device_type() { return kNeuron; }

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index());
  copy->host_ = host_.clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  // Never destroyed, like CPU's default generator.
  static auto* generators = [] {
    auto* v = new std::vector<at::Generator>();
    for (c10::DeviceIndex i = 0; i < visible_device_count(); ++i) {
      v->push_back(at::make_generator<NeuronGeneratorImpl>(i));
    }
    return v;
  }();
  return (*generators)[index];
}

at::Generator new_generator(c10::DeviceIndex index) {
  index = resolve_device(index);
  check_device_index(index);
  return at::make_generator<NeuronGeneratorImpl>(index);
}

const at::Generator& host_generator_for(const std::optional<at::Generator>& gen,
                                        c10::DeviceIndex device) {
  if (gen.has_value() && gen->defined()) {
    TORCH_CHECK(gen->device().type() == kNeuron,
                "a random op on neuron needs a neuron generator, got one for ", gen->device(),
                "; create it with torch.Generator(device='neuron')");
    return gen->get<NeuronGeneratorImpl>()->host_generator();
  }
  return default_generator(device).get<NeuronGeneratorImpl>()->host_generator();
}

}  // namespace torch_neuron
