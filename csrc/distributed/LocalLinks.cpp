#include "distributed/LocalLinks.h"

#include <c10/util/Exception.h>

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>

namespace torch_neuron {

namespace {

// What a connecting rank says first: who it is and the listener's token.
struct Hello {
  int64_t rank;
  int64_t token;
};

constexpr uint32_t kWakeId = UINT32_MAX;
// Autobind names are a NUL byte and 5 hex digits (unix(7), "Autobind feature").
constexpr int kAutobindDigits = 5;

[[noreturn]] void raise(const std::string& what) { C10_THROW_ERROR(DistBackendError, what); }

std::string os_error(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

// The DistBackendError raise() throws, as an exception_ptr a Work can finish with.
std::exception_ptr error(const std::string& what) {
  try {
    raise(what);
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr too_large(uint64_t bytes, size_t capacity, int peer, uint64_t tag) {
  return error(c10::str("a message of ", bytes, " bytes from rank ", peer, " (tag ", tag,
                        ") does not fit its receive buffer of ", capacity, " bytes"));
}

// Reads `n` bytes; false if the socket closed or failed first.
bool read_all(int fd, void* into, size_t n) {
  auto* p = static_cast<uint8_t*>(into);
  while (n > 0) {
    const ssize_t got = ::recv(fd, p, n, MSG_WAITALL);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Writes every byte of the `count` buffers; false if the socket failed first.
bool write_all(int fd, iovec* parts, int count) {
  while (count > 0) {
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    ssize_t sent = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0) return false;
    while (count > 0 && static_cast<size_t>(sent) >= parts->iov_len) {
      sent -= static_cast<ssize_t>(parts->iov_len);
      ++parts;
      --count;
    }
    if (count > 0) {
      parts->iov_base = static_cast<uint8_t*>(parts->iov_base) + sent;
      parts->iov_len -= static_cast<size_t>(sent);
    }
  }
  return true;
}

sockaddr_un abstract_address(int64_t digits, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  char name[kAutobindDigits + 1];
  std::snprintf(name, sizeof(name), "%05llx", static_cast<unsigned long long>(digits));
  std::memcpy(address.sun_path + 1, name, kAutobindDigits);
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + kAutobindDigits);
  return address;
}

// (send_parts and receive check that each part is a contiguous CPU tensor.)
void check_one_tensor(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "neuron local links: ", op, " takes one tensor");
}

// A send: complete when its bytes are written (at once, unless the writer thread writes it).
class Sent final : public c10d::Work {
 public:
  explicit Sent(bool written) {
    if (written) finish();
  }
  void written(std::exception_ptr error) { finish(std::move(error)); }
};

// Frames above this size may not fit the socket's buffer (about 200 KiB by default, socket(7)
// wmem_default), so writing one can block until the peer reads it: an assumption of this
// design, not a measured limit.
constexpr size_t kDeferBytes = 64 << 10;

// Asks for socket buffers that hold a large frame whole, so that its write does not stall on
// the peer's reader a buffer's worth at a time (the kernel caps it at net.core.wmem_max, as it
// does Gloo's TCP buffers: gloo/transport/tcp/pair.cc asks for up to 32 MiB).
void enlarge_buffers(int fd) {
  const int bytes = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

}  // namespace

class LocalLinks::Receive final : public c10d::Work {
 public:
  Receive(std::vector<at::Tensor> parts, int peer, uint64_t tag, bool truncate,
          std::chrono::milliseconds timeout)
      : parts_(std::move(parts)), peer_(peer), tag_(tag), truncate_(truncate), timeout_(timeout) {
    for (const auto& part : parts_) capacity_ += part.nbytes();
  }

  const std::vector<at::Tensor>& parts() const { return parts_; }
  size_t capacity() const { return capacity_; }
  bool takes(uint64_t bytes) const { return truncate_ || bytes <= capacity_; }
  int peer() const { return peer_; }

  // Copies `bytes` (a whole frame held aside) into the parts, as far as they reach.
  void fill(const uint8_t* bytes, size_t size) const {
    for (const auto& part : parts_) {
      const size_t n = std::min(size, part.nbytes());
      if (n > 0) std::memcpy(part.data_ptr(), bytes, n);
      bytes += n;
      size -= n;
    }
  }

  // Fills it from a frame of `peer` held aside (or fails it if the frame is too large).
  void deliver(const uint8_t* bytes, size_t size, int peer) {
    if (!takes(size)) {
      complete(peer, too_large(size, capacity_, peer, tag_));
      return;
    }
    fill(bytes, size);
    complete(peer, nullptr);
  }

  // Called once, by whoever filled it or found it cannot be filled.
  void complete(int source, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      source_ = source;
    }
    finish(std::move(error));
  }

  int sourceRank() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return source_;
  }

  bool wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
    if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
      raise(c10::str("timed out after ", limit.count(), " ms waiting for a message from ",
                     peer_ >= 0 ? c10::str("rank ", peer_) : std::string("any rank"),
                     " (tag ", tag_, ")"));
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

 private:
  std::vector<at::Tensor> parts_;
  size_t capacity_ = 0;
  int peer_;
  uint64_t tag_;
  bool truncate_;
  std::chrono::milliseconds timeout_;
  int source_ = -1;
};

LocalLinks::LocalLinks(int rank, int size, std::chrono::milliseconds timeout)
    : Backend(rank, size), timeout_(timeout), sockets_(size, -1), closed_(size),
      deferred_(size, 0) {
  for (int r = 0; r < size; ++r) writing_.push_back(std::make_unique<std::mutex>());
  listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener_ < 0) raise("neuron local links: " + os_error("socket"));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Binding no name asks the kernel for a free abstract one (autobind).
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(sa_family_t)) != 0 ||
      ::listen(listener_, size) != 0) {
    const std::string why = os_error("bind/listen");
    ::close(listener_);
    raise("neuron local links: " + why);
  }
  socklen_t length = sizeof(address);
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  char digits[kAutobindDigits + 1] = {};
  std::memcpy(digits, address.sun_path + 1, kAutobindDigits);
  address_ = std::strtoll(digits, nullptr, 16);
  std::random_device entropy;
  token_ = (static_cast<int64_t>(entropy()) << 31) ^ static_cast<int64_t>(entropy());
  wake_ = ::eventfd(0, EFD_CLOEXEC);
}

