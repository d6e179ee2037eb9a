// Note [Unboxed host execution]
// Host execution (Note [Host execution]) is one boxed kernel for every op: the dispatcher boxes
// the arguments into IValues, run_on_host walks the schema, and the CPU kernel unboxes them
// again. For 1-element tensors that generic walk costs about as much as the CPU kernel itself,
// and dropping the boxed copies of tensors that Python owns makes PyTorch take the GIL (Note
// [PyObject preservation for Tensor and Storages] in c10/util/intrusive_ptr.h).
// The ops that dominate eager programs (elementwise arithmetic, activations, comparisons,
// reductions, matmuls, softmax, cat, gathers and scatters, and their backward kernels)
// therefore get typed kernels made from one template. They do exactly what run_on_host does,
// with the types known at compile time: index bounds checks, host views of the neuron arguments
// (borrowed, never copied), the CPU kernel called unboxed inside AllocateOnDevice, the results
// adopted as neuron tensors, the op charged to the engines and counted. Any call the typed
// kernel does not handle the same way (float64 narrowing, complex dtypes, arguments sharing
// memory, mixed devices, non-scalar CPU tensors) goes to run_on_host unchanged, so behaviour
// does not depend on which path ran.
#include <ATen/core/Tensor.h>
#include <ATen/core/boxing/impl/boxing.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/ScalarType.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmm_ops.h>
#include <ATen/ops/amax_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/argmax_ops.h>
#include <ATen/ops/bitwise_and_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/bitwise_or_ops.h>
#include <ATen/ops/bmm_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/ops/cumsum_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/gather_ops.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/index_add_ops.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/max_ops.h>
#include <ATen/ops/maximum_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/minimum_ops.h>
#include <ATen/ops/mm_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/relu_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/rsub_ops.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/sigmoid_backward_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/silu_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/tanh_backward_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <ATen/ops/topk_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>

#include <trnsim/cost.h>

#include "aten/DtypePolicy.h"
#include "aten/HostExecution.h"
#include "runtime/HostView.h"
#include "aten/IndexChecks.h"
#include "aten/PredictOnly.h"
#include "aten/Charge.h"
#include "aten/OpTimeMemo.h"
#include "aten/OpWork.h"
#include "aten/OpPolicy.h"
#include "aten/OpTracking.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

// A number for a new typed op (once per op, at its first call): its OpThreadState's index.
size_t new_op_number() {
  static std::atomic<size_t> next{0};
  return next++;
}

// What a typed kernel needs to know about its op, computed on its first call.
struct UnboxedOpInfo {
  std::string name;       // "aten::add.Tensor"
  std::string base_name;  // "add", for index check messages
  OpClass op_class;
  IndexCheck index_check;  // what run_on_host checks before a GpSimd op
  OpCounter* counter;
  c10::OperatorHandle handle;  // for run_on_host
  size_t number;               // its OpThreadState on each thread
};

template <class Op>
const UnboxedOpInfo& info_of() {
  static const UnboxedOpInfo info = [] {
    std::string name = Op::name;
    const OpClass op_class = classify_op(name);
    std::string base_name = name.substr(6);  // without "aten::"
    const IndexCheck index_check =
        op_class == OpClass::GpSimd ? index_check_for(base_name) : IndexCheck::None;
    if (*Op::overload_name != '\0') name += std::string(".") + Op::overload_name;
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(Op::name, Op::overload_name);
    return UnboxedOpInfo{name,   base_name, op_class, index_check, &op_counter(name),
                         handle, new_op_number()};
  }();
  return info;
}

// What a typed op keeps per thread: the time of its last call's shapes (Note [Memoized op
// times]) and one host view slot for each of its first tensor arguments (Note [Host view slots]
// in runtime/HostView.h; most ops have at most four, the others use spare views). Per thread,
// so no lock.
constexpr size_t kViewSlots = 4;
using OpViewSlots = std::array<HostViewSlot, kViewSlots>;
struct OpThreadState {
  OpTimeMemo memo;
  OpViewSlots views;
};

struct OpThreadStatesTag;
OpThreadState& op_thread_state(size_t number) {
  // Held by pointer: growing the table leaves the slots that outer calls hold where they are.
  auto& all = per_thread<std::vector<std::unique_ptr<OpThreadState>>, OpThreadStatesTag>();
  if (__builtin_expect(number < all.size() && all[number] != nullptr, 1)) return *all[number];
  if (number >= all.size()) all.resize(number + 1);
  all[number] = std::make_unique<OpThreadState>();
  return *all[number];
}

