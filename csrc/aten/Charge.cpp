#include "aten/Charge.h"

#include "runtime/Runtime.h"
#include "runtime/SimulatorError.h"
#include "runtime/Stream.h"

namespace torch_neuron {

double charge(trnsim::Queue& queue, const std::string& name, OpCounter* counter,
              const trnsim::Work& work, Detail detail, Placement placement) {
  const trnsim::WorkTime time = trnsim::time_of(system().instance(), work);
  const double end = simulator_call([&] {
    return queue.launch(name, time.cost, time.duration_ns,
                        queue.tracing() ? detail() : std::string());
  });
  if (counter != nullptr) {
    if (placement == Placement::Fallback) ++counter->fallback;
    ++counter->executed;
  }
  return end;
}

double charge(c10::DeviceIndex device, const OpHandle& op, const trnsim::Work& work,
              Detail detail) {
  return charge(current_queue(device), op.name, op.counter, work, detail);
}

}  // namespace torch_neuron