void LocalLinks::connect(const std::vector<int64_t>& addresses,
                         const std::vector<int64_t>& tokens) {
  const int me = getRank();
  for (int r = me + 1; r < getSize(); ++r) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t length = 0;
    const sockaddr_un address = abstract_address(addresses[r], length);
    Hello hello{me, tokens[r]};
    iovec part{&hello, sizeof(hello)};
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
        !write_all(fd, &part, 1)) {
      const std::string why = os_error("connect");
      if (fd >= 0) ::close(fd);
      raise(c10::str("neuron local links: rank ", me, " cannot reach rank ", r, ": ", why));
    }
    enlarge_buffers(fd);
    sockets_[r] = fd;
  }
  // The lower ranks connect to this one. A connection that does not say a lower rank and
  // this listener's token is not the group's: it is dropped.
  int missing = me;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (missing > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{listener_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) <= 0) {
      if (errno == EINTR && left.count() > 0) continue;
      raise(c10::str("neuron local links: rank ", me, " timed out waiting for ", missing,
                     " lower rank(s) to connect"));
    }
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Hello hello{};
    timeval limit{static_cast<time_t>(timeout_.count() / 1000),
                  static_cast<suseconds_t>(timeout_.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    const bool ok = read_all(fd, &hello, sizeof(hello)) && hello.token == token_ &&
                    hello.rank >= 0 && hello.rank < me && sockets_[hello.rank] < 0;
    timeval forever{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
    if (!ok) {
      ::close(fd);
      continue;
    }
    enlarge_buffers(fd);
    sockets_[hello.rank] = fd;
    --missing;
  }
  ::close(listener_);
  listener_ = -1;
  reader_ = std::thread([this] { read_loop(); });
}

LocalLinks::~LocalLinks() { stop(); }

void LocalLinks::stop() {
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    stopping_ = true;
  }
  out_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof(one));
    reader_.join();
  }
  for (int& fd : sockets_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  if (listener_ >= 0) ::close(listener_);
  if (wake_ >= 0) ::close(wake_);
  listener_ = wake_ = -1;
}

