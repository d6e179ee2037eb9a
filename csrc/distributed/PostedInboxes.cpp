#include "distributed/PostedInboxes.h"

#include <ATen/ops/empty.h>

#include <utility>

namespace torch_neuron {

PostedInboxes::PostedInboxes(c10d::Backend& gloo, int tag, int64_t bytes,
                             std::vector<int> gloo_ranks)
    : gloo_(gloo),
      tag_(tag),
      bytes_(bytes),
      gloo_ranks_(std::move(gloo_ranks)),
      inboxes_(gloo_ranks_.size()),
      posted_(gloo_ranks_.size()) {}

void PostedInboxes::post(int r) {
  // Allocated once per peer: the pages a large message touched stay for the next.
  if (!inboxes_[r].defined()) inboxes_[r] = at::empty({bytes_}, at::kByte);
  std::vector<at::Tensor> into{inboxes_[r]};
  posted_[r] = gloo_.recv(into, gloo_ranks_[r], tag_);
}

c10::intrusive_ptr<c10d::Work> PostedInboxes::next(int r) {
  if (!posted_[r]) post(r);
  return std::exchange(posted_[r], nullptr);
}

void PostedInboxes::repost(int r) {
  if (posted_[r]) return;
  try {
    post(r);
  } catch (const std::exception&) {
    posted_[r] = nullptr;  // next(r) posts again and raises the failure in its collective
  }
}

}  // namespace torch_neuron
