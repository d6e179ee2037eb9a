#include "aten/PredictOnly.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <utility>

#include "aten/KnownValues.h"
#include "runtime/HostView.h"
#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"
#include "runtime/Settings.h"

namespace torch_neuron {
namespace {

std::atomic<bool>& execution_flag() {
  static std::atomic<bool> flag{settings::read_bool("TORCH_NEURON_EXECUTE")};
  return flag;
}


c10::Storage meta_storage(size_t nbytes) {
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                      c10::DataPtr(nullptr, c10::Device(c10::kMeta)),
                      c10::GetAllocator(c10::kMeta), /*resizable=*/true);
}

c10::Storage neuron_storage(size_t nbytes, c10::DeviceIndex device) {
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes,
                      device_allocator().allocate_on(device, nbytes), &device_allocator(),
                      /*resizable=*/true);
}

// One predicted call: the meta twins of its neuron arguments, sharing a meta storage where the
// neuron tensors share one, so that results aliasing an argument can be told apart.
class MetaRun {
 public:
  explicit MetaRun(PredictedOp& predicted) : predicted_(predicted) {}

  c10::IValue convert(const c10::IValue& value, bool written, bool out) {
    if (value.isTensor()) return to_meta(value.toTensor(), written, out);
    if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) list.push_back(to_meta(t, written, out));
      return list;
    }
    if (value.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : value.toOptionalTensorList()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(to_meta(*t, written, out))
                                     : std::nullopt);
      }
      return list;
    }
    if (value.isDevice() && value.toDevice().type() == kNeuron) {
      note_device(value.toDevice().index());
      return c10::Device(c10::kMeta);
    }
    if (value.isGenerator()) return c10::IValue();  // meta kernels draw nothing
    return value;
  }

  // Written arguments take the meta run's geometry; one that grew gets a larger HBM block.
  void sync_written() {
    for (auto& [original, meta, written] : tensors_) {
      if (!written) continue;
      c10::StorageImpl* storage = original.storage().unsafeGetStorageImpl();
      const size_t needed = meta.storage().nbytes();
      if (needed > storage->nbytes()) {
        storage->set_data_ptr_noswap(device_allocator().allocate_on(device(), needed));
        storage->set_nbytes(needed);
      }
      if (meta.sizes() != original.sizes() || meta.strides() != original.strides() ||
          meta.storage_offset() != original.storage_offset()) {
        original.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes(), meta.strides(),
                                                              meta.storage_offset());
      }
    }
  }

  at::Tensor to_neuron(const at::Tensor& result) {
    if (!result.defined() || !result.is_meta()) return result;
    for (const auto& entry : tensors_) {
      if (std::get<1>(entry).unsafeGetTensorImpl() == result.unsafeGetTensorImpl()) {
        return std::get<0>(entry);
      }
    }
    const c10::StorageImpl* key = result.storage().unsafeGetStorageImpl();
    for (const auto& [meta, neuron] : storages_) {
      if (meta == key) return tensor_like(neuron, c10::DispatchKey::PrivateUse1, result);
    }
    // A new result: a fresh block (shared by the results that share its meta storage).
    c10::Storage storage = neuron_storage(result.storage().nbytes(), device());
    storages_.emplace_back(key, storage);
    new_storages_.push_back(result.storage());  // keeps `key` from being reused meanwhile
    return tensor_like(storage, c10::DispatchKey::PrivateUse1, result);
  }

  c10::DeviceIndex device() {
    if (predicted_.device < 0) predicted_.device = current_device();
    return predicted_.device;
  }

 private:
  void note_device(c10::DeviceIndex index) {
    if (index < 0) index = current_device();
    if (predicted_.device < 0) predicted_.device = index;
    TORCH_CHECK(predicted_.device == index, "Expected all tensors to be on the same device, but "
                "found at least two devices, neuron:", static_cast<int>(predicted_.device),
                " and neuron:", static_cast<int>(index), "!");
  }

  at::Tensor to_meta(const at::Tensor& t, bool written, bool out) {
    if (!t.defined()) return t;
    if (!on_neuron(t)) {
      // A CPU tensor (a 0-dim scalar, CPU indices) joins as a meta tensor of its shape.
      TORCH_CHECK(t.device().is_cpu() || t.is_meta(), "Expected all tensors to be on the same "
                  "device, but found at least two devices, neuron and ", t.device(), "!");
      // A wrapped Python number (x * 0.5 reaching mul.Tensor) joins as it is: a meta twin
      // would lose its weaker part in type promotion (a float32 0-dim tensor times a Python
      // float would predict float64), and meta kernels take CPU scalars as any device does.
      if (t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
      return t.is_meta() ? t : meta_like(t);
    }
    note_device(t.device().index());
    for (auto& [original, meta, was_written] : tensors_) {
      if (original.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        was_written = was_written || written;
        return meta;
      }
    }
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    c10::Storage storage;
    for (const auto& [meta, neuron] : storages_) {
      if (neuron.unsafeGetStorageImpl() == key) {
        storage = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
            const_cast<c10::StorageImpl*>(meta)));
      }
    }
    if (!storage) {
      storage = meta_storage(t.storage().nbytes());
      storages_.emplace_back(storage.unsafeGetStorageImpl(), t.storage());
      new_storages_.push_back(storage);
    }
    at::Tensor meta = tensor_like(storage, c10::DispatchKey::Meta, t);
    if (!out) predicted_.input_bytes += t.nbytes();
    tensors_.emplace_back(t, meta, written);
    predicted_.inputs.push_back(t);
    return meta;
  }

  PredictedOp& predicted_;
  // (neuron argument, its meta twin, written by the op)
  c10::SmallVector<std::tuple<at::Tensor, at::Tensor, bool>, 4> tensors_;
  // meta storage -> the neuron storage it stands for
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages_;
  c10::SmallVector<c10::Storage, 4> new_storages_;
};

