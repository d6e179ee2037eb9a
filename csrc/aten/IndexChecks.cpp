#include "aten/IndexChecks.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <regex>
#include <unordered_map>
#include <set>
#include <utility>

#include "runtime/HostView.h"

namespace torch_neuron {
namespace {

// Ops whose arguments start (self, dim, index): the index selects along self's dim.
const std::set<std::string>& dim_index_ops() {
  static const std::set<std::string> ops{
      "index_select", "gather",    "scatter",    "scatter_",    "scatter_add", "scatter_add_",
      "scatter_reduce", "scatter_reduce_", "index_add", "index_add_", "index_copy",
      "index_copy_", "index_fill", "index_fill_", "index_reduce", "index_reduce_"};
  return ops;
}

template <class T>
std::pair<int64_t, int64_t> scan_min_max(const T* data, int64_t n) {
  T lo = data[0], hi = data[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, data[i]);
    hi = std::max(hi, data[i]);
  }
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

// The smallest and largest index (`index` is not empty). Small contiguous int64/int32 indices,
// the common case (a token's embedding row, a few selected rows), are scanned in place: running
// aminmax as an op would cost more than the op being checked.
std::pair<int64_t, int64_t> min_max(const at::Tensor& index) {
  constexpr int64_t kScanLimit = 4096;
  if (index.numel() <= kScanLimit && index.is_contiguous()) {
    if (index.scalar_type() == at::kLong) {
      return scan_min_max(index.const_data_ptr<int64_t>(), index.numel());
    }
    if (index.scalar_type() == at::kInt) {
      return scan_min_max(index.const_data_ptr<int32_t>(), index.numel());
    }
  }
  auto [lo, hi] = at::aminmax(host_view(index));
  return {lo.item<int64_t>(), hi.item<int64_t>()};
}

}  // namespace

IndexCheck index_check_for(const std::string& base_name) {
  if (dim_index_ops().count(base_name)) return IndexCheck::DimIndex;
  if (base_name == "take") return IndexCheck::Take;
  return IndexCheck::None;
}

void check_dim_index(const std::string& op, const at::Tensor& self, int64_t dim,
                     const at::Tensor& index) {
  // An empty self is left to the CPU kernel, which decides as on the CPU (index_copy_ into a
  // tensor with no elements copies nothing and raises nothing).
  if (!index.defined() || index.numel() == 0 || self.numel() == 0 ||
      !at::isIntegralType(index.scalar_type(), false)) {
    return;
  }
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  const auto [min, max] = min_max(index);
  const int64_t bad = min < 0 ? min : max;
  if (min >= 0 && max < size) return;
  // The exception type the CPU usually raises: RuntimeError for gather and the scatters,
  // IndexError for the index_* ops. run_on_host corrects it to what the CPU kernel raises for
  // the call at hand (raise_cpu_argument_error in HostExecution.cpp).
  const bool runtime_error = op.rfind("gather", 0) == 0 || op.rfind("scatter", 0) == 0;
  const std::string message = c10::str(op, ": index ", bad, " is out of range for dimension ",
                                       dim, " of size ", size, " (valid indices are 0..",
                                       size - 1, ")");
  if (runtime_error) TORCH_CHECK(false, message);
  TORCH_CHECK_INDEX(false, message);
}

void check_take_index(const at::Tensor& self, const at::Tensor& index) {
  // take indexes the flattened tensor; negative indices count from the end.
  const int64_t n = self.numel();
  if (index.numel() == 0) return;
  const auto [min, max] = min_max(index);
  TORCH_CHECK_INDEX(min >= -n && max < n, "take: index ", min < -n ? min : max,
                    " is out of range for a tensor of ", n, " elements (valid indices are ",
                    -n, "..", n - 1, ")");
}

void check_index_bounds(const std::string& base_name, c10::ArrayRef<c10::IValue> args) {
  switch (index_check_for(base_name)) {
    case IndexCheck::DimIndex:
      if (args.size() >= 3 && args[0].isTensor() && args[1].isInt() && args[2].isTensor()) {
        check_dim_index(base_name, args[0].toTensor(), args[1].toInt(), args[2].toTensor());
      }
      break;
    case IndexCheck::Take:
      if (args.size() >= 2 && args[0].isTensor() && args[1].isTensor()) {
        check_take_index(args[0].toTensor(), args[1].toTensor());
      }
      break;
    case IndexCheck::None:
      break;
  }
}

namespace {

// Called when the index pre-check found an index out of range. The CPU kernel
// checks the other arguments first (shapes, overlap) and raises its own error for them; so
// that the call raises what it raises on the CPU, the kernel runs on a copy of the arguments'
// memory (one copy per storage, so that aliasing stays), and an error it raises about
// anything but the index is raised instead of the pre-check's; for an index error, returns the
// exception type the CPU raised. Error path only; memory beyond kMaxBytes is not copied (the
// pre-check's error stands).
enum class CpuIndexError { Unknown, Index, Runtime };

CpuIndexError raise_cpu_argument_error(const c10::OperatorHandle& op,
                                       c10::ArrayRef<c10::IValue> arguments) {
  constexpr uint64_t kMaxBytes = uint64_t{256} << 20;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> copies;
  uint64_t bytes = 0;
  auto to_cpu = [&](const at::Tensor& t) -> at::Tensor {
    if (!on_neuron(t)) return t;
    c10::Storage& copy = copies[t.storage().unsafeGetStorageImpl()];
    if (!copy) {
      const auto nbytes = static_cast<int64_t>(t.storage().nbytes());
      bytes += nbytes;
      at::Tensor buffer = at::empty({nbytes}, at::TensorOptions().dtype(at::kByte));
      if (bytes <= kMaxBytes && nbytes > 0) {
        buffer.copy_(at::from_blob(t.storage().mutable_data(), {nbytes},
                                   at::TensorOptions().dtype(at::kByte)));
      }
      copy = buffer.storage();
    }
    return tensor_like(copy, c10::DispatchKey::CPU, t);
  };
  torch::jit::Stack stack;
  for (const auto& value : arguments) {
    if (value.isTensor()) {
      stack.emplace_back(to_cpu(value.toTensor()));
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(to_cpu(t));
      stack.emplace_back(list);
    } else {
      stack.push_back(value);
    }
  }
  if (bytes > kMaxBytes) return CpuIndexError::Unknown;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
  } catch (const c10::Error& e) {
    // The CPU kernel's own index error ("index 5 is out of bounds for dimension 0", "index
    // out of range in self", "tried to access index 5", "INDICES element is out of DATA
    // bounds"), not a shape error ("Indexing dim 1 is out of bounds of the source tensor"):
    // the pre-check's says more.
    static const std::regex index_error(
        R"((index|INDICES)[^.]* out of (range|bounds|DATA bounds)|tried to access index)");
    if (!std::regex_search(e.what_without_backtrace(), index_error)) throw;
    return dynamic_cast<const c10::IndexError*>(&e) != nullptr ? CpuIndexError::Index
                                                                : CpuIndexError::Runtime;
  }
  return CpuIndexError::Unknown;
}

}  // namespace

void raise_index_error_as_cpu(const c10::OperatorHandle& op,
                              c10::ArrayRef<c10::IValue> arguments, const c10::Error& ours) {
  // The pre-check's message, with the exception type the CPU kernel raises for the call.
  const bool ours_is_index_error = dynamic_cast<const c10::IndexError*>(&ours) != nullptr;
  switch (raise_cpu_argument_error(op, arguments)) {
    case CpuIndexError::Index:
      TORCH_CHECK_INDEX(ours_is_index_error, ours.msg());
      break;
    case CpuIndexError::Runtime:
      TORCH_CHECK(!ours_is_index_error, ours.msg());
      break;
    case CpuIndexError::Unknown:
      break;
  }
  throw;  // the pre-check's own error, as it was raised
}

}  // namespace torch_neuron