c10::intrusive_ptr<c10d::Work> LocalLinks::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                int tag) {
  check_one_tensor(tensors, "send");
  return send_parts(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> LocalLinks::send_parts(const std::vector<at::Tensor>& parts,
                                                      int dst_rank, int tag, bool may_defer,
                                                      std::vector<at::Tensor> owners) {
  TORCH_CHECK(dst_rank >= 0 && dst_rank < getSize() && dst_rank != getRank(),
              "neuron local links: no peer rank ", dst_rank);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_[dst_rank].empty()) raise(closed_[dst_rank]);
  }
  Header header{static_cast<uint64_t>(tag), 0};
  for (const auto& part : parts) {
    TORCH_CHECK(part.is_cpu() && part.is_contiguous(),
                "neuron local links: a message part must be a contiguous CPU tensor");
    header.bytes += part.nbytes();
  }
  {
    std::unique_lock<std::mutex> lock(out_mutex_);
    if (deferred_[dst_rank] > 0 || (may_defer && header.bytes > kDeferBytes)) {
      auto work = c10::make_intrusive<Sent>(/*written=*/false);
      outgoing_.push_back({dst_rank, header, parts, std::move(owners), work});
      ++deferred_[dst_rank];
      if (!writer_.joinable()) writer_ = std::thread([this] { write_loop(); });
      lock.unlock();
      out_cv_.notify_one();
      return work;
    }
  }
  write_frame(dst_rank, header, parts);
  return c10::make_intrusive<Sent>(/*written=*/true);
}

void LocalLinks::write_frame(int peer, Header header, const std::vector<at::Tensor>& parts) {
  std::vector<iovec> iov{{&header, sizeof(header)}};
  for (const auto& part : parts) {
    if (part.nbytes() > 0) iov.push_back({part.data_ptr(), part.nbytes()});
  }
  std::lock_guard<std::mutex> writing(*writing_[peer]);
  if (!write_all(sockets_[peer], iov.data(), static_cast<int>(iov.size()))) {
    raise(c10::str("send to rank ", peer, " failed: ", os_error("sendmsg"),
                   " (has its process exited?)"));
  }
}

void LocalLinks::write_loop() {
  for (;;) {
    Outgoing next;
    {
      std::unique_lock<std::mutex> lock(out_mutex_);
      out_cv_.wait(lock, [&] { return stopping_ || !outgoing_.empty(); });
      if (outgoing_.empty()) return;  // stopping, and everything is written
      next = std::move(outgoing_.front());
      outgoing_.pop_front();
    }
    std::exception_ptr error;
    try {
      write_frame(next.peer, next.header, next.parts);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      --deferred_[next.peer];
    }
    static_cast<Sent&>(*next.work).written(error);
  }
}

c10::intrusive_ptr<c10d::Work> LocalLinks::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                int tag) {
  check_one_tensor(tensors, "recv");
  TORCH_CHECK(src_rank >= 0 && src_rank < getSize() && src_rank != getRank(),
              "neuron local links: no peer rank ", src_rank);
  return receive(tensors, src_rank, tag, /*truncate=*/false);
}

c10::intrusive_ptr<c10d::Work> LocalLinks::recvAnysource(std::vector<at::Tensor>& tensors,
                                                         int tag) {
  check_one_tensor(tensors, "recv");
  return receive(tensors, -1, tag, /*truncate=*/false);
}

c10::intrusive_ptr<c10d::Work> LocalLinks::receive(std::vector<at::Tensor> parts, int src_rank,
                                                   int tag, bool truncate) {
  for (const auto& part : parts) {
    TORCH_CHECK(part.is_cpu() && part.is_contiguous(),
                "neuron local links: a receive part must be a contiguous CPU tensor");
  }
  auto receive = c10::make_intrusive<Receive>(std::move(parts), src_rank,
                                              static_cast<uint64_t>(tag), truncate, timeout_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (src_rank >= 0 && !closed_[src_rank].empty()) raise(closed_[src_rank]);
  auto& waiting = unexpected_[static_cast<uint64_t>(tag)];
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    if (src_rank >= 0 && it->peer != src_rank) continue;
    Unexpected frame = std::move(*it);
    waiting.erase(it);
    lock.unlock();
    receive->deliver(frame.bytes.get(), frame.size, frame.peer);
    return receive;
  }
  posted_[static_cast<uint64_t>(tag)].push_back(receive);
  return receive;
}