// TensorBase::nbytes() without its sparse-layout check: these tensors are dense.
uint64_t nbytes(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  return static_cast<uint64_t>(impl->numel()) * impl->itemsize();
}

// The neuron tensors of one call (each once), their host views and the op's device, for an op
// with `kTensors` tensor arguments (`kOptionalTensors` of them optional) and, for ops like cat,
// one tensor list argument (`kTensorList`).
template <size_t kTensors, size_t kOptionalTensors, bool kTensorList>
class UnboxedRun {
  // Fixed room: longer tensor lists (cat of many tensors) take run_on_host.
  static constexpr size_t kMaxListTensors = 16;
  static constexpr size_t kCapacity = kTensors + (kTensorList ? kMaxListTensors : 0);

 public:
  using Borrow = c10::MaybeOwnedTraits<at::Tensor>;

  explicit UnboxedRun(OpViewSlots& slots) : slots_(slots) {}
  UnboxedRun(const UnboxedRun&) = delete;
  UnboxedRun& operator=(const UnboxedRun&) = delete;
  ~UnboxedRun() {
    // Drop the extra references to the views, so that they can be recycled.
    for (auto& view : optional_views_) view.reset();
    list_views_.clear();
    for (size_t i = 0; i < count_; ++i) {
      Borrow::destroyBorrow(inputs_[i]);
      if (views_[i] == nullptr) continue;
      if (i < kViewSlots && views_[i] != &own_views_[i]) {
        slots_[i].give_back();  // the slot keeps its view (Note [Host view slots])
      } else if (own_views_[i].unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl() ==
                 aliases_[i]) {  // (a view is a plain TensorImpl: it has a storage)
        recycle_host_view(std::move(own_views_[i]));
      }
    }
  }

