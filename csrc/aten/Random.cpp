// In-place random fills drawn from the neuron device's Philox generator (Note [Philox
// generator], runtime/Generator.h), so torch.neuron.manual_seed() decides the numbers, as
// torch.cuda.manual_seed() does on CUDA. Element i of a fill drawn at offset o is computed from
// the Philox block for counter o + i only, whatever the tensor's strides: values are computed as
// doubles (or int64 for random_) into a contiguous CPU buffer in row-major logical order, then
// copied into the tensor's host view. The argument checks are ATen's own (DistributionTemplates.h),
// so errors read as on the CPU.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

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

using Block = std::array<uint32_t, 4>;

void check_generator(const at::Tensor& self, const std::optional<at::Generator>& gen) {
  // A neuron generator's dispatch key outranks the CPU's, so a random op on a CPU tensor given
  // a neuron generator lands here. Refused as CUDA refuses a CUDA generator there.
  TORCH_CHECK(self.device().type() == kNeuron, "Expected a '", self.device().type(),
              "' device type for generator but found 'neuron'; use a generator of the "
              "tensor's device (torch.Generator(device='", self.device().type(), "'))");
  neuron_generator_for(gen, self.device().index());
}

// [0, 1) with 53 random bits from two words.
inline double unit53(uint32_t lo, uint32_t hi) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

// Fills `self` (a neuron tensor, or a real view of one): element i = value(block(o + i), i),
// computed into a contiguous `buffer_type` buffer. The generator's offset advances in
// predict-only mode too (the numbers are then not drawn), so the offsets stay those of a run
// that computes.
template <class T, class Value>
void philox_fill(const at::Tensor& self, const std::optional<at::Generator>& gen, Value value) {
  NeuronGeneratorImpl* generator = neuron_generator_for(gen, self.device().index());
  const int64_t n = self.numel();
  const uint64_t seed = generator->current_seed();
  const uint64_t offset = generator->reserve(static_cast<uint64_t>(n));
  if (!execution_enabled() || n == 0) return;
  at::Tensor buffer = at::empty({n}, at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value));
  T* out = buffer.data_ptr<T>();
  at::parallel_for(0, n, 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = value(philox4x32_10(offset + static_cast<uint64_t>(i), seed), i);
    }
  });
  host_view(self).copy_(buffer.view(self.sizes()));
}

// ATen's templates call a kernel class template with the RNG type; ours ignores it.
template <class RNG>
struct UniformKernel {
  void operator()(at::TensorIteratorBase& iter, double from, double to,
                  std::optional<at::Generator> gen) {
    const at::Tensor self(iter.tensor_base(0));
    // As many random bits as the dtype's significand holds, so [0, 1) stays below 1.
    int digits = 53;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "uniform_",
                                    [&] { digits = std::numeric_limits<scalar_t>::digits; });
    const double scale = std::ldexp(1.0, -digits);
    const double range = to - from;
    philox_fill<double>(self, gen, [&](const Block& b, int64_t) {
      const double u = digits == 53 ? unit53(b[0], b[1])
                                    : static_cast<double>(b[0] >> (32 - digits)) * scale;
      return from + u * range;
    });
  }
};

template <class RNG>
struct NormalKernel {
  void operator()(const at::TensorBase& base, double mean, double std,
                  std::optional<at::Generator> gen) {
    const at::Tensor self(base);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(), "normal_",
                                    [] {});
    // Box-Muller from one block: u1 from words 0-1, u2 from words 2-3 (one element, one counter).
    philox_fill<double>(self, gen, [&](const Block& b, int64_t) {
      const double u1 = 1.0 - unit53(b[0], b[1]);  // (0, 1], so the log is finite
      const double u2 = unit53(b[2], b[3]);
      return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    });
  }
};

