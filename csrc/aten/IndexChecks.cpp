#include "aten/IndexChecks.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <set>
#include <utility>

#include "aten/HostView.h"

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

}  // namespace torch_neuron