  // Pass 1: whether this argument lets the call take the typed path. The inputs are borrowed
  // (no reference counting): the caller holds them for the whole call.
  bool admit(const at::Tensor& t) {
    if (!t.defined()) return true;
    const c10::Device device = t.device();
    // CUDA's rule lets 0-dim CPU tensors join device ops; run_on_host reports the rest.
    if (device.type() != kNeuron) return device.is_cpu() && t.dim() == 0;
    const at::ScalarType dtype = t.scalar_type();
    if (dtype == at::kDouble || c10::isComplexType(dtype)) return false;
    if (device_ < 0) device_ = device.index();
    if (device_ != device.index()) return false;
    // (Dense neuron tensors always have a storage: no need for storage()'s checks.)
    const c10::Storage& storage = t.unsafeGetTensorImpl()->unsafe_storage();
    for (size_t i = 0; i < count_; ++i) {
      if (inputs_[i].unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return true;  // x * x
      // Distinct tensors over one storage need one shared CPU alias: run_on_host makes it.
      if (inputs_[i].unsafeGetTensorImpl()->unsafe_storage().is_alias_of(storage)) return false;
    }
    if (count_ == kCapacity) return false;
    inputs_[count_++] = Borrow::createBorrow(t);
    input_bytes_ += nbytes(t);
    return true;
  }
  bool admit(const at::ITensorListRef& list) {
    for (const at::Tensor& t : list) {
      if (!admit(t)) return false;
    }
    return true;
  }
  bool admit(const std::optional<at::Tensor>& t) { return !t.has_value() || admit(*t); }
  template <class T>
  bool admit(const T&) {
    return true;
  }

  c10::DeviceIndex device() const { return device_; }
  uint64_t input_bytes() const { return input_bytes_; }
  c10::ArrayRef<at::Tensor> inputs() const { return {inputs_.data(), count_}; }

  // Pass 2: the arguments the CPU kernel gets.
  const at::Tensor& to_host(const at::Tensor& t) { return view_of(t); }
  at::Tensor& to_host(at::Tensor& t) { return view_of(t); }  // in-place self
  const std::optional<at::Tensor>& to_host(const std::optional<at::Tensor>& t) {
    if (!t.has_value()) return t;
    std::optional<at::Tensor>& view = optional_views_[optional_count_++];
    view = view_of(*t);
    return view;
  }
  at::ITensorListRef to_host(const at::ITensorListRef& list) {
    for (const at::Tensor& t : list) list_views_.push_back(view_of(t));
    return at::ITensorListRef(list_views_);
  }
  template <class T>
  const T& to_host(const T& value) {
    return value;
  }

  // The CPU kernel's result as a neuron tensor.
  at::Tensor to_neuron(at::Tensor result) const {
    if (!result.defined()) return result;
    // (Null for a tensor without storage, which adopt_host_result then refuses.)
    const c10::StorageImpl* storage =
        result.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    for (size_t i = 0; i < count_; ++i) {
      if (views_[i] == nullptr) continue;
      if (result.unsafeGetTensorImpl() == views_[i]->unsafeGetTensorImpl()) return inputs_[i];
      if (storage == aliases_[i]) {
        return tensor_like(inputs_[i].storage(), c10::DispatchKey::PrivateUse1, result);
      }
    }
    return adopt_host_result(std::move(result), device_);
  }

 private:
  at::Tensor& view_of(const at::Tensor& t) {
    // CPU scalars (admitted above) pass through; `t` outlives the call.
    if (!t.defined() || t.device().type() != kNeuron) return const_cast<at::Tensor&>(t);
    size_t i = 0;
    while (inputs_[i].unsafeGetTensorImpl() != t.unsafeGetTensorImpl()) ++i;
    if (views_[i] == nullptr) {
      if (inference_mode_ < 0) inference_mode_ = c10::InferenceMode::is_enabled();
      at::Tensor* view = i < kViewSlots ? slots_[i].take(t, inference_mode_ > 0) : nullptr;
      if (view == nullptr) {
        own_views_[i] = host_view(t, /*resizable=*/false, inference_mode_ > 0);
        view = &own_views_[i];
      }
      views_[i] = view;
      // (A view is a plain TensorImpl: it has a storage, read without storage()'s checks.)
      aliases_[i] = view->unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
    }
    return *views_[i];
  }

  std::array<at::Tensor, kCapacity> inputs_;  // borrowed
  OpViewSlots& slots_;
  std::array<at::Tensor*, kCapacity> views_{};  // a slot's view or own_views_[i]
  std::array<at::Tensor, kCapacity> own_views_;  // views of arguments without a free slot
  std::array<c10::StorageImpl*, kCapacity> aliases_{};
  std::array<std::optional<at::Tensor>, kOptionalTensors> optional_views_;
  c10::SmallVector<at::Tensor, kTensorList ? kMaxListTensors : 1> list_views_;
  size_t count_ = 0;
  size_t optional_count_ = 0;
  uint64_t input_bytes_ = 0;
  c10::DeviceIndex device_ = -1;
  int8_t inference_mode_ = -1;  // InferenceMode::is_enabled(), asked at the first view
};

// Charges the op to the current stream's clock and counts it (as run_on_host does).
template <class Run, class... Outputs>
void charge(const UnboxedOpInfo& info, const Run& run, OpTimeMemo& memo, trnsim::Queue& queue,
            const Outputs&... outputs) {
  const at::Tensor* const output_ptrs[] = {&outputs...};  // Note [Compiled graph schedule]
  static const at::Tensor none;
  const at::Tensor* largest = &none;  // sizes the work of most ops
  uint64_t bytes = run.input_bytes();
  for (const at::Tensor* out : {&outputs...}) {
    if (!out->defined()) continue;
    // (Only int64 results can overflow int32: other dtypes skip the call.)
    if (info.op_class != OpClass::GpSimd && out->scalar_type() == at::kLong) {
      warn_if_int64_overflows(info.name, *out);
    }
    bytes += nbytes(*out);
    if (!largest->defined() || out->numel() > largest->numel()) largest = out;
  }
  // Note [Memoized op times]: the same shapes as this op's last call on this thread cost the
  // same; only new shapes are described and costed.
  const trnsim::WorkTime* known = memo.find(run.inputs(), *largest, bytes);
  trnsim::WorkTime time;
  if (known == nullptr) {
    time = trnsim::time_of(
        system().instance(),
        describe_op(info.op_class, info.name, run.inputs(), *largest, bytes, /*foreach=*/false));
    memo.remember(run.inputs(), *largest, bytes, time);
  }
  charge(queue, info.name, info.counter, known ? *known : time,
         [&] { return describe_tensors(run.inputs()); }, Placement::Device,
         Operands{run.inputs(), {}, {}, output_ptrs});
}

template <class T>
using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

template <class T>
struct is_bool_array : std::false_type {};
template <size_t N>
struct is_bool_array<std::array<bool, N>> : std::true_type {};

// Argument types the typed kernel passes through untouched. Tensors, optional tensors and one
// tensor list are converted; anything else (generators, devices, lists of optional tensors)
// needs run_on_host's handling, so such ops cannot be listed.
template <class T>
constexpr bool is_plain_argument() {
  using U = Bare<T>;
  return std::is_arithmetic_v<U> || std::is_same_v<U, at::Scalar> ||
         std::is_same_v<U, std::optional<at::Scalar>> || std::is_same_v<U, at::IntArrayRef> ||
         std::is_same_v<U, at::OptionalIntArrayRef> ||
         std::is_same_v<U, std::optional<int64_t>> || std::is_same_v<U, std::optional<bool>> ||
         std::is_same_v<U, std::optional<at::ScalarType>> || std::is_same_v<U, at::ScalarType> ||
         std::is_same_v<U, c10::string_view> ||
         std::is_same_v<U, std::optional<c10::string_view>> || std::is_same_v<U, c10::SymInt> ||
         std::is_same_v<U, c10::SymIntArrayRef> || is_bool_array<U>::value;
}

template <class T>
constexpr bool is_tensor_list_argument() {
  return std::is_same_v<Bare<T>, at::ITensorListRef>;
}

template <class T>
constexpr bool is_optional_tensor_argument() {
  return std::is_same_v<Bare<T>, std::optional<at::Tensor>>;
}

template <class T>
constexpr bool is_tensor_argument() {
  return std::is_same_v<Bare<T>, at::Tensor> || is_optional_tensor_argument<T>();
}

template <class T>
struct is_tensor_tuple : std::false_type {};
template <class... T>
struct is_tensor_tuple<std::tuple<T...>>
    : std::bool_constant<(std::is_same_v<T, at::Tensor> && ...)> {};

template <class Op, class Signature = typename Op::schema>
struct UnboxedHostKernel;

// Functional ops (returning new tensors) and in-place ops (returning their first argument).
template <class Op, class Return, class First, class... Rest>
struct UnboxedHostKernel<Op, Return(First, Rest...)> {
  static constexpr bool in_place = std::is_same_v<Return, at::Tensor&>;
  static_assert(std::is_same_v<Return, at::Tensor> || is_tensor_tuple<Return>::value ||
                    (in_place && std::is_same_v<First, at::Tensor&>),
                "typed host kernels return new tensors or, in place, their first argument");
  template <class T>
  static constexpr bool supported() {
    return is_tensor_argument<T>() || is_tensor_list_argument<T>() || is_plain_argument<T>();
  }
  static_assert(supported<First>() && (supported<Rest>() && ...),
                "an argument type that only run_on_host handles");
  static constexpr size_t kTensorLists =
      (size_t{is_tensor_list_argument<First>()} + ... +
       size_t{is_tensor_list_argument<Rest>()});
  static_assert(kTensorLists <= 1, "one tensor list argument at most");
  static constexpr size_t kTensors =
      (size_t{is_tensor_argument<First>()} + ... + size_t{is_tensor_argument<Rest>()});
  static constexpr size_t kOptionalTensors =
      (size_t{is_optional_tensor_argument<First>()} + ... +
       size_t{is_optional_tensor_argument<Rest>()});