// Meta kernels raise these where an op needs values or has no shape function. (Python meta
// kernels raise Python exceptions, which reach C++ as other std::exceptions: their message
// tells.)
bool needs_values(const std::exception& e) {
  if (dynamic_cast<const c10::NotImplementedError*>(&e) != nullptr) return true;
  const auto* error = dynamic_cast<const c10::Error*>(&e);
  const std::string message = error != nullptr ? error->what_without_backtrace() : e.what();
  for (const char* part : {"Meta", "meta", "data-dependent", "data dependent", "unimplemented",
                           "_local_scalar_dense", "predict-only"}) {
    if (message.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool execution_enabled() {
  return execution_flag().load(std::memory_order_relaxed) || computing_known_values();
}

void set_execution_enabled(bool enabled) {
  settings::set_from_api("TORCH_NEURON_EXECUTE", enabled ? "1" : "0");
  execution_flag().store(enabled);
}

at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined()) return t;
  return tensor_like(meta_storage(t.storage().nbytes()), c10::DispatchKey::Meta, t);
}

at::Tensor neuron_like(const at::Tensor& meta, c10::DeviceIndex device) {
  if (!meta.defined()) return meta;
  return tensor_like(neuron_storage(meta.storage().nbytes(), device),
                     c10::DispatchKey::PrivateUse1, meta);
}

at::Tensor compute_view(const at::Tensor& t) {
  if (!on_neuron(t)) return t;
  return execution_enabled() ? host_view(t) : meta_like(t);
}

std::optional<at::Tensor> compute_view(const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return compute_view(*t);
}

at::Tensor device_result(at::Tensor result, c10::DeviceIndex device) {
  if (result.defined() && result.is_meta()) return neuron_like(result, device);
  return adopt_host_result(std::move(result), device);
}

void refuse_without_values(const std::string& what) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, what, " needs the values of neuron tensors, which "
                              "predict-only mode (TORCH_NEURON_EXECUTE=0 or "
                              "torch_neuron.set_execute(False)) does not compute. Run this part "
                              "with execution on (torch_neuron.set_execute(True)), or leave it "
                              "out of the prediction.");
}

PredictedOp predict_on_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  PredictedOp predicted;
  MetaRun run(predicted);
  const auto& schema = op.schema();
  const size_t begin = stack->size() - schema.arguments().size();
  for (size_t i = begin; i < stack->size(); ++i) {
    const auto& argument = schema.arguments()[i - begin];
    const bool written = argument.alias_info() != nullptr && argument.alias_info()->isWrite();
    (*stack)[i] = run.convert((*stack)[i], written, argument.is_out());
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
  } catch (const std::exception& e) {
    if (!needs_values(e)) throw;
    const auto* error = dynamic_cast<const c10::Error*>(&e);
    refuse_without_values("operator " + schema.name() +
                          " (its output shape depends on its values, or it has no shape "
                          "function: " + (error != nullptr ? error->what_without_backtrace()
                                                           : std::string(e.what())) + ")");
  }
  run.sync_written();
  const size_t returns = schema.returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) {
    auto& value = (*stack)[i];
    if (value.isTensor()) {
      value = run.to_neuron(value.toTensor());
      if (value.toTensor().defined()) predicted.output_bytes += value.toTensor().nbytes();
    } else if (value.isTensorList()) {
      auto list = value.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        list[j] = run.to_neuron(list.get(j));
        predicted.output_bytes += list.get(j).nbytes();
      }
      value = list;
    }
  }
  run.device();
  return predicted;
}

}  // namespace torch_neuron
