// Python binding of the neuron process group (torch_neuron.distributed creates it).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupNeuron.h"
#include "distributed/VirtualWorld.h"
#include "python/Distributed.h"

namespace py = pybind11;

namespace torch_neuron {
namespace {

trnsim::Collective collective_named(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(trnsim::Collective::Barrier); ++i) {
    const auto op = static_cast<trnsim::Collective>(i);
    if (name == trnsim::collective_name(op)) return op;
  }
  throw py::value_error("unknown collective '" + name + "'; expected all_reduce, all_gather, "
                        "reduce_scatter, broadcast, reduce, all_to_all, gather, scatter, "
                        "send_recv or barrier");
}

// The cost model's prediction for a collective: what the backend charges (tests, benchmarks).
py::dict collective_cost(const std::string& op, uint64_t bytes,
                         const std::vector<std::pair<int, int>>& places,
                         const std::string& instance,
                         const std::optional<std::string>& algorithms) {
  std::vector<trnsim::RankPlace> ranks;
  for (const auto& [node, chip] : places) ranks.push_back({node, chip});
  const auto cost = trnsim::collective_cost(
      trnsim::find_instance(instance), collective_named(op), bytes, ranks,
      algorithms ? trnsim::collective_algorithms_named(*algorithms) : collective_algorithms());
  py::dict d;
  d["duration_ns"] = cost.duration_ns;
  d["algorithm"] = cost.algorithm;
  d["link"] = cost.link;
  d["link_gbps"] = cost.link_gbps;
  d["algbw_gbps"] = cost.algbw_gbps;
  d["busbw_gbps"] = cost.busbw_gbps;
  d["latency_ns"] = cost.latency_ns;
  d["steps"] = cost.steps;
  d["dma_bytes"] = cost.dma_bytes;
  d["dma_ns"] = cost.dma_ns;
  return d;
}

// Where `ranks` ranks sit when torchrun starts `ranks_per_node` per instance of `instance`
// (torchrun_places): predicts collectives without running them (nccom-test rows).
std::vector<std::pair<int, int>> collective_places(const std::string& instance, int ranks,
                                                   int ranks_per_node) {
  std::vector<std::pair<int, int>> places;
  for (const auto& p : torchrun_places(trnsim::find_instance(instance), ranks, ranks_per_node)) {
    places.emplace_back(p.node, p.chip);
  }
  return places;
}

}  // namespace

void bind_distributed(py::module& m) {
  // c10d::Backend is already bound by torch (torch._C._distributed_c10d.Backend): the
  // subclass shares its pybind11 type, so PyTorch's ProcessGroup accepts it.
  py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
      m, "_ProcessGroupNeuron")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo,
                       const std::optional<c10::intrusive_ptr<c10d::Backend>>& cpu_gloo, int rank,
                       int size, std::chrono::milliseconds timeout, std::string group_name,
                       int device, int node, std::vector<int> global_ranks) {
             return c10::make_intrusive<ProcessGroupNeuron>(
                 gloo, cpu_gloo.value_or(nullptr), rank, size, timeout, std::move(group_name),
                 device, node, std::move(global_ranks));
           }),
           py::arg("gloo"), py::arg("cpu_gloo"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"), py::arg("group_name"), py::arg("device"), py::arg("node"),
           py::arg("global_ranks") = std::vector<int>{},
           py::call_guard<py::gil_scoped_release>())
      // dist.split_group deep-copies the parent's `options` when given none; c10d's Options
      // cannot be copied from Python, and None makes the C++ split take this group's own.
      .def_property_readonly("options", [](const ProcessGroupNeuron&) { return py::none(); })
      .def_property_readonly("device", [](const ProcessGroupNeuron& pg) { return int(pg.device()); })
      .def_property_readonly("places", [](const ProcessGroupNeuron& pg) {
        std::vector<std::pair<int, int>> out;
        for (const auto& p : pg.places()) out.emplace_back(p.node, p.chip);
        return out;
      });
  // The global ranks that run as processes in this process's virtual world, or None.
  m.def("_virtual_running_ranks", torch::wrap_pybind_function([]() -> std::optional<std::vector<int>> {
          const VirtualWorld* world = virtual_world();
          if (!world) return std::nullopt;
          std::vector<int> ranks;
          for (int r = 0; r < world->size; ++r) {
            if (world->running[r]) ranks.push_back(r);
          }
          return ranks;
        }));
  m.def("_collective_cost", torch::wrap_pybind_function(&collective_cost), py::arg("op"),
        py::arg("bytes"), py::arg("places"), py::arg("instance"),
        py::arg("algorithms") = py::none());
  m.def("_collective_places", torch::wrap_pybind_function(&collective_places),
        py::arg("instance"), py::arg("ranks"), py::arg("ranks_per_node") = 0);
}

}  // namespace torch_neuron
