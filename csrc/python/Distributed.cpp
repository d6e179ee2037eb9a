// Python binding of the neuron process group (torch_neuron.distributed creates it).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupNeuron.h"
#include "python/Distributed.h"

namespace py = pybind11;

namespace torch_neuron {

void bind_distributed(py::module& m) {
  // c10d::Backend is already bound by torch (torch._C._distributed_c10d.Backend): the
  // subclass shares its pybind11 type, so PyTorch's ProcessGroup accepts it.
  py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(
      m, "_ProcessGroupNeuron")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& gloo, int rank, int size,
                       std::chrono::milliseconds timeout, std::string group_name, int device,
                       int node) {
             return c10::make_intrusive<ProcessGroupNeuron>(gloo, rank, size, timeout,
                                                            std::move(group_name), device, node);
           }),
           py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_name"), py::arg("device"), py::arg("node"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("device", [](const ProcessGroupNeuron& pg) { return int(pg.device()); })
      .def_property_readonly("places", [](const ProcessGroupNeuron& pg) {
        std::vector<std::pair<int, int>> out;
        for (const auto& p : pg.places()) out.emplace_back(p.node, p.chip);
        return out;
      });
}

}  // namespace torch_neuron
