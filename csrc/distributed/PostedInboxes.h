// Receives posted before their messages are sent, one inbox per peer, for the neuron group's
// own message channels.
//
// Note [Receives posted in advance]
// Gloo's TCP transport sends an unbound buffer only once the receiver has told the sender it
// is ready for it: a send that finds no such notice waits for one (gloo/transport/tcp/pair.cc,
// Pair::send and Pair::recv: a posted receive sends NOTIFY_RECV_READY, a send without a
// pending remote receive is queued until it arrives). When both ranks post their receive and
// their send at the same moment, as every collective's agreement exchange does (Note [Neuron
// process group]), each message therefore waits one message latency for the notice and a second
// for itself. Posting the receive of a peer's next message as soon as its previous one has been
// read lets the notice travel while the caller goes on, so that the next exchange costs one
// message latency. Measured on this project's 2-core machine, 2 ranks over loopback, a 1 KiB
// exchange: 85-115 us per exchange with the receive posted in advance, 144-258 us without
// (Gloo's own all_to_all of the same size: 156-225 us). Channels whose tag user code may also
// receive on (recv from any source would race with a posted receive) must not use this.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <vector>

namespace torch_neuron {

class PostedInboxes {
 public:
  // Inboxes of `bytes` for the peers `gloo_ranks` (per group rank, its Gloo rank or -1 for a
  // rank that sends nothing: this rank, a virtual rank), on `tag` of `gloo`. Nothing is posted
  // or allocated until a peer's first message is expected.
  PostedInboxes(c10d::Backend& gloo, int tag, int64_t bytes, std::vector<int> gloo_ranks);
  PostedInboxes(const PostedInboxes&) = delete;
  PostedInboxes& operator=(const PostedInboxes&) = delete;

  // The receive of group rank `r`'s next message into inbox(r): the one posted in advance, or
  // one posted now. Wait for it, read the inbox, then repost(r).
  c10::intrusive_ptr<c10d::Work> next(int r);
  const at::Tensor& inbox(int r) const { return inboxes_[r]; }
  // Posts the receive of rank `r`'s following message into the same inbox. A failure (the
  // peer has gone) is left for the next call of next(r) to raise.
  void repost(int r);

 private:
  void post(int r);

  c10d::Backend& gloo_;
  int tag_;
  int64_t bytes_;
  std::vector<int> gloo_ranks_;
  std::vector<at::Tensor> inboxes_;
  std::vector<c10::intrusive_ptr<c10d::Work>> posted_;  // null: none posted
};

}  // namespace torch_neuron
