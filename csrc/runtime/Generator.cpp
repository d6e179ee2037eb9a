#include "runtime/Generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/Runtime.h"

namespace torch_neuron {

// Philox4x32-10 (Note [Philox generator]) as specified by Salmon et al. (SC'11), section 3.2:
// a 128-bit counter (here: the 64-bit counter in words 0-1, words 2-3 zero) and a 64-bit key
// (the seed), ten rounds of two 32x32->64 multiplications whose high halves are xored with the
// other counter words and the round key; the key is bumped by the Weyl constants between rounds.
std::array<uint32_t, 4> philox4x32_10(uint64_t counter, uint64_t key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t x0 = static_cast<uint32_t>(counter), x1 = static_cast<uint32_t>(counter >> 32);
  uint32_t x2 = 0, x3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * x0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * x2;
    const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
    const uint32_t y1 = static_cast<uint32_t>(p1);
    const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
    const uint32_t y3 = static_cast<uint32_t>(p0);
    x0 = y0, x1 = y1, x2 = y2, x3 = y3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {x0, x1, x2, x3};
}

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNeuron, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void NeuronGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t NeuronGeneratorImpl::get_offset() const { return offset_; }
uint64_t NeuronGeneratorImpl::current_seed() const { return seed_; }

uint64_t NeuronGeneratorImpl::seed() {
  const uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                  new_state.device().is_cpu(),
              "Expected a neuron RNG state: a uint8 CPU tensor of ", kStateBytes,
              " bytes ([seed: uint64][offset: uint64]), but found a ", new_state.dtype(),
              " tensor on ", new_state.device());
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateBytes,
              "Expected a neuron RNG state of ", kStateBytes,
              " bytes ([seed: uint64][offset: uint64], Philox as on CUDA), but found the input "
              "RNG state size to be ", new_state.numel(),
              " (a CPU generator's state does not fit a neuron one)");
  const at::Tensor contiguous =
      at::Tensor(c10::intrusive_ptr<c10::TensorImpl>::reclaim_copy(
                     const_cast<c10::TensorImpl*>(&new_state)))
          .contiguous();
  const auto* bytes = contiguous.data_ptr<uint8_t>();
  std::memcpy(&seed_, bytes, 8);
  std::memcpy(&offset_, bytes + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)},
                               at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  auto* bytes = state.data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, 8);
  std::memcpy(bytes + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

uint64_t NeuronGeneratorImpl::reserve(uint64_t numel) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t start = offset_;
  offset_ += (numel + 3) / 4 * 4;
  return start;
}

c10::DeviceType NeuronGeneratorImpl::device_type() { return kNeuron; }

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* copy = new NeuronGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
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

NeuronGeneratorImpl* neuron_generator_for(const std::optional<at::Generator>& gen,
                                          c10::DeviceIndex device) {
  if (gen.has_value() && gen->defined()) {
    TORCH_CHECK(gen->device().type() == kNeuron,
                "a random op on neuron needs a neuron generator, got one for ", gen->device(),
                "; create it with torch.Generator(device='neuron')");
    return gen->get<NeuronGeneratorImpl>();
  }
  return default_generator(device).get<NeuronGeneratorImpl>();
}

namespace {
// SplitMix64's finaliser (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
// OOPSLA'14): a bijective 64-bit mix.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

at::Generator host_generator_for(const std::optional<at::Generator>& gen,
                                 c10::DeviceIndex device) {
  NeuronGeneratorImpl* neuron = neuron_generator_for(gen, device);
  const uint64_t seed = neuron->current_seed();
  const uint64_t offset = neuron->reserve(kHostOpOffsetStep);
  // The CPU generator's seed: mix64(mix64(seed) ^ offset), a different MT19937 stream for every
  // (seed, offset) pair.
  return at::make_generator<at::CPUGeneratorImpl>(mix64(mix64(seed) ^ offset));
}

}  // namespace torch_neuron
