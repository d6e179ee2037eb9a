#include "aten/DtypePolicy.h"

#include <ATen/ops/aminmax.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <limits>

#include "aten/TensorArguments.h"
#include "runtime/HostView.h"
#include "runtime/Settings.h"

namespace torch_neuron {
namespace {

// -1: not read yet; then a Float64Mode.
std::atomic<int> mode{-1};

// -1: not read yet; then 0 or 1.
std::atomic<int> decompose_complex{-1};
std::atomic<bool> int64_warned{false};

bool overflows_int32(const at::Tensor& t) {
  if (!t.defined() || t.scalar_type() != at::kLong || t.numel() == 0) return false;
  auto [lo, hi] = at::aminmax(host_view(t));
  return lo.item<int64_t>() < std::numeric_limits<int32_t>::min() ||
         hi.item<int64_t>() > std::numeric_limits<int32_t>::max();
}

}  // namespace

Float64Mode float64_mode() {
  // Read when first needed, so that a bad value raises a Python error naming the variable
  // instead of failing the library's load.
  if (mode < 0) {
    mode = static_cast<int>(settings::read_text("TORCH_NEURON_FLOAT64") == "exact"
                                ? Float64Mode::Exact
                                : Float64Mode::Narrow);
  }
  return static_cast<Float64Mode>(mode.load());
}
void set_float64_mode(Float64Mode m) {
  settings::set_from_api("TORCH_NEURON_FLOAT64", m == Float64Mode::Exact ? "exact" : "narrow");
  mode = static_cast<int>(m);
}
bool complex_decompose() {
  if (decompose_complex < 0) {
    decompose_complex = settings::read_bool("TORCH_NEURONX_COMPLEX_DECOMPOSE") ? 1 : 0;
  }
  return decompose_complex == 1;
}
void set_complex_decompose(bool on) {
  settings::set_from_api("TORCH_NEURONX_COMPLEX_DECOMPOSE", on ? "1" : "0");
  decompose_complex = on ? 1 : 0;
}

void warn_float64_narrowing() {
  TORCH_WARN_ONCE(
      "neuron computes float64 ops in float32, as Trainium has no float64 arithmetic "
      "(TorchNeuron does the same), so results can differ from CPU. Set "
      "TORCH_NEURON_FLOAT64=exact or call torch_neuron.set_float64_mode('exact') to compute "
      "float64 exactly on the host.");
}

void warn_if_int64_overflows(const std::string& op_name, c10::ArrayRef<c10::IValue> outputs) {
  for (const auto& v : outputs) {
    if (v.isTensor()) warn_if_int64_overflows(op_name, v.toTensor());
  }
}

void warn_if_int64_overflows(const std::string& op_name, const at::Tensor& output) {
  if (int64_warned || !overflows_int32(output)) return;
  int64_warned = true;
  TORCH_WARN("neuron: ", op_name, " produced an int64 value outside the int32 range. "
             "Trainium computes integers in 32 bits, so on hardware this value would "
             "overflow; here it is kept exact. (Warned once.)");
}


bool complex_round_trip(c10::ArrayRef<c10::IValue> arguments) {
  bool complex = false;
  bool undecomposable = false;
  for_each_tensor_argument(arguments, [&](const at::Tensor& t) {
    if (!on_neuron(t) || !t.is_complex()) return;
    complex = true;
    undecomposable = undecomposable || t.scalar_type() != at::kComplexFloat;
  });
  return complex && (!complex_decompose() || undecomposable);
}

}  // namespace torch_neuron
