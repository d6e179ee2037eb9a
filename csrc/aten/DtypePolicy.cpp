#include "aten/DtypePolicy.h"

#include <ATen/ops/aminmax.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <limits>

#include "aten/HostView.h"

namespace torch_neuron {
namespace {

Float64Mode mode_from_env() {
  const char* value = std::getenv("TORCH_NEURON_FLOAT64");
  return value != nullptr && std::strcmp(value, "exact") == 0 ? Float64Mode::Exact
                                                               : Float64Mode::Narrow;
}

std::atomic<Float64Mode> mode{mode_from_env()};

// TorchNeuron's switch: "0"/"false" turns complex decomposition off; unset or anything else
// keeps TorchNeuron's default for PyTorch >= 2.13 (on). Read at load, as TorchNeuron reads it
// at import.
bool complex_decompose_from_env() {
  const char* value = std::getenv("TORCH_NEURONX_COMPLEX_DECOMPOSE");
  if (value == nullptr) return true;
  return !(std::strcmp(value, "0") == 0 || strcasecmp(value, "false") == 0);
}

std::atomic<bool> decompose_complex{complex_decompose_from_env()};
std::atomic<bool> int64_warned{false};

bool overflows_int32(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kLong || t.numel() == 0) return false;
  auto [lo, hi] = at::aminmax(host_view(t));
  return lo.item<int64_t>() < std::numeric_limits<int32_t>::min() ||
         hi.item<int64_t>() > std::numeric_limits<int32_t>::max();
}

}  // namespace

Float64Mode float64_mode() { return mode; }
void set_float64_mode(Float64Mode m) { mode = m; }
bool complex_decompose() { return decompose_complex; }
void set_complex_decompose(bool on) { decompose_complex = on; }

void warn_float64_narrowing() {
  TORCH_WARN_ONCE(
      "neuron computes float64 ops in float32, as Trainium has no float64 arithmetic "
      "(TorchNeuron does the same), so results can differ from CPU. Set "
      "TORCH_NEURON_FLOAT64=exact or call torch_neuron.set_float64_mode('exact') to compute "
      "float64 exactly on the host.");
}

void warn_if_int64_overflows(const std::string& op_name, c10::ArrayRef<c10::IValue> outputs) {
  if (int64_warned) return;
  for (const auto& v : outputs) {
    if (v.isTensor() && overflows_int32(v.toTensor())) {
      int64_warned = true;
      TORCH_WARN("neuron: ", op_name, " produced an int64 value outside the int32 range. "
                 "Trainium computes integers in 32 bits, so on hardware this value would "
                 "overflow; here it is kept exact. (Warned once.)");
      return;
    }
  }
}

}  // namespace torch_neuron
