// Note [Float64 write-back]
// Narrowing (Note [Float64 narrowing checks]) runs the kernel on a float32 copy of a float64
// argument the op writes; the float64 original then takes the new values.
//   - Ops that write all of the argument (elementwise in-place ops, out=) have every element
//     cast back.
//   - Indexed and masked writes (index_put_, masked_fill_, scatter_, ...) write some elements:
//     only those the op wrote are cast back, so a float64 value the op did not write keeps
//     every bit (values float32 cannot hold, int64 bits seen through a float64 view).
// Which elements did it write? An element whose float32 bits changed was written. An element
// written with the value it already had in float32 keeps its float64 bits, which is right
// where float32 holds the float64 value exactly. Where it does not (0.0 written over the int64
// 3 seen as a float64, a denormal that float32 flushes to 0.0), the element is marked before
// the kernel runs with a NaN of unusual bits, so a write shows. Ops that
// read what they overwrite (accumulate=True, reductions) are not marked, as they would read
// the mark: they can only leave an element unchanged in float32 by adding nothing to it, and
// then its float64 bits are the CPU's answer too.
#include "aten/Float64WriteBack.h"

#include <ATen/core/function_schema.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/where.h>

#include <cstdint>

#include "aten/OpPolicy.h"

namespace torch_neuron {
namespace {

// A quiet NaN with an unusual payload: only a write of this very NaN would go unseen.
constexpr int32_t kMarkBits = 0x7fc0a5a5;

}  // namespace

bool updates_unmarked_running_stats(const std::string& base) {
  return base == "native_batch_norm" || base == "cudnn_batch_norm" ||
         base == "miopen_batch_norm" || base == "batch_norm_gather_stats" ||
         base == "batch_norm_gather_stats_with_counts";
}

bool writes_part_of_argument(const std::string& base) {
  // Running statistics are written only in training: compared like a partial write, a float64
  // statistic the op left alone keeps its bits.
  if (updates_unmarked_running_stats(base)) return true;
  for (const char* prefix : {"index_put", "_index_put_impl", "_unsafe_index_put", "index_fill",
                             "index_copy", "index_add", "index_reduce", "scatter", "masked_fill",
                             "masked_scatter", "put", "fill_diagonal"}) {
    if (base.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

bool reads_overwritten_elements(const std::string& base, const c10::FunctionSchema& schema,
                                c10::ArrayRef<c10::IValue> arguments) {
  if (updates_unmarked_running_stats(base)) return true;
  if (combines_by_name(base)) return true;
  // index_put_(..., accumulate=True), put_(..., accumulate=True), scatter_(..., reduce="add").
  for (size_t i = 0; i < schema.arguments().size() && i < arguments.size(); ++i) {
    const std::string& name = schema.arguments()[i].name();
    const c10::IValue& value = arguments[i];
    if (name == "accumulate" && value.isBool() && value.toBool()) return true;
    if (name == "reduce" && !value.isNone()) return true;
  }
  return false;
}

void mark_inexact_elements(const at::Tensor& narrowed, const at::Tensor& original) {
  const at::Tensor inexact = narrowed.to(at::kDouble).view(at::kLong).ne(original.view(at::kLong));
  narrowed.view(at::kInt).masked_fill_(inexact, kMarkBits);
}

void write_back_float64(const at::Tensor& original, const at::Tensor& narrowed, bool partial,
                        bool marked) {
  if (!partial) {
    original.copy_(narrowed);
    return;
  }
  // The float32 bits each element had before the kernel ran.
  const at::Tensor before = original.to(at::kFloat);
  if (marked) mark_inexact_elements(before, original);
  const at::Tensor written = narrowed.view(at::kInt).ne(before.view(at::kInt));
  original.copy_(at::where(written, narrowed.to(at::kDouble), original));
}

}  // namespace torch_neuron
