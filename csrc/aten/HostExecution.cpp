// Note [Host execution]
// The boxed kernel behind every ATen op that has no dedicated neuron kernel. Simulated HBM is
// host memory, so instead of copying arguments to the CPU and results back (ATen's
// cpu_fallback), the op runs ATen's CPU kernel directly on the device memory:
//   1. neuron tensors in the arguments are replaced by CPU views of the same bytes
//      (HostView), generator arguments by a fresh CPU generator seeded from the (seed, offset)
//      of the given neuron generator or, when none is given, of the device's default generator
//      (Note [Philox generator]); a neuron `device=` argument by the CPU;
//   2. the CPU kernel runs with this thread's CPU allocations redirected into the device's
//      HBM (AllocateOnDevice), so new outputs are born in device memory;
//   3. results become neuron tensors again: outputs that alias an argument get that argument's
//      neuron storage back, new outputs adopt the HBM block they were allocated in;
//      arguments the kernel resized or restrided get their new storage and metadata;
//   4. the op is charged to the simulated clock as the policy table (OpPolicy) says: on the
//      engines for device ops, as a host round trip for fallback ops.
// The result is bit-identical to CPU and costs no copies.
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "aten/KnownValues.h"
#include "aten/Charge.h"
#include "aten/DtypePolicy.h"
#include "aten/Float64Narrowing.h"
#include "aten/Float64WriteBack.h"
#include "aten/HostExecution.h"
#include "aten/IndexChecks.h"
#include "aten/OpPolicy.h"
#include "aten/OpTracking.h"
#include "aten/OpWork.h"
#include "aten/PredictOnly.h"
#include "aten/TensorArguments.h"
#include "aten/Unsupported.h"
#include "runtime/AllocateOnDevice.h"
#include "runtime/Generator.h"
#include "runtime/HostView.h"
#include "runtime/Runtime.h"
#include "runtime/Stream.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

bool is_generator(const c10::Argument& argument) {
  c10::TypePtr type = argument.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  return type->kind() == c10::TypeKind::GeneratorType;
}

struct OpInfo {
  std::string name;       // "aten::add.Tensor"
  std::string base_name;  // "add"
  OpClass op_class;
  OpCounter* counter;
  std::vector<size_t> generator_arguments;  // positions of Generator? arguments in the schema
  // The CPU kernel misreads a first argument with a zero stride along the reduced dimension
  // (median/nanmedian with dim return garbage); CUDA's kernels make it contiguous first.
  bool dense_first_argument;
  // The op writes only some elements of the argument it writes (indexed and masked writes);
  // every other op writes all of it (Note [Float64 write-back]).
  bool partial_write;
  // running_mean and running_var are written although the schema does not say so.
  bool writes_running_stats;
  // A pooling op's kernel_size argument, -1 for other ops (Note [Pooling windows]).
  int pool_window_argument;
};

// Name, class and counter per operator, computed once (schemas live as long as the process).
// Each thread remembers the operators it ran in a direct-mapped table (no lock, no hashing
// division), so the common case is one comparison; a miss looks in the shared table.
struct RecentOp {
  const c10::FunctionSchema* schema = nullptr;
  const OpInfo* info = nullptr;
};
constexpr size_t kRecentSlots = 256;  // more than the distinct ops of a typical model
using RecentOps = std::array<RecentOp, kRecentSlots>;

