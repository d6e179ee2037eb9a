// How a float64 argument an op wrote through its float32 copy gets its new values (Note
// [Float64 write-back] in Float64WriteBack.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/ArrayRef.h>

#include <string>

namespace c10 {
struct FunctionSchema;
}

namespace torch_neuron {

// Ops that update running statistics their schema does not mark as written (an old schema
// convention; _native_batch_norm_legit and _batch_norm_with_update mark them).
bool updates_unmarked_running_stats(const std::string& base);

// The op writes only some elements of the argument it writes (indexed and masked writes);
// every other op writes all of it.
bool writes_part_of_argument(const std::string& base);

// A partial write that also reads the elements it overwrites (index_put_ with
// accumulate=True, scatter_ with a reduction, index_add_, running statistics).
bool reads_overwritten_elements(const std::string& base, const c10::FunctionSchema& schema,
                                c10::ArrayRef<c10::IValue> arguments);

// Before a partial write that does not read what it overwrites: marks the elements of the
// float32 copy `narrowed` that differ from `original` (float64, host memory) in float32, so
// that any write to them can be told apart from no write.
void mark_inexact_elements(const at::Tensor& narrowed, const at::Tensor& original);

// After the kernel ran: the float64 `original` (host memory) takes the values the kernel wrote
// into its float32 copy `narrowed`. `partial`: the op wrote only some elements; `marked`:
// mark_inexact_elements was called before the kernel.
void write_back_float64(const at::Tensor& original, const at::Tensor& narrowed, bool partial,
                        bool marked);

}  // namespace torch_neuron
