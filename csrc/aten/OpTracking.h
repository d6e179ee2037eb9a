// Which ops ran on neuron and which fell back to the CPU, by operator name
// ("aten::add.Tensor"), mirroring TorchNeuron's get_executed_ops() / get_fallback_ops().
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_neuron {

void count_executed_op(const std::string& name);
void count_fallback_op(const std::string& name);
std::map<std::string, int64_t> executed_ops();
std::map<std::string, int64_t> fallback_ops();
void clear_op_tracking();

// When set, an op that would fall back to the CPU raises instead (TORCH_NEURON_FALLBACK=error).
void set_fallback_error(bool on);
bool fallback_is_error();

}  // namespace torch_neuron