const OpInfo& info_for(const c10::OperatorHandle& op) {
  const auto* schema = &op.schema();
  // Per thread and on the heap: the library's thread_locals must stay small (Note [Per-op
  // thread locals]). Schemas are heap objects at least 16 bytes apart: the low bits carry no
  // information.
  RecentOp& slot = per_thread<RecentOps, RecentOp>()[(reinterpret_cast<uintptr_t>(schema) >> 4) %
                                                     kRecentSlots];
  if (slot.schema == schema) return *slot.info;
  static std::mutex mutex;
  static auto* shared = new std::unordered_map<const c10::FunctionSchema*, OpInfo>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = shared->find(schema);
  if (it == shared->end()) {
    std::string name = schema->name();
    const OpClass op_class = classify_op(name);
    if (!schema->overload_name().empty()) name += "." + schema->overload_name();
    std::string base_name = schema->name().substr(schema->name().find("::") + 2);
    OpCounter* counter = &op_counter(name);
    std::vector<size_t> generators;
    for (size_t i = 0; i < schema->arguments().size(); ++i) {
      if (is_generator(schema->arguments()[i])) generators.push_back(i);
    }
    const bool dense_first = base_name == "median" || base_name == "nanmedian";
    it = shared->emplace(schema, OpInfo{name, base_name, op_class, counter, generators,
                                        dense_first, writes_part_of_argument(base_name),
                                        updates_unmarked_running_stats(base_name),
                                        pool_window_argument(base_name, *schema)})
             .first;
  }
  slot = {schema, &it->second};
  return it->second;
}

// Ops that, like their CUDA kernels, accept CPU tensors next to device tensors (indices).
bool accepts_cpu_tensors(const std::string& name) {
  return name.rfind("aten::index", 0) == 0 || name.rfind("aten::_index_put_impl_", 0) == 0 ||
         name.rfind("aten::_unsafe_index", 0) == 0;
}

// A neuron tensor over `storage` shaped like `like`.
at::Tensor wrap(const c10::Storage& storage, const at::Tensor& like) {
  return tensor_like(storage, c10::DispatchKey::PrivateUse1, like);
}

bool has_zero_stride(const at::Tensor& t) {
  if (!t.defined()) return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) return true;
  }
  return false;
}

// A float32 copy of a float64 tensor for a narrowed run, laid out like it: kernels lay their
// results out after their inputs' strides, so a copy with other strides would give results
// other strides than the CPU's. A view that selects few elements of a large storage (a column)
// gets a dense copy with the same stride order instead, to keep the copy small.
at::Tensor narrowed_copy(const at::Tensor& t) {
  const auto options = t.options().dtype(at::kFloat);
  int64_t span = 1;  // elements from the first to the last one the view reaches
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
  at::Tensor copy = t.numel() > 0 && span <= 2 * t.numel()
                        ? at::empty_strided(t.sizes(), t.strides(), options)
                        : at::empty_like(t, options);
  return copy.copy_(t);
}

// What the host run needs to put things back.
struct Converted {
  size_t input;         // the neuron tensor's position in HostRun::inputs_
  at::Tensor view;      // its CPU view, or a float32 copy of a float64 tensor (narrowed)
  bool narrowed;
  bool written;         // the schema marks the argument as written (in-place, out=)
  bool marked;          // narrowed with its inexact elements marked (Note [Float64 write-back])
  c10::StorageImpl* alias = nullptr;  // the view's storage as host_view made it
};

class HostRun {
 public:
  // `narrowing`: compute float64 neuron tensors in float32 as it says; nullptr: exactly.
  HostRun(const OpInfo& info, const c10::FunctionSchema& schema, torch::jit::Stack& stack,
          const NarrowingPlan* narrowing)
      : info_(info),
        schema_(schema),
        stack_(stack),
        begin_(stack.size() - schema.arguments().size()),
        narrowing_(narrowing) {}

  // The views are done with once the op has run (Note [Recycled host views]).
  ~HostRun() {
    for (auto& c : converted_) {
      if (!c.narrowed && c.view.storage().unsafeGetStorageImpl() == c.alias) {
        recycle_host_view(std::move(c.view));
      }
    }
  }
  HostRun(const HostRun&) = delete;
  HostRun& operator=(const HostRun&) = delete;

