#include "aten/IndexChecks.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <set>

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

void check_range(const std::string& op, const at::Tensor& index, int64_t size, int64_t dim) {
  if (!index.defined() || index.numel() == 0 || !at::isIntegralType(index.scalar_type(), false)) {
    return;
  }
  auto [lo, hi] = at::aminmax(host_view(index));
  const int64_t min = lo.item<int64_t>(), max = hi.item<int64_t>();
  const int64_t bad = min < 0 ? min : max;
  TORCH_CHECK_INDEX(min >= 0 && max < size, op, ": index ", bad,
                    " is out of range for dimension ", dim, " of size ", size,
                    " (valid indices are 0..", size - 1, ")");
}

}  // namespace

void check_index_bounds(const std::string& base_name, c10::ArrayRef<c10::IValue> args) {
  if (dim_index_ops().count(base_name) && args.size() >= 3 && args[0].isTensor() &&
      args[1].isInt() && args[2].isTensor()) {
    const at::Tensor& self = args[0].toTensor();
    const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
    const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
    check_range(base_name, args[2].toTensor(), size, dim);
  } else if (base_name == "take" && args.size() >= 2 && args[0].isTensor() &&
             args[1].isTensor()) {
    // take indexes the flattened tensor; negative indices count from the end.
    const int64_t n = args[0].toTensor().numel();
    const at::Tensor& index = args[1].toTensor();
    if (index.numel() == 0) return;
    auto [lo, hi] = at::aminmax(host_view(index));
    const int64_t min = lo.item<int64_t>(), max = hi.item<int64_t>();
    TORCH_CHECK_INDEX(min >= -n && max < n, "take: index ", min < -n ? min : max,
                      " is out of range for a tensor of ", n, " elements (valid indices are ",
                      -n, "..", n - 1, ")");
  }
}

}  // namespace torch_neuron
