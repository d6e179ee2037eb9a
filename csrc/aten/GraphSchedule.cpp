#include "aten/GraphSchedule.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include <trnsim/schedule.h>

#include "runtime/DeviceAllocator.h"
#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"
#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

struct GraphRegion {
  GraphRegion(trnsim::Queue& q, std::string n)
      : queue(&q), name(std::move(n)), program(system().instance()) {}
  trnsim::Queue* queue;
  std::string name;
  trnsim::OpProgram program;
  int depth = 1;
  double flops = 0;
  uint64_t bytes = 0;
};

thread_local std::unique_ptr<GraphRegion> open_region;
// Whether open_region is set, for graph_open(): asked by every charge, and a thread_local with a
// destructor is reached through __tls_get_addr (Note [Per-op thread locals]).
TORCH_NEURON_THREAD_LOCAL bool region_open = false;

// Where a storage's bytes start in the graph's address space. An allocation of the neuron
// allocator gets a range of its own, named by its allocation id (Note [Allocation ids]) in the
// upper half of the space: a block the caching allocator hands out again is a new buffer, so
// the ops of two tensors that happen to get the same block do not wait for each other, and a
// graph's schedule does not depend on what the cache held before it ran. (A NEFF's buffers are
// planned by its compiler, not by the caching allocator's history.) The generated code's own
// reuse of a buffer ("reuse" in Inductor's wrapper) keeps its storage, so it still orders.
// Other storages keep their host address, which lies in the lower half.
uint64_t storage_base(const void* data) {
  constexpr int kOffsetBits = 37;  // 128 GiB: more than any storage of one device
  constexpr uint64_t kIds = uint64_t{1} << (63 - kOffsetBits);
  const uint64_t id = NeuronDeviceAllocator::allocation_id(data);
  if (id == 0) return reinterpret_cast<uint64_t>(data);
  return (uint64_t{1} << 63) | ((id % kIds) << kOffsetBits);
}

// The bytes a tensor's elements span in its storage (Note [Compiled graph schedule]).
void add_region(const at::Tensor& t, std::vector<trnsim::Region>& out) {
  if (!t.defined() || t.numel() == 0 || !t.has_storage() || t.storage().data() == nullptr) return;
  int64_t low = 0, high = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t extent = (t.size(d) - 1) * t.stride(d);
    (extent < 0 ? low : high) += extent;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  const auto base = storage_base(t.storage().data()) +
                    static_cast<uint64_t>(t.storage_offset() * item);
  out.push_back({0, base + static_cast<uint64_t>(low * item),
                 base + static_cast<uint64_t>((high + 1) * item)});
}

void add_value(const c10::IValue& v, std::vector<trnsim::Region>& out) {
  if (v.isTensor()) {
    add_region(v.toTensor(), out);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorVector()) add_region(t, out);
  }
}

std::string utilization_detail(const GraphRegion& g, const trnsim::ScheduleResult& r) {
  std::string detail = "compiled graph: " + std::to_string(g.program.ops()) + " ops, " +
                       std::to_string(g.program.schedule().size()) + " instructions; busy";
  for (int e = 0; e < trnsim::kEngineCount; ++e) {
    char share[48];
    std::snprintf(share, sizeof share, " %s %.0f%%",
                  trnsim::engine_name(static_cast<trnsim::Engine>(e)),
                  100 * r.utilization(static_cast<trnsim::Engine>(e)));
    detail += share;
  }
  return detail;
}

// The graph's ops as parts of its trace record: each op's span from the record's start (after
// the launch overhead, which the graph pays first), engines and HBM bytes.
std::vector<trnsim::TraceSpan> op_parts(const GraphRegion& g, const trnsim::ScheduleResult& r) {
  std::vector<trnsim::TraceSpan> parts;
  for (trnsim::OpTiming& op : g.program.op_timings(r)) {
    trnsim::TraceSpan part;
    part.name = std::move(op.source);
    part.start_ns = trnsim::kLaunchOverheadNs + op.start_ns;
    part.duration_ns = op.end_ns - op.start_ns;
    part.engine_ns = op.busy_ns;
    part.bytes = op.hbm_bytes;
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace

bool graph_open() { return region_open; }

void open_graph(c10::DeviceIndex device, const std::string& name,
                c10::ArrayRef<at::Tensor> inputs) {
  if (open_region) {
    ++open_region->depth;
    return;
  }
  open_region = std::make_unique<GraphRegion>(current_queue(resolve_device(device)), name);
  region_open = true;
  std::vector<trnsim::Region> regions;
  for (const at::Tensor& t : inputs) add_region(t, regions);
  open_region->program.keep_in_hbm(regions, trnsim::OpProgram::Kept::Input);
}

double close_graph(c10::ArrayRef<at::Tensor> outputs) {
  TORCH_CHECK(open_region, "close_graph() without an open graph region");
  if (--open_region->depth > 0) return 0;
  const std::unique_ptr<GraphRegion> g = std::move(open_region);
  region_open = false;
  if (g->program.ops() == 0) return 0;
  std::vector<trnsim::Region> regions;
  for (const at::Tensor& t : outputs) add_region(t, regions);
  g->program.keep_in_hbm(regions);
  const trnsim::ScheduleResult result = g->program.schedule().run();
  trnsim::OpCost cost;
  cost.engine_ns = result.busy_ns;
  cost.flops = g->flops;
  cost.set_bytes(system().instance(), g->bytes - g->program.sbuf_saved_bytes());
  const double duration = trnsim::kLaunchOverheadNs + result.makespan_ns;
  trnsim::Queue& queue = *g->queue;
  const bool tracing = queue.tracing();
  simulator_call([&] {
    return queue.launch(g->name, cost, duration,
                        tracing ? utilization_detail(*g, result) : std::string(),
                        tracing ? op_parts(*g, result) : std::vector<trnsim::TraceSpan>());
  });
  return duration;
}

bool append_to_graph(trnsim::Queue& queue, const std::string& name, const trnsim::WorkTime& time,
                     const Operands& operands) {
  GraphRegion* g = open_region.get();
  if (g == nullptr || g->queue != &queue || trnsim::clocks_paused()) return false;
  g->flops += time.cost.flops;
  g->bytes += time.cost.bytes;
  if (!operands.known()) {
    g->program.add_op(time, nullptr, nullptr, name);
    return true;
  }
  std::vector<trnsim::Region> inputs, outputs;
  for (const at::Tensor& t : operands.inputs) add_region(t, inputs);
  for (const at::Tensor& t : operands.outputs) add_region(t, outputs);
  for (const c10::IValue& v : operands.output_values) add_value(v, outputs);
  for (const at::Tensor* t : operands.output_ptrs) add_region(*t, outputs);
  g->program.add_op(time, &inputs, &outputs, name);
  return true;
}

}  // namespace torch_neuron
