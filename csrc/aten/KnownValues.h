// Note [Known values in predict-only mode]
// Predict-only mode computes no values (Note [Predict-only execution]), yet PyTorch's own
// distributed code reads a few back: DDP sends its bucket order from rank 0 and reads it,
// DTensor's random-number tracker broadcasts rank 0's generator state and sets it, ZeRO
// broadcasts the sizes of its optimizer state, a pipeline's stages vote on how to infer shapes
// by passing a tensor along and reading it. Each is a short chain of small work on values that
// came from the CPU: an upload, a fill, arithmetic on a few elements, a collective or a
// send/recv, then a download or .item(). So in predict-only mode such a chain computes:
//   - an upload of at most kKnownValuesMaxBytes, and a fill of a tensor that small, really
//     write their bytes, and the tensor's values are known;
//   - an op whose neuron tensors all have known values and together hold at most
//     kKnownValuesMaxBytes runs for real (as when computing), and its results are known;
//   - a collective or send/recv whose inputs all have known values on every running rank
//     moves them (for virtual ranks by the SPMD rule: Note [Virtual world]);
//   - reading a tensor with known values (a download, .item()) gives them.
// Any other device work ends every known value: it may have written any tensor, and tracking
// which would be a second execution engine. So values stay known only along an unbroken chain
// of such work, which is what these protocols are; reading anything else raises, as before.
// The work is charged exactly as it would be without values (Note [One charge path]).
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>

namespace torch_neuron {

// A chain's tensors are metadata: a few KiB. The bound keeps full-size weights and activations
// (which a predict-only run should not write into RAM) out. A choice of this design, not a
// hardware figure.
constexpr uint64_t kKnownValuesMaxBytes = 1 << 20;

// While one lives on this thread, execution_enabled() is true: the work computes its values
// (and so keeps the known ones known). For the work of a chain only.
class ComputeKnownValues {
 public:
  ComputeKnownValues();
  ~ComputeKnownValues();
  ComputeKnownValues(const ComputeKnownValues&) = delete;
  ComputeKnownValues& operator=(const ComputeKnownValues&) = delete;

 private:
  bool previous_;
};
bool computing_known_values();

// `t`'s values are what its bytes hold, until device work outside a chain.
void mark_values_known(const at::Tensor& t);
bool values_known(const at::Tensor& t);
// Device work outside a chain was charged: no value is known any more (charge() calls it).
void forget_known_values();
namespace detail {
extern std::atomic<bool> any_known_values;  // whether the table may hold anything
}
// Whether some value may be known: charge() asks this before anything else, so that work
// executing with no known values (every op of an executing program) pays one load for them.
inline bool may_know_values() {
  return detail::any_known_values.load(std::memory_order_relaxed);
}
// Whether every neuron tensor among `values` (tensors, lists of tensors) has known values and
// together they hold at most kKnownValuesMaxBytes (and there is at least one).
bool small_and_known(c10::ArrayRef<c10::IValue> values);

}  // namespace torch_neuron