c10::intrusive_ptr<LocalLinks::Receive> LocalLinks::take_posted(int peer, uint64_t tag) {
  auto found = posted_.find(tag);
  if (found == posted_.end()) return nullptr;
  auto& queue = found->second;
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if ((*it)->peer() >= 0 && (*it)->peer() != peer) continue;
    auto receive = std::move(*it);
    queue.erase(it);
    return receive;
  }
  return nullptr;
}

bool LocalLinks::read_into(int peer, Receive& receive, uint64_t bytes) {
  const int fd = sockets_[peer];
  for (const auto& part : receive.parts()) {
    const uint64_t n = std::min<uint64_t>(bytes, part.nbytes());
    if (n > 0 && !read_all(fd, part.data_ptr(), n)) return false;
    bytes -= n;
  }
  // What the parts cannot hold (a truncating receive) is read and dropped.
  uint8_t sink[4096];
  while (bytes > 0) {
    const uint64_t n = std::min<uint64_t>(bytes, sizeof(sink));
    if (!read_all(fd, sink, n)) return false;
    bytes -= n;
  }
  return true;
}

bool LocalLinks::read_frame(int peer) {
  const int fd = sockets_[peer];
  const std::string gone = c10::str("the connection to rank ", peer,
                                    " closed (has its process exited?)");
  Header header{};
  if (!read_all(fd, &header, sizeof(header))) {
    fail_peer(peer, gone);
    return false;
  }
  c10::intrusive_ptr<Receive> receive;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    receive = take_posted(peer, header.tag);
  }
  if (receive && receive->takes(header.bytes)) {
    // Straight into the receive's buffers.
    if (!read_into(peer, *receive, header.bytes)) {
      receive->complete(peer, error(gone));
      fail_peer(peer, gone);
      return false;
    }
    receive->complete(peer, nullptr);
    return true;
  }
  // Unexpected (or too large): read aside; a receive posted meanwhile takes it below.
  std::unique_ptr<uint8_t[]> held(new uint8_t[header.bytes]);
  if (!read_all(fd, held.get(), header.bytes)) {
    if (receive) receive->complete(peer, error(gone));
    fail_peer(peer, gone);
    return false;
  }
  if (!receive) {
    std::lock_guard<std::mutex> lock(mutex_);
    receive = take_posted(peer, header.tag);
    if (!receive) {
      unexpected_[header.tag].push_back({peer, std::move(held), header.bytes});
      return true;
    }
  }
  receive->deliver(held.get(), header.bytes, peer);
  return true;
}

void LocalLinks::fail_peer(int peer, const std::string& why) {
  std::vector<c10::intrusive_ptr<Receive>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_[peer] = why;
    bool all_closed = true;
    for (int r = 0; r < getSize(); ++r) {
      all_closed = all_closed && (r == getRank() || !closed_[r].empty());
    }
    for (auto& [tag, queue] : posted_) {
      for (auto it = queue.begin(); it != queue.end();) {
        if ((*it)->peer() == peer || (all_closed && (*it)->peer() < 0)) {
          failed.push_back(std::move(*it));
          it = queue.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  const std::exception_ptr failure = error(why);
  for (auto& receive : failed) receive->complete(peer, failure);
}

void LocalLinks::read_loop() {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.u32 = kWakeId;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, wake_, &wake);
  for (int r = 0; r < getSize(); ++r) {
    if (sockets_[r] < 0) continue;
    epoll_event readable{};
    readable.events = EPOLLIN;
    readable.data.u32 = static_cast<uint32_t>(r);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, sockets_[r], &readable);
  }
  epoll_event events[16];
  for (;;) {
    const int n = ::epoll_wait(ep, events, 16, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < n; ++i) {
      const uint32_t id = events[i].data.u32;
      if (id == kWakeId) {
        ::close(ep);
        return;
      }
      const int peer = static_cast<int>(id);
      if (!read_frame(peer)) ::epoll_ctl(ep, EPOLL_CTL_DEL, sockets_[peer], nullptr);
    }
  }
  ::close(ep);
}

}  // namespace torch_neuron
