// The neuron group's own messages between its processes on one machine.
//
// Note [Local links]
// Gloo's TCP transport sends a message only once its receiver has announced the receive
// (Note [Receives posted in advance]): every message costs two, the notice and itself. The
// group's protocol messages (a collective's agreement records, a point-to-point header and the
// receiver's size) therefore cost twice what Gloo's own collectives and sends do, and small
// calls took 1.4x to 2x Gloo's wall time. Between ranks on one machine the group instead keeps
// one Unix-domain stream socket per pair and sends eagerly, as MPI does for small messages:
//   - a send writes [tag, bytes, payload] at once and completes when written (a large
//     point-to-point one on the links' writer thread, so that its rank can post its receives
//     while the peer reads: both ranks of an exchange usually send first);
//   - one thread per group reads every socket: a frame goes straight into the oldest posted
//     receive of its (peer, tag), or of its tag from any rank, else it waits in a queue of
//     unexpected frames until a receive takes it; frames of one peer keep their order, as
//     Gloo's messages of one peer and tag do;
//   - a frame larger than its receive fails that receive with an error (Gloo would abort the
//     process), or fills it and drops the rest where the receive asks for that (a
//     point-to-point receive, which learns the sender's size from the frame's own header); a
//     smaller one fills its start, as with Gloo;
//   - a peer that exits closes its socket: receives from it fail at once instead of timing out.
// The sockets live in the abstract namespace (no files), named by the kernel (autobind), and a
// connection proves it belongs to the group with the listener's random token, exchanged in the
// group's start-up exchange. Groups with ranks on other machines, or in other network
// namespaces, and virtual worlds use Gloo for these messages as before. Only the group's own
// messages use the links: data larger than a collective carries in its agreement message
// (Note [Collectives that carry their data]) still moves through Gloo's algorithms.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace torch_neuron {

class LocalLinks final : public c10d::Backend {
 public:
  // Listens (the peers connect once they know address() and token()).
  LocalLinks(int rank, int size, std::chrono::milliseconds timeout);
  ~LocalLinks() override;
  LocalLinks(const LocalLinks&) = delete;
  LocalLinks& operator=(const LocalLinks&) = delete;

  // This process's listener, as the 5 hex digits of its abstract name, and its token.
  int64_t address() const { return address_; }
  int64_t token() const { return token_; }
  // Connects to every other rank: to the higher ranks' listeners, from the lower ranks'
  // connections (every rank calls it after the start-up exchange). Throws DistBackendError on a
  // bad or missing peer within the timeout.
  void connect(const std::vector<int64_t>& addresses, const std::vector<int64_t>& tokens);

  const std::string getBackendName() const override { return "neuron-local-links"; }
  // One contiguous CPU tensor each; the Work is complete when returned (the bytes are written).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  // One frame made of `parts` (contiguous CPU tensors) in order. With `may_defer`, a frame
  // larger than kDeferBytes is written by the links' writer thread and the Work completes
  // once it is written (the caller goes on to post its receives meanwhile); later frames to
  // the same rank follow it there, in order. The parts must stay unchanged until then;
  // `owners` (what the parts are views of, such as neuron tensors) are held until then.
  c10::intrusive_ptr<c10d::Work> send_parts(const std::vector<at::Tensor>& parts, int dst_rank,
                                            int tag, bool may_defer = false,
                                            std::vector<at::Tensor> owners = {});
  // The next frame from `src_rank` (-1: any rank) on `tag`, filling `parts` in order. A frame
  // larger than the parts fails the receive, or with `truncate` fills them and drops the rest
  // (the caller then learns the sizes differ from what the frame says of itself).
  c10::intrusive_ptr<c10d::Work> receive(std::vector<at::Tensor> parts, int src_rank, int tag,
                                         bool truncate);

  class Receive;

 private:
  // A frame's header: its tag and payload size.
  struct Header {
    uint64_t tag;
    uint64_t bytes;
  };
  struct Unexpected {
    int peer;
    std::unique_ptr<uint8_t[]> bytes;  // not zeroed: it is about to be overwritten
    size_t size;
  };
  // The reader thread: frames from every socket until stop().
  void read_loop();
  // Reads one frame from `peer`; false once its socket has closed.
  bool read_frame(int peer);
  // Reads `bytes` of `peer`'s frame into `receive`'s parts (the rest dropped); false if the
  // socket closed first.
  bool read_into(int peer, Receive& receive, uint64_t bytes);
  // The oldest posted receive that takes a frame from `peer` on `tag`, removed; or null.
  c10::intrusive_ptr<Receive> take_posted(int peer, uint64_t tag);
  void fail_peer(int peer, const std::string& why);
  void stop();
  // The writer thread: deferred frames in order until stop().
  void write_loop();
  // Writes one frame to `peer`; throws DistBackendError if the socket fails.
  void write_frame(int peer, Header header, const std::vector<at::Tensor>& parts);
  struct Outgoing {
    int peer;
    Header header;
    std::vector<at::Tensor> parts;
    std::vector<at::Tensor> owners;
    c10::intrusive_ptr<c10d::Work> work;
  };

  std::chrono::milliseconds timeout_;
  int listener_ = -1;
  int wake_ = -1;  // eventfd that stops the reader
  int64_t address_ = 0, token_ = 0;
  std::vector<int> sockets_;            // per rank; -1 for this rank
  std::vector<std::unique_ptr<std::mutex>> writing_;  // one writer per socket at a time
  std::mutex mutex_;                    // guards what follows
  std::unordered_map<uint64_t, std::deque<c10::intrusive_ptr<Receive>>> posted_;  // by tag
  std::unordered_map<uint64_t, std::deque<Unexpected>> unexpected_;               // by tag
  std::vector<std::string> closed_;     // per rank: why its socket is unusable, or empty
  std::thread reader_;
  std::mutex out_mutex_;  // guards what follows
  std::condition_variable out_cv_;
  std::deque<Outgoing> outgoing_;
  std::vector<int> deferred_;  // per rank: its frames queued or being written by the writer
  bool stopping_ = false;
  std::thread writer_;  // started at the first deferred frame
};

}  // namespace torch_neuron
