// torch_neuron._C: the Python binding. Only glue lives here; behaviour is in the runtime.
#include <ATen/Context.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <trnsim/cost.h>
#include <trnsim/device.h>
#include <trnsim/fault.h>
#include <trnsim/system.h>
#include <trnsim/instance.h>
#include <trnsim/queue.h>

#include "aten/CompiledKernels.h"
#include "aten/DtypePolicy.h"
#include "aten/GraphSchedule.h"
#include "aten/HostExecution.h"
#include "aten/OpPolicy.h"
#include "aten/OpTracking.h"
#include "aten/PredictOnly.h"
#include "profiler/SimulationOverhead.h"
#include "runtime/DeviceAllocator.h"
#include "python/Distributed.h"
#include "python/Nki.h"
#include "runtime/Runtime.h"
#include "runtime/Settings.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"
#include "runtime/Generator.h"

namespace py = pybind11;

namespace torch_neuron {
namespace {

py::dict instance_info() {
  const auto& inst = system().instance();
  const auto& chip = *inst.chip;
  py::dict d;
  d["name"] = inst.name;
  d["chip"] = chip.name;
  d["core_version"] = chip.core_version;
  d["chips"] = inst.chips;
  d["cores"] = inst.core_count();
  d["logical_cores_per_chip"] = inst.logical_cores_per_chip;
  d["physical_cores_per_logical"] = inst.physical_cores_per_logical();
  d["hbm_bytes_per_core"] = inst.hbm_bytes_per_core();
  d["hbm_gbps_per_chip"] = chip.hbm_gbps;
  d["bf16_tflops_per_chip"] = chip.bf16_tflops;
  d["fp32_tflops_per_chip"] = chip.fp32_tflops;
  d["fp8_tflops_per_chip"] = chip.fp8_tflops;
  // The peaks the cost model uses, from the TensorE clock and array size (tensor_engine.h):
  // MFU is measured against these.
  d["peak_bf16_tflops_per_core"] = trnsim::peak_flops_per_ns(inst, trnsim::Precision::BF16) / 1e3;
  d["peak_fp32_tflops_per_core"] = trnsim::peak_flops_per_ns(inst, trnsim::Precision::FP32) / 1e3;
  d["peak_fp8_tflops_per_core"] = trnsim::peak_flops_per_ns(inst, trnsim::Precision::FP8) / 1e3;
  // What a core's DMA queues stream between HBM and SBUF: the HBM bandwidth utilization's base.
  d["stream_gbps_per_core"] = inst.core_stream_gbps();
  d["tensor_engine_ghz"] = chip.tensor_ghz;
  d["vector_engine_ghz"] = chip.vector_ghz;
  d["scalar_engine_ghz"] = chip.scalar_ghz;
  d["gpsimd_engine_ghz"] = chip.gpsimd_ghz;
  d["sbuf_bytes_per_core"] = chip.sbuf_bytes_per_core * inst.physical_cores_per_logical();
  d["psum_bytes_per_core"] = chip.psum_bytes_per_core * inst.physical_cores_per_logical();
  d["link_gbps_per_chip"] = chip.link_gbps;
  return d;
}

py::dict device_info(c10::DeviceIndex index) {
  auto& dev = device(resolve_device(index));
  py::dict d = instance_info();
  d["index"] = dev.index();
  d["core"] = dev.core();
  d["chip_index"] = dev.chip();
  return d;
}

py::dict engine_times(const std::array<double, trnsim::kEngineCount>& engine_ns) {
  py::dict engines;
  for (int e = 0; e < trnsim::kEngineCount; ++e) {
    if (engine_ns[e] > 0) engines[trnsim::engine_name(static_cast<trnsim::Engine>(e))] = engine_ns[e];
  }
  return engines;
}

// A compiled graph's ops (Note [Compiled graph schedule]), each as a dict like a record's.
py::list trace_parts(const std::vector<trnsim::TraceSpan>& parts) {
  py::list out;
  for (const auto& p : parts) {
    py::dict d;
    d["name"] = p.name;
    d["start_ns"] = p.start_ns;
    d["duration_ns"] = p.duration_ns;
    d["engine_ns"] = engine_times(p.engine_ns);
    d["bytes"] = p.bytes;
    out.append(d);
  }
  return out;
}

// Trace records of every device as dicts, emptying the simulator's buffers.
py::list take_trace() {
  py::list out;
  for (c10::DeviceIndex i = 0; i < visible_device_count(); ++i) {
    if (!system().device(i).hbm_reserved()) continue;  // never used: no queues either
    for (auto& r : system().device(i).take_trace()) {
      py::dict d;
      d["name"] = r.name;
      d["device"] = r.device;
      d["queue"] = r.queue;
      d["start_ns"] = r.start_ns;
      d["duration_ns"] = r.duration_ns;
      d["engine_ns"] = engine_times(r.engine_ns);
      d["flops"] = r.flops;
      d["bytes"] = r.bytes;
      d["detail"] = r.detail;
      if (!r.parts.empty()) d["parts"] = trace_parts(r.parts);
      out.append(d);
    }
  }
  return out;
}

const char* type_name(settings::Type type) {
  switch (type) {
    case settings::Type::Bool:
      return "bool";
    case settings::Type::Int:
      return "int";
    case settings::Type::Choice:
      return "choice";
    case settings::Type::Text:
      return "text";
  }
  return "text";
}

// The settings table (Note [Settings table]) for Python: its readers, torch_neuron.settings()
// and `python -m torch_neuron env`.
void bind_settings(py::module& m) {
  using torch::wrap_pybind_function;
  // name -> its value, typed: bool, int (None when unset) or str.
  m.def("_setting", wrap_pybind_function([](const std::string& name) -> py::object {
          switch (settings::spec(name).type) {
            case settings::Type::Bool:
              return py::bool_(settings::read_bool(name));
            case settings::Type::Int: {
              const auto value = settings::read_int(name);
              return value ? py::object(py::int_(*value)) : py::object(py::none());
            }
            default:
              return py::str(settings::read_text(name));
          }
        }));
  // [(name, value text, source, doc)] in table order; a bad value shows as the error.
  m.def("_settings", wrap_pybind_function([] {
          std::vector<std::tuple<std::string, std::string, std::string, std::string>> rows;
          for (const auto& spec : settings::table()) {
            std::string value, source;
            try {
              const auto v = settings::read(spec.name);
              value = v.text;
              source = settings::source_name(v.source);
            } catch (const c10::Error& e) {
              value = e.what_without_backtrace();
              source = "invalid";
            }
            rows.emplace_back(spec.name, value, source, spec.doc);
          }
          return rows;
        }));
  // [(name, type, default, choices, doc)]: the table itself, for docs/settings.md.
  m.def("_setting_specs", [] {
    std::vector<std::tuple<std::string, std::string, std::string, std::string, std::string>> rows;
    for (const auto& spec : settings::table()) {
      rows.emplace_back(spec.name, type_name(spec.type), spec.default_value, spec.choices,
                        spec.doc);
    }
    return rows;
  });
}

}  // namespace
}  // namespace torch_neuron