  // Signatures the index checks understand: (self, dim, index, ...) and (self, index, ...).
  template <size_t I>
  using Arg = Bare<std::tuple_element_t<I, std::tuple<First, Rest...>>>;
  static constexpr bool dim_index_signature() {
    if constexpr (sizeof...(Rest) >= 2) {
      return std::is_same_v<Arg<0>, at::Tensor> && std::is_same_v<Arg<1>, int64_t> &&
             std::is_same_v<Arg<2>, at::Tensor>;
    }
    return false;
  }
  static constexpr bool take_signature() {
    if constexpr (sizeof...(Rest) >= 1) {
      return std::is_same_v<Arg<0>, at::Tensor> && std::is_same_v<Arg<1>, at::Tensor>;
    }
    return false;
  }

  // Fallback ops, ops needing an index check this signature does not fit, and every op in
  // predict-only mode (Note [Predict-only execution]) go boxed.
  static bool typed_path(const UnboxedOpInfo& info) {
    if (!execution_enabled()) return false;
    switch (info.index_check) {
      case IndexCheck::None: return info.op_class != OpClass::Fallback;
      case IndexCheck::DimIndex: return dim_index_signature();
      case IndexCheck::Take: return take_signature();
    }
    return false;
  }

  // The index checks run_on_host makes (IndexChecks.h), on the typed arguments.
  static void check_indices(const UnboxedOpInfo& info, const First& first, const Rest&... rest) {
    const auto args = std::forward_as_tuple(first, rest...);
    if constexpr (dim_index_signature()) {
      if (info.index_check == IndexCheck::DimIndex) {
        check_dim_index(info.base_name, std::get<0>(args), std::get<1>(args), std::get<2>(args));
      }
    }
    if constexpr (take_signature()) {
      if (info.index_check == IndexCheck::Take) {
        check_take_index(std::get<0>(args), std::get<1>(args));
      }
    }
  }