  // Step 1: device checks and conversion of the arguments. Returns the op's device.
  c10::DeviceIndex convert_arguments() {
    marks_inexact_ = narrowing_ != nullptr && info_.partial_write &&
                     !reads_overwritten_elements(info_.base_name, schema_,
                                                 c10::ArrayRef<c10::IValue>(stack_).slice(begin_));
    for (size_t i = begin_; i < stack_.size(); ++i) {
      auto& value = stack_[i];
      const auto& argument = schema_.arguments()[i - begin_];
      const auto* alias = argument.alias_info();
      written_ = (alias != nullptr && alias->isWrite()) ||
                 (info_.writes_running_stats &&
                  (argument.name() == "running_mean" || argument.name() == "running_var"));
      out_argument_ = argument.is_out();
      self_argument_ = argument.name() == "self";
      if (value.isTensor()) {
        value = convert(value.toTensor());
        if (i == begin_ && info_.dense_first_argument && has_zero_stride(value.toTensor())) {
          value = value.toTensor().contiguous();
        }
      } else if (value.isTensorList()) {
        auto list = value.toTensorList();
        for (size_t j = 0; j < list.size(); ++j) list[j] = convert(list[j]);
        value = list;
      } else if (value.isOptionalTensorList()) {
        auto list = value.toOptionalTensorList();
        for (size_t j = 0; j < list.size(); ++j) {
          std::optional<at::Tensor> t = list[j];
          if (t.has_value()) list[j] = convert(*t);
        }
        value = list;
      } else if (value.isDevice() && value.toDevice().type() == kNeuron) {
        note_device(value.toDevice());
        value = c10::Device(c10::kCPU);
      }
    }
    if (device_ < 0) device_ = current_device();
    // Random ops draw from a CPU generator seeded from the neuron generator they were given, or
    // else from the device's default one (which torch.neuron.manual_seed seeds), never from the
    // CPU's default generator.
    for (size_t argument : info_.generator_arguments) {
      const size_t i = begin_ + argument;
      std::optional<at::Generator> gen;
      if (stack_[i].isGenerator()) gen = stack_[i].toGenerator();
      stack_[i] = host_generator_for(gen, device_);
    }
    return device_;
  }

  // Step 3: results back to neuron; returns the bytes of the outputs.
  uint64_t convert_results(size_t num_returns) {
    sync_mutated_arguments();
    uint64_t bytes = 0;
    result_index_ = 0;
    for (size_t i = stack_.size() - num_returns; i < stack_.size(); ++i) {
      auto& value = stack_[i];
      if (value.isTensor()) {
        value = back_to_neuron(std::move(value).toTensor());
        bytes += value.toTensor().defined() ? value.toTensor().nbytes() : 0;
      } else if (value.isTensorList()) {
        auto list = value.toTensorList();
        for (size_t j = 0; j < list.size(); ++j) {
          list[j] = back_to_neuron(list[j]);
          bytes += list.get(j).nbytes();
        }
        value = list;
      }
    }
    return bytes;
  }

  // Arguments the kernel resized, restrided or re-pointed: carry that over to the originals
  // (and write back narrowed float64 arguments). Only arguments the schema marks as written
  // can have changed (the contract that functionalization relies on too), so the others are not
  // compared.
  void sync_mutated_arguments() {
    for (auto& c : converted_) {
      if (!c.written) continue;
      if (c.narrowed) {
        write_back_narrowed(c);
        continue;
      }
      auto* view_storage = c.view.storage().unsafeGetStorageImpl();
      const at::Tensor& orig = original(c);
      auto* orig_storage = orig.storage().unsafeGetStorageImpl();
      if (view_storage->data() != orig_storage->data() ||
          view_storage->nbytes() != orig_storage->nbytes()) {
        if (view_storage == c.alias) {
          // The kernel grew the storage in place (resizing an out= argument). Move the new
          // memory into the neuron storage, so that all tensors sharing it (the base of a view)
          // see it, as they share a resized storage on the CPU.
          c10::DataPtr grown = view_storage->set_data_ptr(c10::DataPtr(nullptr, c10::kCPU));
          grown.unsafe_set_device(c10::Device(kNeuron, device_));
          void* data = grown.get();
          orig_storage->set_data_ptr_noswap(std::move(grown));
          orig_storage->set_nbytes(view_storage->nbytes());
          // The alias points at it without owning it, as host_view made it.
          view_storage->set_data_ptr_noswap(c10::DataPtr(data, c10::kCPU));
        } else {
          // The kernel gave the argument another storage (set_): adopt it.
          adopt_storage(c.view, device_);
          orig.unsafeGetTensorImpl()->set_storage_keep_dtype(c.view.storage());
        }
      }
      if (c.view.sizes() != orig.sizes() || c.view.strides() != orig.strides() ||
          c.view.storage_offset() != orig.storage_offset()) {
        orig.unsafeGetTensorImpl()->set_sizes_and_strides(c.view.sizes(), c.view.strides(),
                                                                c.view.storage_offset());
      }
    }
  }

