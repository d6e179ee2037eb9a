// The default random number generator of each neuron device, and the counter-based random
// numbers it defines.
//
// Note [Philox generator]
// A neuron generator is a (seed, offset) pair, as CUDA's is, and its numbers come from the
// counter-based generator Philox4x32-10 (J. K. Salmon, M. A. Moraes, R. O. Dror, D. E. Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11; our own implementation in
// Generator.cpp). Element i (row-major logical order) of a random op drawn at offset o is a
// function of the Philox block for counter o + i keyed by the seed, and of nothing else; the op
// then advances the offset by its element count rounded up to a multiple of 4. So a tensor drawn
// in pieces at offsets o, o + m, o + 2m, ... equals the whole tensor drawn at o: what DTensor's
// OffsetBasedRNGTracker relies on for Shard(0) placements (it treats the state as CUDA's, 16 bytes
// [seed: uint64][offset: int64], see get_state()). The stream is reproducible per seed, and is not
// the CPU's (nor CUDA's) stream of numbers.
//
// Random ops without a Philox kernel (randperm, multinomial, poisson, log_normal_, cauchy_, ...)
// run ATen's CPU kernels through host execution with a fresh CPU generator seeded from
// mix(seed, offset) (see host_generator_for), and advance the offset by kHostOpOffsetStep, so
// they too are a function of (seed, offset).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstdint>

namespace torch_neuron {

class NeuronGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  // manual_seed: sets the seed and resets the offset to 0.
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;  // a non-deterministic seed, offset 0
  // 16 bytes: [seed: uint64][offset: uint64], little endian (CUDA's Philox state layout).
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Takes the offset for an op on `numel` elements and advances it by numel rounded up to 4.
  // Returns the op's starting offset. Thread-safe (takes mutex_).
  uint64_t reserve(uint64_t numel);

  static c10::DeviceType device_type();
  static constexpr size_t kStateBytes = 16;

 private:
  NeuronGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// Philox4x32-10: the 4 32-bit words of the block for `counter` under `key` (the seed).
std::array<uint32_t, 4> philox4x32_10(uint64_t counter, uint64_t key);

// How far a host-executed random op (one without a Philox kernel) advances the offset.
constexpr uint64_t kHostOpOffsetStep = 4;

// Default generator of a device (the current device for -1).
const at::Generator& default_generator(c10::DeviceIndex device = -1);
at::Generator new_generator(c10::DeviceIndex device = -1);

// The neuron generator a random kernel should use: `gen` if given (must be a neuron generator),
// else the default generator of `device`.
NeuronGeneratorImpl* neuron_generator_for(const std::optional<at::Generator>& gen,
                                          c10::DeviceIndex device);

// For random ops run by ATen's CPU kernels (host execution): a new CPU generator seeded from
// the neuron generator's (seed, offset), whose offset then advances by kHostOpOffsetStep.
at::Generator host_generator_for(const std::optional<at::Generator>& gen,
                                 c10::DeviceIndex device);

}  // namespace torch_neuron
