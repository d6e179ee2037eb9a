// torch_neuron._C bindings of NKI kernel timing (Note [Kernel schedule] in
// trnsim/kernel_schedule.h): the Python interpreter's instruction records in, flat, as two int64
// arrays; the schedule out. And the charge of a scheduled kernel launch (Note [One charge path]).
#include "python/Nki.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <string>
#include <vector>

#include <trnsim/error.h>
#include <trnsim/instance.h>
#include <trnsim/kernel_schedule.h>

#include "aten/Charge.h"
#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"

namespace py = pybind11;

namespace torch_neuron {
namespace {

// Columns of the instruction array (torch_neuron/nki/timing.py writes them in this order).
enum Column {
  kKind, kEngine, kQueue, kProgram, kPartitions, kElements, kStationary, kInDtype, kOutDtype,
  kOp, kFlags, kBytes, kDescriptors, kReads, kWrites, kColumns
};
// Columns of the region array.
enum RegionColumn { kMemory, kBuffer, kP0, kP1, kBegin, kEnd, kRegionColumns };
constexpr int64_t kDoubleRow = 1, kPsumAndSbuf = 2, kZeroFill = 4, kStrided = 8;
// Flags bits from here on: the engines the compiler may choose from (1 << Engine each; Note
// [Engine choice] in trnsim/kernel_schedule.h).
constexpr int kEngineChoicesShift = 8;

// The chip's physical core: every simulated generation, whether or not an instance type of
// it is in the table (trnsim chip_table).
trnsim::InstanceSpec core_of(const std::string& core_version) {
  try {
    return trnsim::physical_core(trnsim::find_chip(core_version));
  } catch (const trnsim::Error& e) {
    throw py::value_error(std::string(e.what()) +
                          ": NKI kernel timing needs its engine clocks and bandwidths");
  }
}

py::dict schedule(const std::string& core_version, int dma_queues, int programs,
                  py::array_t<int64_t, py::array::c_style | py::array::forcecast> ins,
                  py::array_t<int64_t, py::array::c_style | py::array::forcecast> regions) {
  if (ins.ndim() != 2 || (ins.shape(0) > 0 && ins.shape(1) != kColumns)) {
    throw py::value_error("_nki_schedule: instructions must be an [n, " +
                          std::to_string(kColumns) + "] int64 array");
  }
  if (regions.ndim() != 2 || (regions.shape(0) > 0 && regions.shape(1) != kRegionColumns)) {
    throw py::value_error("_nki_schedule: regions must be an [m, 6] int64 array");
  }
  const trnsim::InstanceSpec core = core_of(core_version);
  const auto in = ins.unchecked<2>();
  const auto rg = regions.unchecked<2>();
  const int64_t n = ins.shape(0), m = regions.shape(0);
  std::vector<trnsim::KernelInstruction> program(static_cast<size_t>(n));
  int64_t next_region = 0;
  auto region = [&](int64_t r) {
    if (r >= m) throw py::value_error("_nki_schedule: fewer regions than the counts say");
    trnsim::KernelRegion k;
    k.memory = static_cast<trnsim::KernelMemory>(rg(r, kMemory));
    k.buffer = static_cast<uint64_t>(rg(r, kBuffer));
    k.p0 = static_cast<int32_t>(rg(r, kP0));
    k.p1 = static_cast<int32_t>(rg(r, kP1));
    k.begin = static_cast<uint64_t>(rg(r, kBegin));
    k.end = static_cast<uint64_t>(rg(r, kEnd));
    return k;
  };
  for (int64_t i = 0; i < n; ++i) {
    trnsim::KernelInstruction& k = program[i];
    const int64_t kind = in(i, kKind), engine = in(i, kEngine);
    if (kind < 0 || kind >= trnsim::kIsaKindCount || engine < 0 ||
        engine >= trnsim::kEngineCount) {
      throw py::value_error("_nki_schedule: instruction " + std::to_string(i) +
                            " has an unknown kind or engine");
    }
    k.isa.kind = static_cast<trnsim::IsaKind>(kind);
    k.isa.engine = static_cast<trnsim::Engine>(engine);
    k.queue = static_cast<int>(in(i, kQueue));
    k.program = static_cast<int>(in(i, kProgram));
    k.isa.partitions = in(i, kPartitions);
    k.isa.elements = in(i, kElements);
    k.isa.stationary_elements = in(i, kStationary);
    k.isa.in_dtype = static_cast<trnsim::IsaDtype>(in(i, kInDtype));
    k.isa.out_dtype = static_cast<trnsim::IsaDtype>(in(i, kOutDtype));
    k.isa.op = static_cast<trnsim::IsaOp>(in(i, kOp));
    const int64_t flags = in(i, kFlags);
    k.isa.double_row = flags & kDoubleRow;
    k.isa.psum_and_sbuf = flags & kPsumAndSbuf;
    k.isa.zero_fill = flags & kZeroFill;
    k.isa.strided = flags & kStrided;
    k.engine_choices = static_cast<uint8_t>((flags >> kEngineChoicesShift) & 0xff);
    k.isa.bytes = static_cast<uint64_t>(in(i, kBytes));
    k.isa.descriptors = static_cast<uint64_t>(in(i, kDescriptors));
    for (int64_t r = 0; r < in(i, kReads); ++r) k.reads.push_back(region(next_region++));
    for (int64_t r = 0; r < in(i, kWrites); ++r) k.writes.push_back(region(next_region++));
  }
  trnsim::KernelTiming t;
  try {
    t = trnsim::schedule_kernel(core, dma_queues, programs, program);
  } catch (const trnsim::Error& e) {
    throw py::value_error(std::string("NKI kernel schedule: ") + e.what());
  }
  py::array_t<double> start(n), end(n);
  py::array_t<int64_t> engines(n);
  auto s = start.mutable_unchecked<1>();
  auto e = end.mutable_unchecked<1>();
  auto g = engines.mutable_unchecked<1>();
  for (int64_t i = 0; i < n; ++i) {
    s(i) = t.times[i].start_ns;
    e(i) = t.times[i].end_ns;
    g(i) = static_cast<int64_t>(t.engines[i]);
  }
  py::dict out;
  out["makespan_ns"] = t.makespan_ns;
  out["busy_ns"] = std::vector<double>(t.busy_ns.begin(), t.busy_ns.end());
  out["dma_queue_busy_ns"] = t.dma_queue_busy_ns;
  out["instructions"] = std::vector<uint64_t>(t.instructions.begin(), t.instructions.end());
  out["start_ns"] = start;
  out["end_ns"] = end;
  out["engines"] = engines;
  out["critical_path"] = t.critical_path;
  out["programs"] = t.programs;
  return out;
}

double charge_kernel(int device, const std::string& name, double makespan_ns,
                     const std::vector<double>& busy_ns, uint64_t hbm_bytes, double flops,
                     const std::string& detail) {
  TORCH_CHECK_VALUE(busy_ns.size() == static_cast<size_t>(trnsim::kEngineCount),
                    "_charge_nki_kernel: busy_ns needs one value per engine");
  std::array<double, trnsim::kEngineCount> busy{};
  for (int i = 0; i < trnsim::kEngineCount; ++i) busy[i] = busy_ns[i];
  const auto index = static_cast<c10::DeviceIndex>(device);
  const trnsim::WorkTime time = simulator_call(
      [&] { return trnsim::kernel_launch(system().instance(), makespan_ns, busy, hbm_bytes, flops); });
  return charge(current_queue(index), name, nullptr, time, [&] { return detail; });
}

}  // namespace

void bind_nki(py::module& m) {
  m.def("_nki_schedule", torch::wrap_pybind_function(&schedule), py::arg("core_version"),
        py::arg("dma_queues"), py::arg("programs"), py::arg("instructions"), py::arg("regions"));
  m.def("_charge_nki_kernel", torch::wrap_pybind_function(&charge_kernel), py::arg("device"),
        py::arg("name"), py::arg("makespan_ns"), py::arg("busy_ns"), py::arg("hbm_bytes"),
        py::arg("flops"), py::arg("detail"));
}

}  // namespace torch_neuron