template <class RNG>
struct ExponentialKernel {
  void operator()(at::TensorIteratorBase& iter, double lambda, std::optional<at::Generator> gen) {
    const at::Tensor self(iter.tensor_base(0));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, self.scalar_type(),
                                    "exponential_", [] {});
    philox_fill<double>(self, gen, [&](const Block& b, int64_t) {
      return -std::log1p(-unit53(b[0], b[1])) / lambda;  // u in [0, 1): finite, >= 0
    });
  }
};

template <class RNG>
struct BernoulliScalarKernel {
  void operator()(const at::TensorBase& base, double p, std::optional<at::Generator> gen) {
    const at::Tensor self(base);
    philox_fill<double>(self, gen, [&](const Block& b, int64_t) {
      return unit53(b[0], b[1]) < p ? 1.0 : 0.0;
    });
  }
};

template <class RNG>
struct BernoulliTensorKernel {
  void operator()(const at::TensorBase& base, const at::TensorBase& p_base,
                  std::optional<at::Generator> gen) {
    const at::Tensor self(base);
    const at::Tensor p(p_base);
    at::Tensor probabilities;
    if (execution_enabled()) {
      const at::Tensor host_p = p.device().type() == kNeuron ? host_view(p) : p;
      probabilities = host_p.to(at::kDouble).expand(self.sizes()).contiguous();
    }
    const double* prob = probabilities.defined() ? probabilities.data_ptr<double>() : nullptr;
    philox_fill<double>(self, gen, [&](const Block& b, int64_t i) {
      return unit53(b[0], b[1]) < prob[i] ? 1.0 : 0.0;
    });
  }
};

// random_: values in int64, with PyTorch's ranges (ATen's uniform_int* transformations).
template <class RNG>
struct RandomKernel {
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const at::Tensor self(iter.tensor_base(0));
    bool wide = false;   // 64 random bits (double, int64) or 32
    uint64_t modulus = 0;  // 0: bool (low bit)
    AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, self.scalar_type(),
                               "random_", [&] {
      wide = std::is_same_v<scalar_t, double> || std::is_same_v<scalar_t, int64_t>;
      if constexpr (std::is_same_v<scalar_t, bool>) {
        modulus = 0;
      } else if constexpr (std::is_floating_point_v<scalar_t> ||
                           std::is_same_v<scalar_t, at::Half> ||
                           std::is_same_v<scalar_t, at::BFloat16>) {
        modulus = (uint64_t{1} << std::numeric_limits<scalar_t>::digits) + 1;
      } else {
        modulus = static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;
      }
    });
    philox_fill<int64_t>(self, gen, [&](const Block& b, int64_t) -> int64_t {
      const uint64_t v = wide ? (static_cast<uint64_t>(b[1]) << 32 | b[0]) : b[0];
      return modulus == 0 ? static_cast<int64_t>(v & 1) : static_cast<int64_t>(v % modulus);
    });
  }
};

template <class RNG>
struct RandomFromToKernel {
  void operator()(at::TensorIteratorBase& iter, uint64_t range, int64_t base,
                  std::optional<at::Generator> gen) {
    const at::Tensor self(iter.tensor_base(0));
    const bool wide = range >= (uint64_t{1} << 32);
    philox_fill<int64_t>(self, gen, [&](const Block& b, int64_t) -> int64_t {
      const uint64_t v = wide ? (static_cast<uint64_t>(b[1]) << 32 | b[0]) : b[0];
      return static_cast<int64_t>(v % range + static_cast<uint64_t>(base));
    });
  }
  // [int64 min, int64 max]: all 64 bits.
  void operator()(at::TensorIteratorBase& iter, std::optional<at::Generator> gen) {
    const at::Tensor self(iter.tensor_base(0));
    philox_fill<int64_t>(self, gen, [&](const Block& b, int64_t) -> int64_t {
      return static_cast<int64_t>(static_cast<uint64_t>(b[1]) << 32 | b[0]);
    });
  }
};

namespace templates = at::native::templates;

