// Note [Memoized op times]
// A typed host kernel's work (Note [Unboxed host execution]) is a function of its op and of the
// dtypes and sizes of its tensors only: describe_op reads nothing else, and trnsim's time_of is
// a pure function of the work and the instance, which is fixed for the process. Eager programs
// call the same op on same-shaped tensors over and over (a training step, a 1-element loop), so
// each thread remembers, per typed op, the shapes of its last call and the WorkTime trnsim gave
// it; a call with the same shapes launches that time again without describing and costing the
// work anew. The time is the very value time_of returned, so simulated times are bit-identical.
// Per thread, so no lock: threads running the same op each keep their own entry (OpThreadState
// in UnboxedHostKernels.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/UndefinedTensorImpl.h>

#include <cstddef>
#include <cstdint>

#include <trnsim/work.h>

namespace torch_neuron {

class OpTimeMemo {
 public:
  // The time remembered for a call whose neuron inputs are `inputs`, whose work is sized by
  // `out` (may be undefined) and which moves `bytes`; nullptr when the shapes differ.
  const trnsim::WorkTime* find(c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out,
                               uint64_t bytes) const {
    if (count_ == 0 || bytes != bytes_) return nullptr;
    size_t i = 0;
    for (const at::Tensor& t : inputs) {
      if (!same_shape(t.unsafeGetTensorImpl(), i)) return nullptr;
    }
    return same_shape(out.unsafeGetTensorImpl(), i) && i == count_ ? &time_ : nullptr;
  }

  // Remembers `time` for such a call (unless its shapes take more room than the memo has).
  void remember(c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out, uint64_t bytes,
                const trnsim::WorkTime& time) {
    count_ = 0;
    bool fits = true;
    for (const at::Tensor& t : inputs) fits = fits && append(t.unsafeGetTensorImpl());
    fits = fits && append(out.unsafeGetTensorImpl());
    if (!fits) {
      count_ = 0;  // remembers nothing: every such call is costed anew
      return;
    }
    bytes_ = bytes;
    time_ = time;
  }

 private:
  // A tensor is recorded as one word (dtype and dimension count; kUndefined for an undefined
  // tensor) followed by its sizes.
  static constexpr size_t kWords = 24;
  static constexpr int64_t kUndefined = -1;

  static bool defined(const c10::TensorImpl* impl) {
    return impl != c10::UndefinedTensorImpl::singleton();
  }
  static int64_t header(const c10::TensorImpl* impl, size_t dim) {
    return static_cast<int64_t>(impl->dtype().toScalarType()) << 8 | static_cast<int64_t>(dim);
  }
  bool append(const c10::TensorImpl* impl) {
    if (!defined(impl)) {
      if (count_ == kWords) return false;
      words_[count_++] = kUndefined;
      return true;
    }
    const c10::IntArrayRef sizes = impl->sizes();
    if (count_ + 1 + sizes.size() > kWords) return false;
    words_[count_++] = header(impl, sizes.size());
    for (const int64_t s : sizes) words_[count_++] = s;
    return true;
  }
  bool same_shape(const c10::TensorImpl* impl, size_t& i) const {
    if (!defined(impl)) return i < count_ && words_[i++] == kUndefined;
    const c10::IntArrayRef sizes = impl->sizes();
    if (i + 1 + sizes.size() > count_ || words_[i] != header(impl, sizes.size())) return false;
    ++i;
    for (const int64_t s : sizes) {
      if (words_[i++] != s) return false;
    }
    return true;
  }

  int64_t words_[kWords];
  size_t count_ = 0;  // 0: nothing remembered
  uint64_t bytes_ = 0;
  trnsim::WorkTime time_;
};

}  // namespace torch_neuron
