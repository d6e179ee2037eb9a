// Dtype policy: what Trainium does with dtypes it does not compute natively.
//
// float64: Trainium has no float64 arithmetic. Like TorchNeuron, device ops compute float64
// tensors in float32 and cast the results back (Float64Mode::Narrow, the default, with a
// one-time warning). TORCH_NEURON_FLOAT64=exact, or torch_neuron.set_float64_mode("exact"),
// keeps exact float64 computed on the host instead. Storage and copies are always exact.
//
// int64: integer arithmetic on Trainium is 32-bit; int64 tensors are stored as 64-bit but values
// are expected to fit in int32. Results here stay exact int64; a device op whose int64 result
// leaves the int32 range warns once, because on hardware that value would not survive.
//
// complex: Trainium has no complex arithmetic. TorchNeuron on PyTorch >= 2.13 decomposes complex
// ops into real ones on the device (TORCH_NEURONX_COMPLEX_DECOMPOSE, on by default), so complex64
// ops run as device ops charged as their real decomposition. Turning decomposition off
// (TORCH_NEURONX_COMPLEX_DECOMPOSE=0 or torch_neuron.set_complex_decompose(False)) sends every
// op on complex tensors to the CPU fallback. complex128 and complex32 always fall back.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>

namespace torch_neuron {

enum class Float64Mode { Narrow, Exact };

Float64Mode float64_mode();
void set_float64_mode(Float64Mode mode);

bool complex_decompose();
void set_complex_decompose(bool on);
// Whether an op with these arguments goes to the CPU for their complex tensors: Trainium has no
// complex arithmetic, so unless decomposition is on and every complex neuron tensor is complex64
// (float32 pairs), it is a host round trip.
bool complex_round_trip(c10::ArrayRef<c10::IValue> arguments);

// Warns (once per process) that float64 is being computed in float32.
void warn_float64_narrowing();

// Warns (once per process) if an int64 tensor among `outputs` holds a value outside int32.
void warn_if_int64_overflows(const std::string& op_name, c10::ArrayRef<c10::IValue> outputs);
void warn_if_int64_overflows(const std::string& op_name, const at::Tensor& output);

}  // namespace torch_neuron
