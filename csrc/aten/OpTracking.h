// Which ops ran on neuron and which fell back to the CPU, by operator name
// ("aten::add.Tensor"), mirroring TorchNeuron's get_executed_ops() / get_fallback_ops().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace torch_neuron {

// Counts of one operator. Stable address: kernels may keep a pointer and count without a lock.
struct OpCounter {
  std::atomic<int64_t> executed{0};
  std::atomic<int64_t> fallback{0};
};

OpCounter& op_counter(const std::string& name);

// An op's name and counter, looked up once: kernels that launch and count themselves keep one
// in a static (`static const OpHandle op("aten::fill_");`), so that a launch costs no lookup.
struct OpHandle {
  explicit OpHandle(const char* op_name) : name(op_name), counter(&op_counter(name)) {}
  std::string name;
  OpCounter* counter;
};
std::map<std::string, int64_t> executed_ops();
std::map<std::string, int64_t> fallback_ops();
void reset_op_counts();

// When set, an op that would fall back to the CPU raises instead (TORCH_NEURON_FALLBACK=error).
void set_fallback_raises(bool on);
bool fallback_is_error();

}  // namespace torch_neuron
