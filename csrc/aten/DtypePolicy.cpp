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

// Read when first needed, so that a bad value raises an error naming the variable.
Float64Mode mode_from_env() {
  const char* value = std::getenv("TORCH_NEURON_FLOAT64");
  if (value == nullptr || *value == '\0') return Float64Mode::Narrow;
  TORCH_CHECK(std::strcmp(value, "exact") == 0, "TORCH_NEURON_FLOAT64='", value,
              "' is not a valid value; set it to 'exact' (float64 computed exactly on the "
              "host) or unset it (float64 computed in float32, as on Trainium)");
  return Float64Mode::Exact;
}

// -1: not read yet; then a Float64Mode.
std::atomic<int> mode{-1};

// TorchNeuron's switch, with the boolean spellings docs/environment.md lists (as
// torch_neuron/compile_backend.py reads its variables). Unset or empty keeps TorchNeuron's
// default for PyTorch >= 2.13 (on). Read when first needed, so that a bad value raises a Python
// error instead of failing the library's load.
bool complex_decompose_from_env() {
  const char* raw = std::getenv("TORCH_NEURONX_COMPLEX_DECOMPOSE");
  if (raw == nullptr || *raw == '\0') return true;
  for (const char* yes : {"1", "true", "yes"}) {
    if (strcasecmp(raw, yes) == 0) return true;
  }
  for (const char* no : {"0", "false", "no"}) {
    if (strcasecmp(raw, no) == 0) return false;
  }
  TORCH_CHECK(false, "TORCH_NEURONX_COMPLEX_DECOMPOSE='", raw,
              "' is not a boolean; set it to 1 or 0 (or unset it)");
}

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
  if (mode < 0) mode = static_cast<int>(mode_from_env());
  return static_cast<Float64Mode>(mode.load());
}
void set_float64_mode(Float64Mode m) { mode = static_cast<int>(m); }
bool complex_decompose() {
  if (decompose_complex < 0) decompose_complex = complex_decompose_from_env() ? 1 : 0;
  return decompose_complex == 1;
}
void set_complex_decompose(bool on) { decompose_complex = on ? 1 : 0; }

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

}  // namespace torch_neuron