  bool narrowing() const { return narrowing_ != nullptr; }
  uint64_t input_bytes() const { return input_bytes_; }
  c10::ArrayRef<at::Tensor> inputs() const { return inputs_; }

 private:
  void note_device(const c10::Device& device) {
    const auto index = device.index() >= 0 ? device.index() : current_device();
    if (device_ < 0) device_ = index;
    TORCH_CHECK(device_ == index, "Expected all tensors to be on the same device, but found at "
                "least two devices, neuron:", static_cast<int>(device_), " and neuron:",
                static_cast<int>(index), "!");
  }

  at::Tensor convert(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (!on_neuron(t)) {
      // CUDA's rule: CPU tensors may join device ops only as 0-dim scalars they read (indexing
      // ops also take CPU index tensors); an argument the op writes, or the tensor an indexing
      // op reads from, must be on the device.
      const bool cpu_index = accepts_cpu_tensors(info_.name) && !self_argument_;
      TORCH_CHECK(!t.device().is_cpu() || (!written_ && (t.dim() == 0 || cpu_index)),
                  "Expected all tensors to be on the same device, but found at least two "
                  "devices, neuron and ", t.device(), "! (", info_.name, ")");
      return t;
    }
    note_device(t.device());
    for (auto& c : converted_) {
      if (original(c).unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        c.written = c.written || written_;  // add(a, b, out=a): a is written
        return c.view;
      }
    }
    const bool narrow = narrowing_ != nullptr && t.scalar_type() == at::kDouble;
    at::Tensor view = host_view(t, /*resizable=*/true);
    for (const auto& c : converted_) {
      // Tensors sharing a neuron storage share one CPU alias of it, so that the kernel sees
      // their overlap and handles or refuses it as on the CPU.
      if (!narrow && !c.narrowed && original(c).storage().is_alias_of(t.storage())) {
        view.unsafeGetTensorImpl()->set_storage_keep_dtype(c.view.storage());
        break;
      }
    }
    const bool marked = narrow && written_ && marks_inexact_;
    if (narrow) {
      warn_float64_narrowing();
      const at::Tensor original = view;
      view = narrowed_copy(original);
      if (marked) mark_inexact_elements(view, original);
      narrowed_any_ = true;
    }
    // An out= argument is only written: its bytes count once, as an output.
    if (!out_argument_) input_bytes_ += t.nbytes();
    c10::StorageImpl* alias = view.storage().unsafeGetStorageImpl();
    converted_.push_back({inputs_.size(), view, narrow, written_, marked, alias});
    inputs_.push_back(t);
    return view;
  }

  // See Note [Float64 write-back].
  void write_back_narrowed(const Converted& c) {
    const at::Tensor& orig = original(c);
    if (c.view.sizes() != orig.sizes()) {
      // The kernel resized the out= argument, laying it out after its inputs (a transposed
      // input gives a transposed result): the same layout for the float64 original.
      orig.resize_(c.view.sizes());
      if (c.view.is_non_overlapping_and_dense()) {
        orig.as_strided_(c.view.sizes(), c.view.strides());
      }
      host_view(orig).copy_(c.view);
      return;
    }
    write_back_float64(host_view(orig), c.view, info_.partial_write, c.marked);
  }