  static bool indices_in_range(const UnboxedOpInfo& info, const First& first,
                               const Rest&... rest) {
    try {
      check_indices(info, first, rest...);
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }

  static Return call(c10::DispatchKeySet, First first, Rest... rest) {
    const UnboxedOpInfo& info = info_of<Op>();
    if (typed_path(info)) {
      OpThreadState& state = op_thread_state(info.number);
      UnboxedRun<kTensors, kOptionalTensors, kTensorLists == 1> run(state.views);
      // An in-place op writes `first`: a CPU tensor there (a 0-dim one, which admit() lets
      // join as an operand) is refused by run_on_host, as CUDA refuses it.
      bool writes_cpu_tensor = false;
      if constexpr (in_place) writes_cpu_tensor = first.device().type() != kNeuron;
      // A bad index goes to run_on_host, which decides which error the call raises.
      if (!writes_cpu_tensor && run.admit(first) && (run.admit(rest) && ...) &&
          run.device() >= 0 && indices_in_range(info, first, rest...)) {
        const c10::DispatchKeySet cpu(c10::DispatchKey::CPU);
        trnsim::Queue& queue = current_queue(run.device());  // for the allocator and the charge
        if constexpr (in_place) {
          {
            AllocateOnDevice allocate_on(run.device(), &queue);
            Op::redispatch(cpu, run.to_host(first), run.to_host(rest)...);
          }
          charge(info, run, state.memo, queue, first);
          return first;
        } else {
          Return out;
          {
            AllocateOnDevice allocate_on(run.device(), &queue);
            out = Op::redispatch(cpu, run.to_host(first), run.to_host(rest)...);
          }
          if constexpr (is_tensor_tuple<Return>::value) {
            std::apply([&run](auto&... t) { ((t = run.to_neuron(std::move(t))), ...); }, out);
            std::apply([&](const auto&... t) { charge(info, run, state.memo, queue, t...); }, out);
          } else {
            out = run.to_neuron(std::move(out));
            charge(info, run, state.memo, queue, out);
          }
          return out;
        }
      }
    }
    torch::jit::Stack stack = c10::impl::boxArgs<First, Rest...>(first, rest...);
    run_on_host(info.handle, &stack);
    if constexpr (in_place) {
      return first;
    } else {
      return c10::impl::PopResult<Return>::call(stack);
    }
  }
};

// Names of the ops that got a typed kernel, in registration order.
std::vector<std::string>& registered_ops() {
  static std::vector<std::string> names;
  return names;
}

template <class Op>
void register_unboxed(torch::Library& library) {
  const UnboxedOpInfo& info = info_of<Op>();
  // Only ops whose CPU kernel is a real kernel: composite ones decompose into these anyway.
  if (info.handle.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
      !info.handle.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    return;
  }
  library.impl(info.name.substr(6).c_str(), TORCH_FN(UnboxedHostKernel<Op>::call));  // no aten::
  registered_ops().push_back(info.name);
}

}  // namespace

std::vector<std::string> unboxed_host_ops() { return registered_ops(); }

void register_unboxed_host_kernels(torch::Library& library) {
  namespace ops = at::_ops;
  // Elementwise arithmetic, functional and in place.
  register_unboxed<ops::add_Tensor>(library);
  register_unboxed<ops::add__Tensor>(library);
  register_unboxed<ops::sub_Tensor>(library);
  register_unboxed<ops::sub__Tensor>(library);
  register_unboxed<ops::rsub_Tensor>(library);
  register_unboxed<ops::mul_Tensor>(library);
  register_unboxed<ops::mul__Tensor>(library);
  register_unboxed<ops::div_Tensor>(library);
  register_unboxed<ops::div__Tensor>(library);
  register_unboxed<ops::div_Tensor_mode>(library);
  register_unboxed<ops::pow_Tensor_Scalar>(library);
  register_unboxed<ops::pow_Tensor_Tensor>(library);
  register_unboxed<ops::maximum>(library);
  register_unboxed<ops::minimum>(library);
  register_unboxed<ops::clamp>(library);
  register_unboxed<ops::lerp__Scalar>(library);
  register_unboxed<ops::addcmul_>(library);
  register_unboxed<ops::addcdiv_>(library);
  register_unboxed<ops::where_self>(library);
  register_unboxed<ops::cat>(library);
  // Gathers, scatters and sorts (GpSimdE), index bounds checked as in run_on_host.
  register_unboxed<ops::index_select>(library);
  register_unboxed<ops::gather>(library);
  register_unboxed<ops::scatter_add>(library);
  register_unboxed<ops::scatter_add_>(library);
  register_unboxed<ops::index_add_>(library);
  register_unboxed<ops::embedding_dense_backward>(library);
  register_unboxed<ops::topk>(library);
  register_unboxed<ops::sort_stable>(library);
  register_unboxed<ops::bitwise_and_Tensor>(library);
  register_unboxed<ops::bitwise_or_Tensor>(library);
  register_unboxed<ops::bitwise_not>(library);
  register_unboxed<ops::masked_fill__Scalar>(library);
  // Unary math and activations.
  register_unboxed<ops::neg>(library);
  register_unboxed<ops::exp>(library);
  register_unboxed<ops::log>(library);
  register_unboxed<ops::sqrt>(library);
  register_unboxed<ops::rsqrt>(library);
  register_unboxed<ops::reciprocal>(library);
  register_unboxed<ops::sin>(library);
  register_unboxed<ops::cos>(library);
  register_unboxed<ops::tanh>(library);
  register_unboxed<ops::sigmoid>(library);
  register_unboxed<ops::relu>(library);
  register_unboxed<ops::relu_>(library);
  register_unboxed<ops::gelu>(library);
  register_unboxed<ops::silu>(library);
  // Comparisons.
  register_unboxed<ops::eq_Tensor>(library);
  register_unboxed<ops::eq_Scalar>(library);
  register_unboxed<ops::ne_Tensor>(library);
  register_unboxed<ops::ne_Scalar>(library);
  register_unboxed<ops::lt_Tensor>(library);
  register_unboxed<ops::lt_Scalar>(library);
  register_unboxed<ops::le_Tensor>(library);
  register_unboxed<ops::le_Scalar>(library);
  register_unboxed<ops::gt_Tensor>(library);
  register_unboxed<ops::gt_Scalar>(library);
  register_unboxed<ops::ge_Tensor>(library);
  register_unboxed<ops::ge_Scalar>(library);
  // Reductions, softmax, matmuls.
  register_unboxed<ops::sum_dim_IntList>(library);
  register_unboxed<ops::mean_dim>(library);
  register_unboxed<ops::amax>(library);
  register_unboxed<ops::max>(library);
  register_unboxed<ops::max_dim>(library);
  register_unboxed<ops::argmax>(library);
  register_unboxed<ops::any>(library);
  register_unboxed<ops::any_dim>(library);
  register_unboxed<ops::cumsum>(library);
  register_unboxed<ops::native_layer_norm>(library);
  register_unboxed<ops::_softmax>(library);
  register_unboxed<ops::_log_softmax>(library);
  register_unboxed<ops::mm>(library);
  register_unboxed<ops::bmm>(library);
  register_unboxed<ops::addmm>(library);
  // Backward kernels of the above.
  register_unboxed<ops::threshold_backward>(library);
  register_unboxed<ops::gelu_backward>(library);
  register_unboxed<ops::silu_backward>(library);
  register_unboxed<ops::sigmoid_backward>(library);
  register_unboxed<ops::tanh_backward>(library);
  register_unboxed<ops::_softmax_backward_data>(library);
  register_unboxed<ops::_log_softmax_backward_data>(library);
  register_unboxed<ops::native_layer_norm_backward>(library);
}

}  // namespace torch_neuron
