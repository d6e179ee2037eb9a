// The default random number generator of each neuron device.
//
// Random kernels compute on the host (device memory is host memory), with ATen's CPU kernels,
// and those only accept a CPU generator. So a neuron generator owns a CPU generator (the same
// Mersenne Twister state CPU uses) and hands it to the kernels; seeding, state save/restore
// and cloning all go to it. One seed therefore gives the same stream of numbers every run.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_neuron {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The CPU generator that random kernels draw from.
  const at::Generator& host_generator() const { return host_; }
  static c10::DeviceType device_type();

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  at::Generator host_;
};

// Default generator of a device (the current device for -1).
const at::Generator& default_generator(c10::DeviceIndex device = -1);
at::Generator new_generator(c10::DeviceIndex device = -1);

// The generator a random kernel should use: `gen` if given (must be a neuron generator), else
// the default generator of `device`.
const at::Generator& host_generator_for(const std::optional<at::Generator>& gen,
                                        c10::DeviceIndex device);

}  // namespace torch_neuron
