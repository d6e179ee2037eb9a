#include "distributed/PostedInboxes.h"

#include <ATen/ops/empty.h>
#include <ATen/record_function.h>

#include <utility>

namespace torch_neuron {

PostedInboxes::PostedInboxes(c10d::Backend& gloo, int tag, int64_t bytes,
                             std::vector<int> gloo_ranks)
    : gloo_(gloo),
      tag_(tag),
      bytes_(bytes),
      gloo_ranks_(std::move(gloo_ranks)),
      inboxes_(gloo_ranks_.size()),
      posted_(gloo_ranks_.size()),
      posted_into_(gloo_ranks_.size(), 0) {}

c10::intrusive_ptr<c10d::Work> PostedInboxes::post(int r, int which) {
  // Allocated once per peer: the pages a large message touched stay for the next.
  auto& inbox = inboxes_[r][which];
  if (!inbox.defined()) inbox = at::empty({bytes_}, at::kByte);
  std::vector<at::Tensor> into{inbox};
  // Not a profiler event: the receive outlives the call, and may outlive a profiler that
  // recorded its start (whose result then crashes when freed).
  at::DisableRecordFunctionGuard unprofiled;
  return gloo_.recv(into, gloo_ranks_[r], tag_);
}

PostedInboxes::Receive PostedInboxes::next(int r) {
  const int which = posted_into_[r];
  // (Moved from, posted_[r] is null: it stays so if the next post fails.)
  Receive receive{posted_[r] ? std::move(posted_[r]) : post(r, which), inboxes_[r][which]};
  // That inbox's previous message was read by the call before this one.
  posted_into_[r] = 1 - which;
  try {
    posted_[r] = post(r, 1 - which);
  } catch (const std::exception&) {
    // The peer has gone: the next call posts again and raises in its collective.
  }
  return receive;
}

}  // namespace torch_neuron