// Every random fill is charged as one VectorE pass moving `bytes`, whether drawn or not.
at::Tensor& charged(at::Tensor& self, const OpHandle& op, uint64_t bytes) {
  charge(self.device().index(), op, vector_pass(self, bytes),
         [&] { return describe_tensors({self}); });
  return self;
}

// The generator is checked in predict-only mode too (check_generator).
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::normal_");
  check_generator(self, gen);
  templates::normal_impl_<NormalKernel, NeuronGeneratorImpl>(self, mean, std, gen);
  return charged(self, op, self.nbytes());
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::uniform_");
  check_generator(self, gen);
  templates::uniform_impl_<UniformKernel, NeuronGeneratorImpl>(self, from, to, gen);
  return charged(self, op, self.nbytes());
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  check_generator(self, gen);
  templates::random_impl<RandomKernel, NeuronGeneratorImpl>(self, gen);
  return charged(self, op, self.nbytes());
}

at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  check_generator(self, gen);
  templates::random_from_to_impl<RandomFromToKernel, NeuronGeneratorImpl>(self, 0, to, gen);
  return charged(self, op, self.nbytes());
}

at::Tensor& random_from(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> gen) {
  static const OpHandle op("aten::random_");
  check_generator(self, gen);
  templates::random_from_to_impl<RandomFromToKernel, NeuronGeneratorImpl>(self, from, to, gen);
  return charged(self, op, self.nbytes());
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::bernoulli_");
  check_generator(self, gen);
  templates::bernoulli_impl_<BernoulliScalarKernel, NeuronGeneratorImpl>(self, p, gen);
  return charged(self, op, self.nbytes());
}

// Probabilities from a tensor (torch.bernoulli(p) lands here), which may be a neuron or CPU tensor.
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen) {
  TORCH_CHECK(p.device() == self.device() || p.device().is_cpu(),
              "bernoulli_: the probabilities are on ", p.device(), " but the tensor is on ",
              self.device());
  static const OpHandle op("aten::bernoulli_");
  check_generator(self, gen);
  templates::bernoulli_impl_<BernoulliTensorKernel, NeuronGeneratorImpl>(self, p, gen);
  return charged(self, op, self.nbytes() + p.nbytes());
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  static const OpHandle op("aten::exponential_");
  check_generator(self, gen);
  templates::exponential_impl_<ExponentialKernel, NeuronGeneratorImpl>(self, lambd, gen);
  return charged(self, op, self.nbytes());
}

// Note [Dropout draws from the neuron generator]
// native_dropout (what F.dropout and nn.Dropout call on accelerators) has no Generator argument:
// its CPU kernel draws its mask from the CPU's default generator. Run through host execution,
// dropout on neuron would therefore ignore torch.neuron.manual_seed/set_rng_state and consume
// the CPU's random stream (shifting DataLoader shuffles, for one). This kernel is ATen's CPU
// kernel (native_dropout_cpu: a bool mask from bernoulli(1 - p), then input * mask * scale) on
// device memory, with the mask drawn from the device's Philox generator (element i keeps with
// probability 1 - p from counter offset + i, Note [Philox generator]), as CUDA draws from its own.
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
  const double keep = 1. - p;
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  // Draws the mask, or in predict-only mode only advances the offset.
  philox_fill<double>(mask, std::nullopt, [&](const Block& b, int64_t) {
    return unit53(b[0], b[1]) < keep ? 1.0 : 0.0;
  });
  if (!execution_enabled()) {  // Note [Predict-only execution]: charged, not drawn
    at::Tensor output = at::empty_like(input);
    charge_dropout(device, input, output, mask);
    return {output, mask};
  }
  const double scale = keep == 0 ? 0. : 1. / keep;  // p == 1 drops everything, without NaNs
  at::Tensor output;
  {
    AllocateOnDevice allocate_on(device);
    const at::Tensor host_mask = host_view(mask);
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
