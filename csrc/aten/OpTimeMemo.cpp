#include "aten/OpTimeMemo.h"

#include <atomic>
#include <vector>

#include "runtime/ThreadLocal.h"

namespace torch_neuron {

size_t new_op_time_slot() {
  static std::atomic<size_t> next{0};
  return next++;
}

OpTimeMemo& grow_op_time_memos(size_t slot) {
  auto& memos = per_thread<std::vector<OpTimeMemo>, OpTimeMemosTag>();
  if (slot >= memos.size()) memos.resize(slot + 1);
  return memos[slot];
}

}  // namespace torch_neuron
