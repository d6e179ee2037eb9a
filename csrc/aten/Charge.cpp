#include "aten/Charge.h"

#include "aten/GraphSchedule.h"
#include "aten/KnownValues.h"
#include "aten/PredictOnly.h"

#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

void count(OpCounter* counter, Placement placement) {
  if (counter != nullptr) {
    if (placement == Placement::Fallback) ++counter->fallback;
    ++counter->executed;
  }
}

}  // namespace

double charge(trnsim::Queue& queue, const std::string& name, OpCounter* counter,
              const trnsim::Work& work, Detail detail, Placement placement,
              const Operands& operands) {
  return charge(queue, name, counter, trnsim::time_of(system().instance(), work), detail,
                placement, operands);
}

double charge(trnsim::Queue& queue, const std::string& name, OpCounter* counter,
              const trnsim::WorkTime& time, Detail detail, Placement placement,
              const Operands& operands) {
  // Note [Known values in predict-only mode]; asked in this order so that executing work with
  // no known values pays one load.
  if (may_know_values() && !execution_enabled()) forget_known_values();
  if (graph_open() && append_to_graph(queue, name, time, operands)) {
    count(counter, placement);
    return queue.now_ns();
  }
  const double end = simulator_call([&] {
    return queue.launch(name, time.cost, time.duration_ns,
                        queue.tracing() ? detail() : std::string());
  });
  count(counter, placement);
  return end;
}

double charge(c10::DeviceIndex device, const OpHandle& op, const trnsim::Work& work,
              Detail detail) {
  return charge(current_queue(device), op.name, op.counter, work, detail);
}

}  // namespace torch_neuron
