// Note [One charge path]
// Every piece of device work reaches the simulated clock through charge(): a native kernel, a
// host-executed op, a CPU fallback, a copy, a fill, a compiled kernel, a collective. It takes
// the queue (stream) the work runs on, the operator it counts as, a trnsim work description
// (Note [Work descriptions] in trnsim/work.h: the only place costs are computed) and a detail
// for traces, built only while the queue is traced. It advances the queue's clock, records the trace, and
// counts the op for get_executed_ops()/get_fallback_ops(). Simulator errors (a device fault at
// this launch) become PyTorch errors here (Note [Simulator errors]).
//
// Predict-only mode (Note [Predict-only execution]) changes nothing here: an op is charged for
// the same work whether or not it computes; kernels consult execution_enabled() only to skip
// computing.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/FunctionRef.h>

#include <string>

#include <trnsim/queue.h>
#include <trnsim/work.h>

#include "aten/GraphSchedule.h"
#include "aten/OpTracking.h"

namespace torch_neuron {

// Builds the trace detail of a launch ("f32[8,8], bf16[8]"); called only while tracing.
using Detail = c10::function_ref<std::string()>;
inline std::string no_detail() { return {}; }

enum class Placement {
  Device,    // the NeuronCore runs it
  Fallback,  // the CPU runs it for the device (counted as a fallback too)
};

// Charges `work` to `queue` as the op `name`, counted in `counter` (nullptr: not an ATen op,
// not counted). Returns when the work finishes on the simulated clock, ns. `operands`: the
// tensors it read and wrote, for a compiled graph's schedule (Note [Compiled graph schedule]);
// inside a graph region the work joins the graph instead of launching.
double charge(trnsim::Queue& queue, const std::string& name, OpCounter* counter,
              const trnsim::Work& work, Detail detail = no_detail,
              Placement placement = Placement::Device, const Operands& operands = {});

// The same for work whose time is already known: time_of(instance, work) computed earlier for
// the same work (Note [Memoized op times]).
double charge(trnsim::Queue& queue, const std::string& name, OpCounter* counter,
              const trnsim::WorkTime& time, Detail detail = no_detail,
              Placement placement = Placement::Device, const Operands& operands = {});

// The same on `device`'s current stream, for an op a kernel keeps an OpHandle of.
double charge(c10::DeviceIndex device, const OpHandle& op, const trnsim::Work& work,
              Detail detail = no_detail);

}  // namespace torch_neuron
