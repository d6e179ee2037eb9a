// Receives posted before their messages are sent, two inboxes per peer, for the neuron group's
// own message channels.
//
// Note [Receives posted in advance]
// Gloo's TCP transport sends an unbound buffer only once the receiver has told the sender it
// is ready for it: a send that finds no such notice waits for one (gloo/transport/tcp/pair.cc,
// Pair::send and Pair::recv: a posted receive sends NOTIFY_RECV_READY, a send without a
// pending remote receive is queued until it arrives). When both ranks post their receive and
// their send at the same moment, as every collective's agreement exchange does (Note [Neuron
// process group]), each message therefore waits one message latency for the notice and a second
// for itself. So each peer has two inboxes: when the receive of its next message is taken, the
// receive of the message after that is posted into the other inbox, and its notice travels
// while this call and the caller's work go on. Measured on this project's 2-core machine, 2
// ranks over loopback, a 1 KiB exchange on Gloo alone: 144-258 us per exchange with the receive
// posted at the exchange, 85-115 us posted after the previous one (Gloo's own all_to_all of
// the same size: 156-225 us). Channels whose tag user code may also receive on must not use
// this: a receive from any rank would race with the posted one. Between ranks on one machine
// the messages go over local links instead (Note [Local links]), which send without a notice;
// there a receive posted in advance only spares the copy out of the queue of unexpected
// messages.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
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

  struct Receive {
    c10::intrusive_ptr<c10d::Work> work;  // wait for it before reading `inbox`
    at::Tensor inbox;
  };
  // The receive of group rank `r`'s next message (posted in advance, or now), and the inbox it
  // lands in; the receive of the message after it is posted too, into r's other inbox. A
  // failure to post that one (the peer has gone) is left for the next call to raise. The
  // returned inbox must be read before the next call of next(r), which posts into it again.
  Receive next(int r);

 private:
  c10::intrusive_ptr<c10d::Work> post(int r, int which);

  c10d::Backend& gloo_;
  int tag_;
  int64_t bytes_;
  std::vector<int> gloo_ranks_;
  std::vector<std::array<at::Tensor, 2>> inboxes_;  // allocated at first use
  std::vector<c10::intrusive_ptr<c10d::Work>> posted_;  // null: none posted
  std::vector<int> posted_into_;                        // which inbox posted_[r] fills
};

}  // namespace torch_neuron
