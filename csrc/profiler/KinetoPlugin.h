// What the Kineto plugin (Note [torch.profiler device activities]) tells the profiler stubs.
#pragma once

namespace torch_neuron {

// Whether a Kineto session of neuron's plugin is recording device activities now. While it is,
// the profiler stubs report no device time of their own (Note [torch.profiler on neuron]).
bool kineto_session_recording();

}  // namespace torch_neuron
