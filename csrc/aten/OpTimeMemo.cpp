#include "aten/OpTimeMemo.h"

#include <atomic>
#include <vector>

#include "runtime/ThreadLocal.h"

namespace torch_neuron {
namespace {

struct OpTimeMemosTag;

}  // namespace

size_t new_op_time_slot() {
  static std::atomic<size_t> next{0};
  return next++;
}

OpTimeMemo& op_time_memo(size_t slot) {
  auto& memos = per_thread<std::vector<OpTimeMemo>, OpTimeMemosTag>();
  if (__builtin_expect(slot >= memos.size(), 0)) memos.resize(slot + 1);
  return memos[slot];
}

}  // namespace torch_neuron
