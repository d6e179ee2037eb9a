// Note [Compiled graph schedule]
// A graph compiled with torch.compile(backend="neuron") runs on Trainium as one compiled
// program (a NEFF): one launch, and inside it the compiler's instruction streams on TensorE,
// VectorE, ScalarE, GpSimdE and the DMA queues, overlapping wherever the data allows. So the
// generated wrapper's `call` opens a graph region on the current stream of its device
// (torch_neuron/compile/graph_region.py) and closes it when it returns; while it is open on this
// thread, charge() (Note [One charge path]) does not launch the ops made on that stream (the
// generated kernels through _charge_kernel, the extern ATen kernels such as mm, addmm, bmm and
// attention through their usual kernels) but appends them to one trnsim::OpProgram (Note [Ops
// as tiles] in trnsim/schedule.h): tiled instructions whose buffer regions are the byte ranges
// of the op's tensors in their storages, each allocation a range of its own (Note
// [Allocation ids] in runtime/DeviceAllocator.h), so a consumer's tile waits for the producer
// tiles it reads. Closing the region schedules the program (Note [Engine scheduler]) and
// launches it once: the launch overhead once plus the makespan, one trace record named after
// the graph whose engine times are each engine's busy time. An op whose tensors its charge does
// not pass (a fill, a copy) orders against everything in the graph. The tensors the graph makes
// and does not return stay on chip where they fit (Note [Intermediates in SBUF]), so the graph
// moves fewer HBM bytes than its ops launched one by one. Each op is still counted
// as executed. Eager execution is untouched: the only cost on its path is a thread-local check.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <string>

#include <trnsim/queue.h>
#include <trnsim/work.h>

namespace torch_neuron {

// The tensors an op read and wrote, as its charge knows them (any may be empty).
// Views only: building one costs nothing on the eager path.
struct Operands {
  c10::ArrayRef<at::Tensor> inputs;
  c10::ArrayRef<at::Tensor> outputs;
  c10::ArrayRef<c10::IValue> output_values;       // tensors and tensor lists among them
  c10::ArrayRef<const at::Tensor*> output_ptrs;  // undefined ones are skipped
  bool known() const {
    return !inputs.empty() || !outputs.empty() || !output_values.empty() || !output_ptrs.empty();
  }
};

// Opens a graph region named `name` on `device`'s current stream for the calling thread.
// Regions nest: an inner one (a subgraph) joins the outer one. `inputs` are the graph's
// inputs: they stay in HBM (Note [Intermediates in SBUF] in trnsim/schedule.h).
void open_graph(c10::DeviceIndex device, const std::string& name,
                c10::ArrayRef<at::Tensor> inputs = {});
// Closes the innermost region; the outermost schedules and launches the graph. `outputs` are
// the graph's outputs: they are written to HBM; the other tensors its ops make are
// intermediates, kept in SBUF where they fit. Returns the launched duration in ns (0 for an
// inner region or a graph that charged nothing).
double close_graph(c10::ArrayRef<at::Tensor> outputs = {});
// Whether this thread has a graph region open (the eager path's one check).
bool graph_open();
// Appends an op to the open region if it is on `queue`; false when it is not (then the caller
// launches it as usual).
bool append_to_graph(trnsim::Queue& queue, const std::string& name, const trnsim::WorkTime& time,
                     const Operands& operands);

}  // namespace torch_neuron