PYBIND11_MODULE(_C, m) {
  using namespace torch_neuron;
  using torch::wrap_pybind_function;  // turns c10 errors into the matching Python exceptions
  m.doc() = "torch_neuron native bindings (internal; use torch.neuron and torch_neuron)";

  // The policy table's class of an op ("aten::linalg_inv_ex" -> "fallback"), for reports that
  // tell fallbacks by design from fallbacks that are gaps.
  m.def("_op_class", wrap_pybind_function([](const std::string& name) {
          return std::string(op_class_name(classify_op(name)));
        }));
  m.def("_device_count", wrap_pybind_function([] { return int(visible_device_count()); }));
  m.def("_current_device", wrap_pybind_function([] { return int(current_device()); }));
  m.def("_set_device", wrap_pybind_function([](int index) { set_current_device(index); }));
  m.def("_exchange_device", wrap_pybind_function([](int index) {
          const auto old = current_device();
          if (index >= 0 && index != old) set_current_device(index);
          return int(old);
        }));
  m.def("_is_in_bad_fork", wrap_pybind_function(&in_bad_fork));
  // Checks the device and, on first use, arms the fork guard (see in_bad_fork()).
  m.def("_init_device", wrap_pybind_function([](int index) { device(resolve_device(index)); }));
  m.def("_synchronize", wrap_pybind_function([](int index) {
          index = resolve_device(index);
          return simulator_call([&] {
            device(index).health().check(index);  // a failed device cannot be synchronized
            return device(index).synchronize_ns();
          });
        }));
  // What recording one event adds to its stream's clock (Note [Event records]).
  m.attr("_EVENT_RECORD_NS") = trnsim::kEventRecordNs;
  m.def("_stream_clock_ns", wrap_pybind_function([](int index, int64_t stream_id) {
          const c10::Device dev(kNeuron, resolve_device(index));
          return queue_of(c10::Stream(c10::Stream::UNSAFE, dev, stream_id)).now_ns();
        }));
  m.def("_set_memory_fraction", wrap_pybind_function([](double fraction, int index) {
          device_allocator().setMemoryFraction(fraction, index);
        }));
  m.def("_get_memory_fraction", wrap_pybind_function([](int index) {
          return device_allocator().getMemoryFraction(index);
        }));
  // torch.neuron.memory_snapshot:
  // [(address, size, small_pool, [(address, size, requested, allocated)])].
  m.def("_memory_snapshot", wrap_pybind_function([](int index) {
          std::vector<std::tuple<uintptr_t, size_t, bool,
                                 std::vector<std::tuple<uintptr_t, size_t, size_t, bool>>>>
              out;
          for (const auto& segment : device_allocator().snapshot(index)) {
            std::vector<std::tuple<uintptr_t, size_t, size_t, bool>> blocks;
            for (const auto& b : segment.blocks) {
              blocks.emplace_back(b.address, b.size, b.requested, b.allocated);
            }
            out.emplace_back(segment.address, segment.size, segment.small_pool,
                             std::move(blocks));
          }
          return out;
        }));
  m.def("_inject_fault", wrap_pybind_function([](const std::string& kind, int index,
                                                   int64_t after_launches) {
          TORCH_CHECK_VALUE(after_launches >= 1, "after_launches must be >= 1 (1 = the next "
                            "launch on the device), got ", after_launches);
          check_device_index(index);
          simulator_call([&] {
            system().device(index).health().arm(trnsim::parse_fault_kind(kind),
                                                static_cast<uint64_t>(after_launches));
          });
        }));
  m.def("_device_failed", wrap_pybind_function([](int index) {
          check_device_index(index);
          return system().device(index).health().failed();
        }));
  m.def("_instance_info", wrap_pybind_function(&instance_info));
  m.def("_device_info", wrap_pybind_function([](int index) { return device_info(index); }));
  m.def("_instance_names", wrap_pybind_function([] {
          std::vector<std::string> names;
          for (const auto& spec : trnsim::instance_table()) names.push_back(spec.name);
          return names;
        }));
  m.def("_default_generator", wrap_pybind_function([](int index) {
          return py::reinterpret_steal<py::object>(
              THPGenerator_initDefaultGenerator(default_generator(resolve_device(index))));
        }));
  m.def("_register_host_kernels", wrap_pybind_function(&register_host_kernels));
  m.def("_unboxed_host_ops", wrap_pybind_function(&unboxed_host_ops));
  m.def("_set_float64_exact", wrap_pybind_function([](bool exact) {
          set_float64_mode(exact ? Float64Mode::Exact : Float64Mode::Narrow);
        }));
  m.def("_float64_is_exact",
        wrap_pybind_function([] { return float64_mode() == Float64Mode::Exact; }));
  m.def("_set_complex_decompose", wrap_pybind_function(&set_complex_decompose));
  m.def("_complex_decompose", wrap_pybind_function(&complex_decompose));
  m.def("_set_tracing", wrap_pybind_function(&trnsim::set_tracing_enabled));
  m.def("_take_trace", wrap_pybind_function(&take_trace));
  m.def("_simulation_overhead_ns", wrap_pybind_function(&simulation_overhead_ns));
  m.def("_executed_ops", wrap_pybind_function(&executed_ops));
  m.def("_fallback_ops", wrap_pybind_function(&fallback_ops));
  m.def("_clear_op_tracking", wrap_pybind_function(&reset_op_counts));
  m.def("_set_fallback_error", wrap_pybind_function(&set_fallback_raises));
  m.def("_set_execute", wrap_pybind_function(&set_execution_enabled));
  // torch.compile's generated kernels (torch_neuron/compile/scheduling.py): one call per
  // kernel run; each loop is (engine: "vector", "scalar" or "gpsimd", elements, two inputs);
  // `reads`/`writes`: its argument buffers (Note [Compiled graph schedule]); `fused_ops`: the
  // ATen ops fused into it as (name, elements, two inputs) (Note [Fused kernel bound]).
  m.def("_charge_kernel",
        wrap_pybind_function([](int device, const std::string& name, uint64_t bytes,
                                const KernelLoops& loops,
                                bool sixteen_bit, const std::string& detail,
                                const std::vector<at::Tensor>& reads,
                                const std::vector<at::Tensor>& writes,
                                const KernelLoops& fused_ops) {
          charge_compiled_kernel(static_cast<c10::DeviceIndex>(device), name, bytes,
                                 fused_kernel(loops, fused_ops, sixteen_bit), detail, reads,
                                 writes);
        }),
        py::arg("device"), py::arg("name"), py::arg("bytes"), py::arg("loops"),
        py::arg("sixteen_bit"), py::arg("detail"), py::arg("reads") = std::vector<at::Tensor>{},
        py::arg("writes") = std::vector<at::Tensor>{},
        py::arg("fused_ops") = KernelLoops{});
  // Compiled graphs as one scheduled launch (Note [Compiled graph schedule]).
  m.def("_open_graph",
        wrap_pybind_function([](int device, const std::string& name,
                                const std::vector<at::Tensor>& inputs) {
          open_graph(static_cast<c10::DeviceIndex>(device), name, inputs);
        }),
        py::arg("device"), py::arg("name"), py::arg("inputs") = std::vector<at::Tensor>{});
  m.def("_close_graph", wrap_pybind_function([](const std::vector<at::Tensor>& outputs) {
          return close_graph(outputs);
        }),
        py::arg("outputs") = std::vector<at::Tensor>{});
  m.def("_pause_clocks", wrap_pybind_function(&trnsim::pause_clocks));
  m.def("_resume_clocks", wrap_pybind_function(&trnsim::resume_clocks));
  m.def("_execute_enabled", wrap_pybind_function(&execution_enabled));
  m.def("_fallback_is_error", wrap_pybind_function(&fallback_is_error));
  m.def("_first_collective_stream", [] { return kFirstCollectiveStream; });
  bind_settings(m);
  bind_distributed(m);
  bind_nki(m);
}