  at::Tensor back_to_neuron(at::Tensor t) {
    // The dtype PyTorch gives this result (Note [Float64 narrowing checks]).
    std::optional<c10::ScalarType> dtype;
    if (narrowing_ != nullptr && result_index_ < narrowing_->result_dtypes.size()) {
      dtype = narrowing_->result_dtypes[result_index_];
    }
    ++result_index_;
    if (!t.defined() || on_neuron(t)) return t;
    if (t.is_quantized()) refuse_quantized(info_.name);
    if (t.is_sparse() || t.is_sparse_csr()) refuse_sparse(info_.name);
    if (t.is_nested()) refuse_nested(info_.name);
    // Returned argument (in-place and out= ops) or a view of one.
    for (const auto& c : converted_) {
      if (c.view.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return original(c);
    }
    for (const auto& c : converted_) {
      if (!c.narrowed &&
          t.storage().unsafeGetStorageImpl() == c.view.storage().unsafeGetStorageImpl()) {
        return wrap(original(c).storage(), t);
      }
    }
    if (narrowed_any_ && dtype.has_value() &&
        ((t.scalar_type() == at::kFloat && *dtype == at::kDouble) ||
         (t.scalar_type() == at::kComplexFloat && *dtype == at::kComplexDouble))) {
      // Computed in float32 (complex64) for float64 inputs: hand back the dtype the op promises.
      // (Only these: narrowing changes no other dtype, and a meta kernel can be wrong.)
      at::Tensor out = at::empty_strided(t.sizes(), t.strides(),
                                         t.options().dtype(*dtype).device(
                                             c10::Device(kNeuron, device_)));
      host_view(out).copy_(t);
      return out;
    }
    return adopt_host_result(std::move(t), device_);
  }

  const at::Tensor& original(const Converted& c) const { return inputs_[c.input]; }

  const OpInfo& info_;
  const c10::FunctionSchema& schema_;
  torch::jit::Stack& stack_;
  size_t begin_;
  const NarrowingPlan* narrowing_;
  bool narrowed_any_ = false;
  // Narrowed arguments this op writes get their inexact elements marked.
  bool marks_inexact_ = false;
  size_t result_index_ = 0;  // position of the result back_to_neuron converts, lists flattened
  bool written_ = false;
  bool self_argument_ = false;  // the argument being converted is the schema's `self`
  bool out_argument_ = false;
  c10::DeviceIndex device_ = -1;
  // Small vectors: most ops have a few tensor arguments, and this runs for every op.
  c10::SmallVector<Converted, 4> converted_;
  c10::SmallVector<at::Tensor, 4> inputs_;
  uint64_t input_bytes_ = 0;
};

void check_fallback_allowed(const std::string& name) {
  TORCH_CHECK(!fallback_is_error(), "operator ", name,
              " is not run by Trainium and would fall back to the CPU, which "
              "TORCH_NEURON_FALLBACK=error forbids. Unset TORCH_NEURON_FALLBACK (or call "
              "torch_neuron.set_fallback_error(False)) to allow CPU fallback.");
}

// Step 4 of Note [Host execution]: the op on the simulated clock (Note [One charge path]), as
// device work or as a host round trip.
void charge_host_op(const OpInfo& info, bool fallback, c10::DeviceIndex device,
                    c10::ArrayRef<at::Tensor> inputs, uint64_t input_bytes, uint64_t out_bytes,
                    c10::ArrayRef<c10::IValue> outputs, int64_t pool_window) {
  if (fallback) {
    charge(current_queue(device), info.name, info.counter,
           {trnsim::HostRoundTrip{input_bytes, out_bytes}},
           [&] { return "CPU fallback: " + describe_tensors(inputs); }, Placement::Fallback);
    return;
  }
  charge(current_queue(device), info.name, info.counter,
         describe_op(info.op_class, info.name, inputs, outputs, input_bytes + out_bytes,
                     pool_window),
         [&] { return describe_tensors(inputs); }, Placement::Device,
         Operands{inputs, {}, outputs, {}});
}

// Steps 1 to 3 of Note [Host execution].
void execute(const c10::OperatorHandle& op, HostRun& run, torch::jit::Stack* stack,
             c10::DeviceIndex& device, uint64_t& out_bytes) {
  device = run.convert_arguments();
  try {
    AllocateOnDevice allocate_on(device);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (const std::exception&) {
    // A kernel may resize an out= argument before it raises; the argument keeps that shape, as
    // on the CPU. (A narrowed run is retried exactly, which does this.)
    if (!run.narrowing()) run.sync_mutated_arguments();
    throw;
  }
  out_bytes = run.convert_results(op.schema().returns().size());
}

}  // namespace

void run_on_host(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = info_for(op);
  const auto& schema = op.schema();
  const size_t num_arguments = schema.arguments().size();
  const auto arguments = torch::jit::last(*stack, num_arguments);
  const bool fallback =
      info.op_class == OpClass::Fallback || complex_round_trip(arguments);
  if (fallback) check_fallback_allowed(info.name);
  // Read before the run replaces the arguments with the results.
  const int64_t window = info.pool_window_argument < 0
                             ? 1
                             : pool_window(info.base_name, arguments[info.pool_window_argument]);
  if (!execution_enabled() && small_and_known(arguments)) {
    // Note [Known values in predict-only mode]: computed, and its results are known.
    c10::SmallVector<at::Tensor, 2> written;  // (the stack's arguments are gone after the run)
    for (size_t i = 0; i < num_arguments; ++i) {
      const auto* alias = schema.arguments()[i].alias_info();
      if (alias != nullptr && alias->isWrite() && arguments[i].isTensor()) {
        written.push_back(arguments[i].toTensor());
      }
    }
    ComputeKnownValues computing;
    run_on_host(op, stack);
    for (const auto& value : torch::jit::last(*stack, schema.returns().size())) {
      if (value.isTensor()) mark_values_known(value.toTensor());
    }
    for (const auto& t : written) mark_values_known(t);
    return;
  }
  if (!execution_enabled()) {
    // Note [Predict-only execution]: the results' geometry from meta kernels, no values (so
    // no index checks and no float64 narrowing either).
    const PredictedOp predicted = predict_on_meta(op, stack);
    charge_host_op(info, fallback, predicted.device, predicted.inputs, predicted.input_bytes,
                   predicted.output_bytes, torch::jit::last(*stack, schema.returns().size()),
                   window);
    return;
  }

  if (info.op_class == OpClass::GpSimd) {
    try {
      check_index_bounds(info.base_name, arguments);
    } catch (const c10::Error& ours) {
      raise_index_error_as_cpu(op, arguments, ours);
    }
  }
  NarrowingPlan narrowing;
  if (!fallback && float64_mode() == Float64Mode::Narrow) {
    narrowing = plan_float64_narrowing(op, arguments);
  }
  std::optional<HostRun> run;
  c10::DeviceIndex device = -1;
  uint64_t out_bytes = 0;
  if (narrowing.narrow) {
    const size_t begin = stack->size() - num_arguments;
    auto saved_arguments = copy_arguments(arguments);
    try {
      run.emplace(info, schema, *stack, &narrowing);
      execute(op, *run, stack, device, out_bytes);
    } catch (const std::exception&) {
      // The float32 copies made the CPU kernel raise where the float64 op is valid (Note
      // [Float64 narrowing checks]); nothing was written back, so run it exactly.
      run.reset();
      stack->resize(begin);
      stack->insert(stack->end(), saved_arguments.begin(), saved_arguments.end());
      narrowing.narrow = false;
    }
  }
  if (!narrowing.narrow) {
    run.emplace(info, schema, *stack, nullptr);
    execute(op, *run, stack, device, out_bytes);
  }

  const auto outputs = torch::jit::last(*stack, schema.returns().size());
  if (!fallback && info.op_class != OpClass::GpSimd) warn_if_int64_overflows(info.name, outputs);
  charge_host_op(info, fallback, device, run->inputs(), run->input_bytes(), out_bytes, outputs,
                 window);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_on_host>());
}

}  // namespace torch_neuron
