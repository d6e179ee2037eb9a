#include "distributed/ProcessGroupNeuron.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <trnsim/cost.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "aten/Charge.h"
#include "runtime/HostView.h"
#include "distributed/HostStaging.h"
#include "distributed/InlineCollective.h"
#include "distributed/NeuronWork.h"
#include "distributed/LocalLinks.h"
#include "distributed/PostedInboxes.h"
#include "distributed/PremulFactor.h"
#include "distributed/SpmdCpuBackend.h"
#include "distributed/VirtualWorld.h"
#include "aten/KnownValues.h"
#include "aten/PredictOnly.h"
#include "runtime/Runtime.h"
#include "runtime/Settings.h"
#include "runtime/Stream.h"

namespace torch_neuron {
namespace {

using c10d::OpType;
using trnsim::Collective;
using WorkList = std::vector<c10::intrusive_ptr<c10d::Work>>;

// The Gloo point-to-point tags the group uses itself. Users' tags stay below kBulkTagBit;
// sends use it for their bulk data and receivers kSizeTagBit for their sizes (Note
// [Point-to-point sizes]); collectives exchange their agreement records on both bits (Note
// [Neuron process group]).
constexpr int kBulkTagBit = 1 << 29;
constexpr int kSizeTagBit = 1 << 30;
constexpr int kAgreementTag = kBulkTagBit | kSizeTagBit;
// The most data a message carries besides its header: a point-to-point transfer's inline data
// (Note [Point-to-point sizes]) or a collective's data for one peer (Note [Collectives that
// carry their data]). An assumption of this design, not a hardware figure.
constexpr int64_t kInlineBytes = 64 << 10;
// The most a collective carries for one peer (Note [Collectives that carry their data]): an
// assumption of this design, which bounds the inbox each peer's message lands in.
constexpr int64_t kCarriedBytes = 4 << 20;
// The most an all_reduce over more than 2 ranks carries: each rank then receives p - 1 whole
// tensors where Gloo's ring moves less than two, in 2(p - 1) steps. An assumption too, from
// the collective benchmark on this project's 2-core machine (4 ranks, local links): carried,
// a 128-512 KiB all_reduce took 0.2-0.5x Gloo's time, a 2-4 MiB one 1.25-1.67x.
constexpr int64_t kAllReduceCarriedBytes = 1 << 20;

// The neuron device the op runs on: the first neuron tensor's, or nullopt for CPU-only calls.
std::optional<c10::Device> neuron_device(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.defined() && t.device().type() == kNeuron) return t.device();
  }
  return std::nullopt;
}

std::optional<c10::Device> neuron_device(const std::vector<std::vector<at::Tensor>>& lists) {
  for (const auto& list : lists) {
    if (auto device = neuron_device(list)) return device;
  }
  return std::nullopt;
}

uint64_t total_bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t bytes = 0;
  for (const auto& t : tensors) bytes += t.numel() * t.element_size();
  return bytes;
}

// The dtype every rank must use for a collective (Undefined for an empty list).
at::ScalarType dtype_of(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.defined()) return t.scalar_type();
  }
  return at::ScalarType::Undefined;
}

uint64_t total_bytes(const std::vector<std::vector<at::Tensor>>& lists) {
  uint64_t bytes = 0;
  for (const auto& list : lists) bytes += total_bytes(list);
  return bytes;
}

// Trainium's collective engines reduce fp32, bf16, fp16 and integers, not float8.
void check_reducible(const std::vector<at::Tensor>& tensors, const char* op) {
  for (const auto& t : tensors) {
    TORCH_CHECK_TYPE(!at::isFloat8Type(t.scalar_type()), "neuron process group: ", op,
                     " cannot reduce ", t.scalar_type(),
                     " tensors; cast them to torch.bfloat16 or torch.float32 first (float8 "
                     "data can be moved by all_gather, broadcast, all_to_all, send and recv)");
  }
}

// Gloo has no PREMUL_SUM: the inputs are multiplied by the factor, then summed.
c10d::ReduceOp gloo_reduce_op(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::PREMUL_SUM ? c10d::ReduceOp(c10d::ReduceOp::SUM) : op;
}

// Scales the host tensors Gloo will reduce by a PREMUL_SUM factor: in place for in-out
// buffers (all_reduce, reduce), else into new host tensors (the caller's inputs stay).
void apply_premul(const c10d::ReduceOp& op, std::vector<at::Tensor>& host, bool in_place) {
  const auto factor = premul_factor(op);
  if (!factor) return;
  for (auto& t : host) t = in_place ? t.mul_(*factor) : t.mul(*factor);
}

// What else every rank must agree on (Note [Neuron process group]): the root and reduce op.
double call_detail(int root, std::optional<c10d::ReduceOp> op = std::nullopt) {
  return root * 256.0 + (op ? static_cast<int>(op->op_) + 1 : 0);
}

// `flat`'s elements in `parts` equal consecutive chunks (its dim-0 chunks when contiguous).
std::vector<at::Tensor> flat_chunks(const at::Tensor& flat, int parts) {
  const int64_t chunk = flat.numel() / parts;
  std::vector<at::Tensor> chunks;
  for (int r = 0; r < parts; ++r) chunks.push_back(flat.reshape({-1}).narrow(0, r * chunk, chunk));
  return chunks;
}

// Whether every tensor of `list` holds `bytes`.
bool all_hold(const std::vector<at::Tensor>& list, uint64_t bytes) {
  return std::all_of(list.begin(), list.end(),
                     [&](const at::Tensor& t) { return t.nbytes() == bytes; });
}

// Whether process `pid` of this machine still runs (a zombie has exited).
bool process_is_running(int64_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(file, stat)) return false;
  // "pid (command) state ...": the command may hold spaces and parentheses.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

// Each process group of this process takes the next collective stream slot.
std::atomic<int> next_stream_slot{0};  // two per group: collectives and receives, sends

std::string json_detail(const trnsim::CollectiveCost& cost, Collective kind, uint64_t bytes,
                        size_t ranks, const std::string& group) {
  return c10::str("{\"collective\": \"", trnsim::collective_name(kind), "\", \"bytes\": ", bytes,
                  ", \"ranks\": ", ranks, ", \"group\": \"", group, "\", \"algorithm\": \"",
                  cost.algorithm, "\", \"link\": \"", cost.link, "\", \"link_gbps\": ",
                  cost.link_gbps, ", \"algbw_gbps\": ", cost.algbw_gbps,
                  ", \"busbw_gbps\": ", cost.busbw_gbps, "}");
}

}  // namespace

ProcessGroupNeuron::ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo,
                                       c10::intrusive_ptr<c10d::Backend> cpu_gloo, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       std::string group_name, c10::DeviceIndex device, int node,
                                       std::vector<int> global_ranks)
    : Backend(rank, size),
      gloo_(std::move(gloo)),
      cpu_(cpu_gloo ? std::move(cpu_gloo) : gloo_),
      timeout_(timeout),
      group_name_(std::move(group_name)),
      device_(device),
      node_(node),
      stream_slot_(next_stream_slot.fetch_add(2)),
      global_ranks_(std::move(global_ranks)) {
  TORCH_CHECK(gloo_, "ProcessGroupNeuron needs a Gloo process group to move data");
  cpu_gloo_ = cpu_;
  data_ = gloo_;
  messages_ = gloo_;
  if (global_ranks_.empty()) {
    for (int r = 0; r < size; ++r) global_ranks_.push_back(r);
  }
  TORCH_CHECK(static_cast<int>(global_ranks_.size()) == size, "neuron process group: ",
              global_ranks_.size(), " global ranks for a group of ", size);
  if (virtual_world()) {
    join_virtual_world();
    return;
  }
  for (int r = 0; r < size; ++r) gloo_ranks_.push_back(r);
  // Every rank reports where it sits and which process it is; chip and core are -1 for a rank
  // whose device does not exist, so that all ranks raise together instead of the others
  // waiting for it.
  const bool valid = device >= 0 && device < visible_device_count();
  // Also where this process's local links listen (Note [Local links]): abstract sockets are
  // shared by the processes of one network namespace on one machine.
  enum Field { kNode, kChip, kCore, kPid, kHost, kNetns, kLink, kToken, kFields };
  auto links = size > 1 ? c10::make_intrusive<LocalLinks>(rank, size, timeout_) : nullptr;
  at::Tensor mine = at::empty({kFields}, at::kLong);
  auto* m = mine.data_ptr<int64_t>();
  m[kNode] = node;
  m[kChip] = valid ? torch_neuron::device(device).chip() : -1;
  m[kCore] = valid ? torch_neuron::device(device).core() : -1;
  m[kPid] = getpid();
  m[kHost] = static_cast<int64_t>(gethostid());
  struct stat netns {};
  m[kNetns] = ::stat("/proc/self/ns/net", &netns) == 0 ? static_cast<int64_t>(netns.st_ino) : -1;
  m[kLink] = links ? links->address() : 0;
  m[kToken] = links ? links->token() : 0;
  at::Tensor all = at::empty({kFields * size}, at::kLong);
  std::vector<at::Tensor> in{mine};
  std::vector<std::vector<at::Tensor>> out{all.chunk(size)};
  wait_all({gloo_->allgather(out, in)}, "start-up exchange");
  const int count = visible_device_count();
  for (int r = 0; r < size; ++r) {
    const int64_t* a = all.data_ptr<int64_t>() + kFields * r;
    TORCH_CHECK(a[kChip] >= 0, "neuron process group: rank ", r,
                " has no NeuronCore: its device index is beyond the ", count,
                " NeuronCores of the simulated ", system().instance().name,
                ". Run at most ", count, " ranks per node (torchrun --nproc-per-node ", count,
                ") or choose a larger instance with TORCH_NEURON_INSTANCE");
    for (int s = 0; s < r; ++s) {
      const int64_t* b = all.data_ptr<int64_t>() + kFields * s;
      TORCH_CHECK(b[kNode] != a[kNode] || b[kCore] != a[kCore], "neuron process group: ranks ",
                  s, " and ", r, " both claim NeuronCore ", a[kCore], " of simulated instance ",
                  a[kNode], "; the Neuron runtime gives each NeuronCore to one process. Give "
                  "each rank its own device: torch.neuron.set_device(local_rank) or "
                  "torchrun's LOCAL_RANK");
    }
    places_.push_back({static_cast<int>(a[kNode]), static_cast<int>(a[kChip])});
    // Ranks on this machine can be checked for having exited when a collective fails.
    pids_.push_back(a[kHost] == m[kHost] ? a[kPid] : -1);
  }
  bool one_machine = m[kNetns] >= 0;
  std::vector<int64_t> addresses, tokens;
  for (int r = 0; r < size; ++r) {
    const int64_t* a = all.data_ptr<int64_t>() + kFields * r;
    one_machine = one_machine && a[kHost] == m[kHost] && a[kNetns] == m[kNetns];
    addresses.push_back(a[kLink]);
    tokens.push_back(a[kToken]);
  }
  // Every rank decides the same from the same records.
  if (one_machine && links) {
    links->connect(addresses, tokens);
    links_ = links.get();
    messages_ = std::move(links);
  }
}

void ProcessGroupNeuron::join_virtual_world() {
  const VirtualWorld& world = *virtual_world();
  TORCH_CHECK(!execution_enabled(), "neuron process group: a virtual world runs in "
              "predict-only mode (its virtual ranks compute nothing); set "
              "TORCH_NEURON_EXECUTE=0 or start it with python -m torch_neuron run --virtual");
  int running = 0;
  for (int global : global_ranks_) {
    TORCH_CHECK(global >= 0 && global < world.size, "neuron process group: rank ", global,
                " is not in the virtual world of ", world.size, " ranks");
    places_.push_back(world.places[global]);
    pids_.push_back(-1);
    gloo_ranks_.push_back(world.running[global] ? running++ : -1);
  }
  TORCH_CHECK(gloo_ranks_[getRank()] >= 0 && running == gloo_->getSize(),
              "neuron process group: this rank's Gloo group has ", gloo_->getSize(),
              " ranks; the group has ", running, " running ranks (TORCH_NEURON_VIRTUAL_RANKS)");
  if (running < getSize()) {
    cpu_ = c10::make_intrusive<SpmdCpuBackend>(getRank(), getSize(), gloo_ranks_, cpu_gloo_);
    // Known values (Note [Known values in predict-only mode]) follow the same rule.
    data_ = c10::make_intrusive<SpmdCpuBackend>(getRank(), getSize(), gloo_ranks_, gloo_);
  }
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupNeuron::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("neuron", timeout_);
  options->group_name = group_name_;
  return options;
}

std::string ProcessGroupNeuron::error_context(const std::string& op) const {
  return c10::str("neuron process group '", group_name_, "': ", op, " on rank ", getRank(),
                  " of ", getSize());
}

std::string ProcessGroupNeuron::exited_ranks() const {
  std::string ranks;
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] > 0 && !process_is_running(pids_[r])) {
      ranks += c10::str(ranks.empty() ? "" : ", ", r);
    }
  }
  return ranks;
}

void ProcessGroupNeuron::wait_all(const WorkList& works, const char* op) {
  for (const auto& work : works) {
    try {
      work->wait();
    } catch (const std::exception& e) {
      raise_failed(op, e);
    }
  }
}

void ProcessGroupNeuron::raise_failed(const char* op, const std::exception& e) const {
  const std::string exited = exited_ranks();
  C10_THROW_ERROR(
      DistBackendError,
      c10::str(error_context(op), " failed",
               exited.empty() ? std::string() : " because rank(s) " + exited + " exited", ": ",
               e.what(),
               "\nEvery rank of the group must call the same collectives in the same order "
               "with matching sizes; a rank that exited or raised shows its own error."));
}

double ProcessGroupNeuron::arrival_ns(c10::Device device) {
  const auto index = device.index();
  // A collective needs its core's DMA queues (Note [Collective DMA share]): it arrives once
  // work other streams put on them is done, so every rank starts it at the agreed time.
  return std::max({current_queue(index).now_ns(),
                   queue_of(collective_stream(index, stream_slot_)).now_ns(),
                   torch_neuron::device(index).dma_free_ns()});
}

// Note [Collectives that carry their data]
// The agreement (Note [Neuron process group]) costs one message latency before the data moves,
// which doubles the wall time of a small collective. A collective whose data for each peer
// fits in kCarriedBytes (an all_reduce over more than 2 ranks: kAllReduceCarriedBytes)
// therefore sends that data in its agreement message, after the record:
// all_reduce, reduce_scatter and reduce send their (chunk of the) input to the ranks that
// reduce it, all_gather and all_to_all with equal splits their input (chunk), broadcast the
// root's tensor. Every rank then checks the records as before and only if all agree computes
// its outputs from what arrived (InlineCollective.h): one message latency in all, where Gloo
// needs one (2 ranks) to several (its ring: 2(p-1) steps for an all-reduce). Every rank
// reduces the terms in rank order, so all ranks get the same bits; a floating-point sum or
// product over more than 2 ranks may differ in its last bits from Gloo's ring, which adds in
// another order, as NCCL's or the Neuron runtime's would (PyTorch promises no order). Every inbox
// can take the largest message, so a rank that carries data to a peer that does not (its data is
// larger, uneven splits) or that called another collective overflows nothing: the data that came
// along is then dropped, and the collective either goes to Gloo (every rank agrees but one did not
// carry) or raises on every rank (they disagree).
// Virtual worlds and predict-only mode carry no data (their rules stay in data_ and
// HostStaging).
c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::collective(
    Collective kind, OpType type, c10::Device device, uint64_t bytes, at::ScalarType dtype,
    std::vector<at::Tensor> outputs, HostStaging& staging, const GlooOps& ops, double detail,
    const std::optional<InlinePlan>& plan) {
  const auto stream = collective_stream(device.index(), stream_slot_);
  trnsim::Queue& queue = queue_of(stream);
  const char* name = trnsim::collective_name(kind);
  // Agree on the clock and check that every rank calls the same collective before any data is
  // used (Gloo aborts the process on a size mismatch): every rank sends its record [arrival,
  // signature, checked bytes, bytes, ...] to every other rank and receives theirs, all at once
  // (one message latency), and each rank reaches the same verdict from the same records. A
  // small collective's data rides in the same messages (Note [Collectives that carry their
  // data]).
  // Predict-only ranks move no data (HostStaging stages nothing): every rank must agree.
  const bool moves_data = execution_enabled();
  const double signature = static_cast<double>((moves_data ? 0 : 1 << 16) +
                                               static_cast<int>(kind) * 256 +
                                               static_cast<int>(dtype) + 1);
  // all_to_all's sizes may differ per rank with uneven splits (-1: not checked; the largest is
  // charged); an all_to_all has a plan exactly when its splits are equal.
  const double checked_bytes =
      kind == Collective::AllToAll && !plan ? -1.0 : static_cast<double>(bytes);
  const int me = getRank();
  bool carries = plan.has_value() && moves_data &&
                 std::find(gloo_ranks_.begin(), gloo_ranks_.end(), -1) == gloo_ranks_.end();
  if (carries) {
    // A collective that sends every peer what Gloo's algorithm would send it (all_gather,
    // reduce_scatter, all_to_all, broadcast) carries up to kCarriedBytes per peer: one step
    // where Gloo's ring takes p - 1 one after another, for a copy into and out of the
    // messages. So do reduce, whose root receives p - 1 tensors, and a 2-rank all_reduce, an
    // exchange like all_to_all's; an all_reduce over more ranks up to kAllReduceCarriedBytes.
    const auto cap = static_cast<size_t>(
        kind == Collective::AllReduce && getSize() > 2 ? kAllReduceCarriedBytes : kCarriedBytes);
    for (const auto& payload : plan->payloads) {
      carries = carries && (!payload.defined() || payload.nbytes() <= cap);
    }
  }
  enum Field { kArrival, kSignature, kChecked, kBytes, kKnown, kDetail, kCarries, kPayload,
               kFields };
  constexpr int64_t kRecordBytes = kFields * sizeof(double);
  double mine[kFields];
  mine[kArrival] = arrival_ns(device);
  mine[kSignature] = signature;
  mine[kChecked] = checked_bytes;
  mine[kBytes] = static_cast<double>(bytes);
  // Predict-only: whether this rank's tensors can take part with values (Note [Known values in
  // predict-only mode]); the data moves only if every running rank's can.
  mine[kKnown] = staging.values_known() ? 1.0 : 0.0;
  mine[kDetail] = detail;
  mine[kCarries] = carries ? 1.0 : 0.0;
  mine[kPayload] = 0;
  // The last message built, reused for the next peer that gets the same data (broadcast,
  // all_gather and all_reduce send every peer the same tensor; a bare record has none).
  at::Tensor last;
  const void* last_data = nullptr;
  int64_t last_extra = -1;
  auto message_for = [&](int r) {
    const at::Tensor payload = carries ? plan->payloads[r] : at::Tensor();
    const int64_t extra = payload.defined() ? static_cast<int64_t>(payload.nbytes()) : 0;
    const void* data = extra > 0 ? payload.data_ptr() : nullptr;
    if (last.defined() && data == last_data && extra == last_extra) return last;
    at::Tensor message = at::empty({kRecordBytes + extra}, at::kByte);
    auto* record = reinterpret_cast<double*>(message.data_ptr());
    std::memcpy(record, mine, kRecordBytes);
    record[kPayload] = static_cast<double>(extra);
    if (extra > 0) std::memcpy(message.data_ptr<uint8_t>() + kRecordBytes, data, extra);
    last = message;
    last_data = data;
    last_extra = extra;
    return message;
  };
  // Every inbox can take the largest message (a peer may carry data where this rank does not);
  // its receive was posted in advance (Note [Receives posted in advance]).
  if (!agreement_inboxes_) {
    std::vector<int> peers = gloo_ranks_;
    peers[me] = -1;
    agreement_inboxes_ = std::make_unique<PostedInboxes>(*messages_, kAgreementTag,
                                                         kRecordBytes + kCarriedBytes, peers);
  }
  std::vector<at::Tensor> inboxes(getSize());
  WorkList exchange;
  try {  // (Gloo raises at issue too, when a peer has gone)
    for (int r = 0; r < getSize(); ++r) {
      const int peer = gloo_rank(r);
      if (r == me || peer < 0) continue;  // a virtual rank arrives with this one
      auto receive = agreement_inboxes_->next(r);
      exchange.push_back(std::move(receive.work));
      inboxes[r] = std::move(receive.inbox);
      std::vector<at::Tensor> message{message_for(r)};
      exchange.push_back(messages_->send(message, peer, kAgreementTag));
    }
  } catch (const std::exception& e) {
    raise_failed(name, e);
  }
  wait_all(exchange, name);
  auto record_of = [&](int r) {
    return r == me ? mine : reinterpret_cast<const double*>(inboxes[r].data_ptr());
  };
  double start_ns = 0, charged_size = 0;
  bool all_known = true, all_carry = true;
  int differing = -1;
  for (int r = 0; r < getSize(); ++r) {
    if (gloo_rank(r) < 0) continue;
    const double* a = record_of(r);
    start_ns = std::max(start_ns, a[kArrival]);
    all_known = all_known && a[kKnown] != 0.0;
    all_carry = all_carry && a[kCarries] != 0.0;
    charged_size = std::max(charged_size, a[kBytes]);
    const bool checked = a[kChecked] >= 0 && mine[kChecked] >= 0;
    if (differing < 0 && (a[kSignature] != mine[kSignature] || a[kDetail] != mine[kDetail] ||
                          (checked && a[kChecked] != mine[kChecked]))) {
      differing = r;
    }
  }
  // Data that rode along is used only if every rank's sizes agree (all_to_all's too: a rank
  // carries its data only with equal splits).
  for (int r = 0; r < getSize() && all_carry && differing < 0; ++r) {
    if (record_of(r)[kBytes] != mine[kBytes]) differing = r;
  }
  TORCH_CHECK(differing < 0, error_context(name), ": rank ", differing,
              " of the group called a different collective, size, dtype, root or reduce op "
              "than this rank (this rank: ", name, " of ", bytes, " bytes of ", dtype,
              moves_data ? "" : ", predict-only", "; rank ", differing, ": ",
              static_cast<uint64_t>(record_of(differing)[kBytes]),
              " bytes). Every rank must call the same collectives in the same order with "
              "matching sizes, dtypes, roots and reduce ops, all computing or all in "
              "predict-only mode.");
  const bool with_values = !moves_data && all_known && ops;
  if (all_carry) {
    std::vector<at::Tensor> received(getSize());
    for (int r = 0; r < getSize(); ++r) {
      received[r] = r == me ? (plan->payloads[me].defined() ? host_bytes(plan->payloads[me])
                                                            : at::empty({0}, at::kByte))
                            : inboxes[r].narrow(0, kRecordBytes,
                                                static_cast<int64_t>(record_of(r)[kPayload]));
    }
    plan->combine(received);
    staging.finish();
  } else if (ops && (moves_data || with_values)) {
    wait_all(ops(), name);
    staging.finish();
  }
  const auto size = static_cast<uint64_t>(charged_size);
  queue.wait_until(start_ns);
  // The chain goes on (Note [Known values in predict-only mode]).
  std::optional<ComputeKnownValues> computing;
  if (with_values) computing.emplace();
  const auto algorithms = collective_algorithms();
  const double end = charge(queue, c10::str("c10d::", name), nullptr,
                            {trnsim::CollectiveOp{kind, size, places_, algorithms}}, [&] {
                              const auto cost = trnsim::collective_cost(
                                  system().instance(), kind, size, places_, algorithms);
                              return json_detail(cost, kind, size, places_.size(), group_name_);
                            });
  staging.record_stream(stream);
  if (with_values) staging.mark_outputs_known();
  return c10::make_intrusive<NeuronWork>(getRank(), type, std::move(outputs), stream, end);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const auto device = neuron_device(tensors);
  if (!device) return cpu_->broadcast(tensors, opts);
  HostStaging staging;
  // The root's tensors are read, the others' only written.
  auto host = opts.rootRank == getRank() ? staging.in_outs(tensors) : staging.outputs(tensors);
  std::optional<InlinePlan> plan;
  if (host.size() == 1) plan = inline_broadcast(host[0], opts.rootRank, getRank(), getSize());
  return collective(Collective::Broadcast, OpType::BROADCAST, *device, total_bytes(tensors),
                    dtype_of(tensors), tensors, staging,
                    [&] { return WorkList{data_->broadcast(host, opts)}; },
                    call_detail(opts.rootRank), plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const auto device = neuron_device(tensors);
  if (!device) return cpu_->allreduce(tensors, opts);
  check_reducible(tensors, "all_reduce");
  HostStaging staging;
  auto host = staging.in_outs(tensors);
  apply_premul(opts.reduceOp, host, /*in_place=*/true);
  auto gloo_opts = opts;
  gloo_opts.reduceOp = gloo_reduce_op(opts.reduceOp);
  std::optional<InlinePlan> plan;
  if (host.size() == 1) plan = inline_all_reduce(host[0], gloo_opts.reduceOp, getSize());
  return collective(Collective::AllReduce, OpType::ALLREDUCE, *device, total_bytes(tensors),
                    dtype_of(tensors), tensors, staging,
                    [&] { return WorkList{data_->allreduce(host, gloo_opts)}; },
                    call_detail(0, opts.reduceOp), plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const auto device = neuron_device(tensors);
  if (!device) return cpu_->allreduce_coalesced(tensors, opts);
  check_reducible(tensors, "all_reduce_coalesced");
  HostStaging staging;
  auto host = staging.in_outs(tensors);
  apply_premul(opts.reduceOp, host, /*in_place=*/true);
  c10d::AllreduceOptions one;
  one.reduceOp = gloo_reduce_op(opts.reduceOp);
  one.timeout = opts.timeout;
  // One all-reduce per tensor (Gloo's coalesced form needs one dtype), charged as one.
  return collective(Collective::AllReduce, OpType::ALLREDUCE_COALESCED, *device,
                    total_bytes(tensors), dtype_of(tensors), tensors, staging, [&] {
                      WorkList works;
                      for (auto& t : host) {
                        std::vector<at::Tensor> single{t};
                        works.push_back(data_->allreduce(single, one));
                      }
                      return works;
                    });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const auto device = neuron_device(tensors);
  if (!device) return cpu_->reduce(tensors, opts);
  check_reducible(tensors, "reduce");
  HostStaging staging;
  auto host = staging.in_outs(tensors);
  apply_premul(opts.reduceOp, host, /*in_place=*/true);
  auto gloo_opts = opts;
  gloo_opts.reduceOp = gloo_reduce_op(opts.reduceOp);
  std::optional<InlinePlan> plan;
  if (host.size() == 1) {
    plan = inline_reduce(host[0], gloo_opts.reduceOp, opts.rootRank, getRank(), getSize());
  }
  return collective(Collective::Reduce, OpType::REDUCE, *device, total_bytes(tensors),
                    dtype_of(tensors), tensors, staging,
                    [&] { return WorkList{data_->reduce(host, gloo_opts)}; },
                    call_detail(opts.rootRank, opts.reduceOp), plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) return cpu_->allgather(outputs, inputs, opts);
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  auto host_out = staging.outputs(outputs);
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  std::optional<InlinePlan> plan;
  if (host_in.size() == 1 && host_out.size() == 1 &&
      static_cast<int>(host_out[0].size()) == getSize() &&
      all_hold(host_out[0], host_in[0].nbytes())) {
    plan = inline_all_gather(host_out[0], host_in[0]);
  }
  return collective(Collective::AllGather, OpType::ALLGATHER, *device, total_bytes(outputs),
                    dtype_of(inputs), flat, staging,
                    [&] { return WorkList{data_->allgather(host_out, host_in, opts)}; }, 0, plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return allgather_into_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) return cpu_->allgather_coalesced(outputs, inputs, opts);
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  auto host_out = staging.outputs(outputs);
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return collective(Collective::AllGather, OpType::ALLGATHER_COALESCED, *device,
                    total_bytes(outputs), dtype_of(inputs), flat, staging,
                    [&] { return WorkList{data_->allgather_coalesced(host_out, host_in, opts)}; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) {
    if (outputs.size() == 1) return cpu_->_allgather_base(outputs[0], inputs[0], opts);
    return cpu_->allgather_into_tensor_coalesced(outputs, inputs, opts);
  }
  TORCH_CHECK(outputs.size() == inputs.size(), "all_gather_into_tensor: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  auto host_out = staging.outputs(outputs);
  const OpType type = outputs.size() == 1 ? OpType::_ALLGATHER_BASE : OpType::COALESCED;
  std::optional<InlinePlan> plan;
  if (host_out.size() == 1 && host_out[0].nbytes() == host_in[0].nbytes() * getSize()) {
    plan = inline_all_gather(flat_chunks(host_out[0], getSize()), host_in[0]);
  }
  return collective(Collective::AllGather, type, *device, total_bytes(outputs), dtype_of(inputs),
                    outputs,
                    staging, [&] {
                      WorkList works;
                      for (size_t i = 0; i < host_out.size(); ++i) {
                        works.push_back(data_->_allgather_base(host_out[i], host_in[i], opts));
                      }
                      return works;
                    }, 0, plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) return cpu_->gather(outputs, inputs, opts);
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  auto host_out = staging.outputs(outputs);
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return collective(Collective::Gather, OpType::GATHER, *device, total_bytes(inputs) * getSize(),
                    dtype_of(inputs),
                    flat, staging,
                    [&] { return WorkList{data_->gather(host_out, host_in, opts)}; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  auto device = neuron_device(outputs);
  if (!device) device = neuron_device(inputs);
  if (!device) return cpu_->scatter(outputs, inputs, opts);
  HostStaging staging;
  auto host_out = staging.outputs(outputs);
  std::vector<std::vector<at::Tensor>> host_in;
  for (const auto& list : inputs) host_in.push_back(staging.inputs(list));
  return collective(Collective::Scatter, OpType::SCATTER, *device,
                    total_bytes(outputs) * getSize(), dtype_of(outputs), outputs, staging,
                    [&] { return WorkList{data_->scatter(host_out, host_in, opts)}; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto device = neuron_device(outputs);
  if (!device) device = neuron_device(inputs);
  if (!device) return cpu_->reduce_scatter(outputs, inputs, opts);
  for (const auto& list : inputs) check_reducible(list, "reduce_scatter");
  HostStaging staging;
  auto host_out = staging.outputs(outputs);
  std::vector<std::vector<at::Tensor>> host_in;
  for (const auto& list : inputs) {
    host_in.push_back(staging.inputs(list));
    apply_premul(opts.reduceOp, host_in.back(), /*in_place=*/false);
  }
  auto gloo_opts = opts;
  gloo_opts.reduceOp = gloo_reduce_op(opts.reduceOp);
  std::optional<InlinePlan> plan;
  if (host_out.size() == 1 && host_in.size() == 1 &&
      static_cast<int>(host_in[0].size()) == getSize() &&
      all_hold(host_in[0], host_out[0].nbytes())) {
    plan = inline_reduce_scatter(host_out[0], host_in[0], gloo_opts.reduceOp);
  }
  return collective(Collective::ReduceScatter, OpType::REDUCE_SCATTER, *device,
                    total_bytes(outputs) * getSize(), dtype_of(outputs), outputs, staging,
                    [&] { return WorkList{data_->reduce_scatter(host_out, host_in, gloo_opts)}; },
                    call_detail(0, opts.reduceOp), plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) {
    if (outputs.size() == 1) return cpu_->_reduce_scatter_base(outputs[0], inputs[0], opts);
    return cpu_->reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  }
  TORCH_CHECK(outputs.size() == inputs.size(), "reduce_scatter_tensor: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  check_reducible(inputs, "reduce_scatter");
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  apply_premul(opts.reduceOp, host_in, /*in_place=*/false);
  auto host_out = staging.outputs(outputs);
  auto gloo_opts = opts;
  gloo_opts.reduceOp = gloo_reduce_op(opts.reduceOp);
  const OpType type =
      outputs.size() == 1 ? OpType::_REDUCE_SCATTER_BASE : OpType::REDUCE_SCATTER_TENSOR_COALESCED;
  std::optional<InlinePlan> plan;
  if (host_out.size() == 1 && host_in[0].nbytes() == host_out[0].nbytes() * getSize()) {
    plan = inline_reduce_scatter(host_out[0], flat_chunks(host_in[0], getSize()),
                                 gloo_opts.reduceOp);
  }
  return collective(Collective::ReduceScatter, type, *device, total_bytes(inputs), dtype_of(inputs),
                    outputs,
                    staging, [&] {
                      WorkList works;
                      for (size_t i = 0; i < host_out.size(); ++i) {
                        works.push_back(
                            data_->_reduce_scatter_base(host_out[i], host_in[i], gloo_opts));
                      }
                      return works;
                    }, call_detail(0, opts.reduceOp), plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  auto device = neuron_device({input, output});
  if (!device) {
    return cpu_->alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
  }
  HostStaging staging;
  auto host_in = staging.input(input);
  auto host_out = staging.output(output);
  // Equal splits carry their data (Note [Collectives that carry their data]); uneven ones go
  // to Gloo.
  std::optional<InlinePlan> plan;
  if (output_split_sizes.empty() && input_split_sizes.empty() && input.dim() > 0 &&
      input.size(0) % getSize() == 0 && host_out.nbytes() == host_in.nbytes()) {
    plan = inline_all_to_all(flat_chunks(host_out, getSize()), flat_chunks(host_in, getSize()));
  }
  return collective(Collective::AllToAll, OpType::ALLTOALL_BASE, *device, total_bytes({input}),
                    input.scalar_type(),
                    {output}, staging, [&] {
                      return WorkList{data_->alltoall_base(host_out, host_in, output_split_sizes,
                                                           input_split_sizes, opts)};
                    }, 0, plan);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  auto device = neuron_device(inputs);
  if (!device) device = neuron_device(outputs);
  if (!device) return cpu_->alltoall(outputs, inputs, opts);
  HostStaging staging;
  auto host_in = staging.inputs(inputs);
  auto host_out = staging.outputs(outputs);
  return collective(Collective::AllToAll, OpType::ALLTOALL, *device, total_bytes(inputs), dtype_of(inputs),
                    outputs, staging,
                    [&] { return WorkList{data_->alltoall(host_out, host_in, opts)}; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::barrier(const c10d::BarrierOptions& opts) {
  // The clock agreement is itself a barrier: every rank contributes before any rank leaves.
  HostStaging staging;
  return collective(Collective::Barrier, OpType::BARRIER, c10::Device(kNeuron, device_), 0,
                    at::ScalarType::Undefined, {},
                    staging, nullptr);
}

void ProcessGroupNeuron::monitoredBarrier(const c10d::BarrierOptions& opts,
                                          bool wait_all_ranks) {
  cpu_->monitoredBarrier(opts, wait_all_ranks);
}

namespace {

c10::intrusive_ptr<c10d::Store> attempt_store(const c10::intrusive_ptr<c10d::Store>& store) {
  // torchrun keeps its store across restarts (--max-restarts): a restarted job would find the
  // dead attempt's Gloo addresses under the same keys, so keys carry the attempt (as
  // torch_neuron/distributed does for the groups it creates).
  const auto attempt = settings::read_int("TORCHELASTIC_RESTART_COUNT").value_or(0);
  return c10::make_intrusive<c10d::PrefixStore>(
      "neuron_attempt_" + std::to_string(attempt), store);
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> ProcessGroupNeuron::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  // Gloo's split takes its own Options type, which an extension cannot build (the wheel has no
  // Gloo headers); given other options it falls back to its defaults with a warning that
  // would only confuse here, so the warning is dropped and the timeout set afterwards.
  struct Silent : c10::WarningHandler {
    void process(const c10::Warning&) override {}
  } silent;
  // `ranks` are this group's ranks; Gloo's groups hold its running ranks only in a virtual
  // world (Note [Virtual world]), where they are numbered apart.
  const auto me = std::find(ranks.begin(), ranks.end(), getRank());
  if (me == ranks.end()) return nullptr;
  std::vector<int> global, running;
  for (int r : ranks) {
    global.push_back(global_ranks_.at(r));
    if (gloo_rank(r) >= 0) running.push_back(gloo_rank(r));
  }
  c10::intrusive_ptr<c10d::Backend> gloo;
  {
    c10::WarningUtils::WarningHandlerGuard guard(&silent);
    gloo = gloo_->split(attempt_store(store), running, opts);
  }
  if (!gloo) return nullptr;
  const auto timeout = opts ? opts->timeout : timeout_;
  gloo->setTimeout(timeout);
  // The CPU group splits too, under keys of its own (Note [CPU tensors in a group of their own]).
  c10::intrusive_ptr<c10d::Backend> cpu;
  if (cpu_gloo_ != gloo_) {
    c10::WarningUtils::WarningHandlerGuard guard(&silent);
    cpu = cpu_gloo_->split(c10::make_intrusive<c10d::PrefixStore>("cpu", attempt_store(store)),
                           running, opts);
    cpu->setTimeout(timeout);
  }
  auto group = c10::make_intrusive<ProcessGroupNeuron>(
      gloo, cpu, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()), timeout,
      opts ? opts->group_name : group_name_, device_, node_, std::move(global));
  group->setGroupUid(opts ? opts->group_name : group_name_);
  return group;
}

void ProcessGroupNeuron::setSequenceNumberForGroup() { gloo_->setSequenceNumberForGroup(); }

uint64_t ProcessGroupNeuron::getSequenceNumberForGroup() {
  return gloo_->getSequenceNumberForGroup();
}

// Note [Point-to-point sizes]
// Gloo moves point-to-point bytes without checking that a send and its receive agree on the
// size: a smaller send into a larger receive completes with part of the buffer stale, a larger
// one aborts the process. Each side therefore tells the other its size, without adding a
// round trip to a small message. The messages go over the group's local links between ranks
// on one machine (Note [Local links]), over Gloo otherwise; both keep messages in order per
// peer and tag, and the group's messages use tags of their own:
//   - a receive, at issue, posts an inbox of kHeaderBytes + kInlineBytes on the user's tag,
//     and when it holds more than kInlineBytes a bulk receive straight into its buffer (bulk
//     tag); it sends its size to the sender (size tag);
//   - a send, at issue, takes the receive of that size (posted by the previous send to the
//     same peer and tag: Note [Receives posted in advance]) and sends its header [arrival
//     time, bytes] in the inbox message, followed there by its data when it holds at most
//     kInlineBytes (one message: no thread, no waiting for the receiver);
//   - a larger send's data must not overflow the bulk receive, so it waits for the
//     receiver's size and sends the data when the sizes agree: in its wait(), or, if wait()
//     has not claimed it within kLaneGrace, on the send's lane (SendLanes.h: one thread per
//     peer and tag), so that its completion never depends on the caller's wait() (isend/irecv
//     pairs may be waited for in any order, as with Gloo) while the usual early wait() costs
//     no thread hop;
//   - when they differ, a receiver that posted a bulk receive gets one byte in it instead
//     (sent by the lane, in issue order with the bulk messages of later sends), and both
//     sides raise a DistBackendError naming both ranks and sizes; the group stays usable.
// A small send's wait() returns once its message is out and the receiver's size is in: the
// size was sent when the receive was issued, so it travels while the data does. A receive
// from any rank learns the sender only from the header, so it sends its size (and posts its
// bulk receive) when it is waited for: that sender's send completes once the receive is
// waited for. kInlineBytes is an assumption of this design, not a hardware figure: data up
// to it is copied into the message, a cost that stays below one message latency here.
// Over the local links (Note [Local links]) no receive can overflow: a receive takes the
// header and the data into its own buffer in one message of any size (send_over_links), and
// a larger message fills it and drops the rest. So there a send carries its data whatever
// its size, without waiting for the receiver's size, which travels back as above: one
// message each way, no bulk message, no lane.
namespace {

constexpr int64_t kHeaderBytes = 3 * sizeof(double);  // arrival, bytes, values inline
constexpr auto kLaneGrace = std::chrono::milliseconds(2);

std::vector<at::Tensor> one_double(double value) {
  std::vector<at::Tensor> t{at::empty({1}, at::kDouble)};
  t[0].data_ptr<double>()[0] = value;
  return t;
}

// The bytes of a contiguous host tensor, as a flat uint8 tensor sharing its memory.
at::Tensor as_bytes(const at::Tensor& host) {
  return host.reshape({-1}).view(at::kByte);
}

[[noreturn]] void size_mismatch(int sender, uint64_t sent, int receiver, uint64_t received) {
  C10_THROW_ERROR(DistBackendError,
                  c10::str("send/recv size mismatch: rank ", sender, " sent ", sent,
                           " bytes to rank ", receiver, ", whose receive buffer holds ",
                           received, " bytes; a receive must have the size of its send (numel ",
                           "x element size)"));
}

void check_tag(int tag, const char* op) {
  TORCH_CHECK(tag >= 0 && tag < kBulkTagBit, op, ": tag ", tag, " is out of range: neuron ",
              "point-to-point tags are 0 to ", kBulkTagBit - 1);
}

}  // namespace

double ProcessGroupNeuron::charge_transfer(c10::Device device, const char* name, uint64_t bytes,
                                           int peer, double start_ns, bool sending) {
  const std::vector<trnsim::RankPlace> pair{places_[getRank()], places_[peer]};
  // Sends have a stream of their own: a rank's DMA queues send and receive at the same time.
  trnsim::Queue& queue =
      queue_of(collective_stream(device.index(), stream_slot_ + (sending ? 1 : 0)));
  queue.wait_until(start_ns);
  return charge(queue, name, nullptr, {trnsim::CollectiveOp{Collective::SendRecv, bytes, pair}},
                [&] {
                  const auto cost = trnsim::collective_cost(system().instance(),
                                                            Collective::SendRecv, bytes, pair);
                  return json_detail(cost, Collective::SendRecv, bytes, 2, group_name_);
                });
}

void ProcessGroupNeuron::settle_sends(int peer, int tag, const std::shared_ptr<PendingSend>& last) {
  // One thread at a time sends the bulk messages of (peer, tag): its lane, or the caller's
  // wait() when it gets there first (no thread hop: the lane's task then finds it done).
  SendQueue& queue = send_queues_.of(peer, tag);
  std::lock_guard<std::mutex> settling(queue.settling);
  while (!last->settled) {
    auto send = queue.front();
    if (!send) return;
    if (!send->settled) {
      const uint64_t wanted = send->wanted->get();
      // A receiver posted a bulk receive if it holds more than kInlineBytes and moves data.
      if (send->moves_data && wanted > static_cast<uint64_t>(kInlineBytes)) {
        std::vector<at::Tensor> bulk{wanted == send->bytes ? send->bulk
                                                           : at::zeros({1}, at::kByte)};
        messages_->send(bulk, gloo_rank(peer), tag | kBulkTagBit)->wait();
      }
      send->settled = true;
    }
    queue.pop(send);
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  const auto device = neuron_device(tensors);
  if (!device) return cpu_->send(tensors, dst_rank, tag);
  TORCH_CHECK(tensors.size() == 1, "neuron process group: send takes one tensor");
  TORCH_CHECK(dst_rank >= 0 && dst_rank < getSize(), "send: destination rank ", dst_rank,
              " is not in the group of ", getSize(), " ranks");
  check_tag(tag, "send");
  const uint64_t bytes = tensors[0].numel() * tensors[0].element_size();
  const double arrival = std::max(
      current_queue(device->index()).now_ns(),
      queue_of(collective_stream(device->index(), stream_slot_ + 1)).now_ns());
  const auto send_stream = collective_stream(device->index(), stream_slot_ + 1);
  const int peer = gloo_rank(dst_rank);
  if (peer < 0) {  // a virtual rank (Note [Virtual world]): timed, nothing to send
    const double end = charge_transfer(*device, "c10d::send", bytes, dst_rank, arrival, true);
    return c10::make_intrusive<NeuronWork>(getRank(), OpType::SEND, tensors, send_stream, end);
  }
  if (links_) return send_over_links(tensors, *device, dst_rank, tag, arrival);
  // Note [Point-to-point sizes]. In predict-only mode only the header travels, unless the
  // tensor's values are known and fit inline (Note [Known values in predict-only mode]).
  auto pending = std::make_shared<PendingSend>();
  pending->bytes = bytes;
  pending->moves_data = execution_enabled();
  const bool with_values = !pending->moves_data && bytes <= static_cast<uint64_t>(kInlineBytes) &&
                           values_known(tensors[0]);
  pending->wanted = posted_sizes_.next(*messages_, peer, tag | kSizeTagBit);
  auto staging = std::make_shared<HostStaging>();
  const at::Tensor data = as_bytes(staging->input(tensors[0]));
  const bool inline_data = !pending->moves_data || bytes <= static_cast<uint64_t>(kInlineBytes);
  const uint64_t inline_bytes = pending->moves_data || with_values ? bytes : 0;
  std::vector<at::Tensor> message{
      at::empty({kHeaderBytes + (inline_data ? static_cast<int64_t>(inline_bytes) : 0)},
                at::kByte)};
  auto* header = reinterpret_cast<double*>(message[0].data_ptr());
  header[0] = arrival;
  header[1] = static_cast<double>(bytes);
  header[2] = with_values ? 1.0 : 0.0;
  if (inline_data && inline_bytes > 0) {
    std::memcpy(message[0].data_ptr<uint8_t>() + kHeaderBytes, data.data_ptr(), inline_bytes);
  } else if (!inline_data) {
    pending->bulk = data;
    pending->keep_alive = staging;
  }
  send_queues_.of(dst_rank, tag).push(pending);
  auto message_work = messages_->send(message, peer, tag);
  // The sender's side ends once its bytes are on the link (the receiver buffers them).
  std::optional<ComputeKnownValues> computing;
  if (with_values) computing.emplace();
  const double end = charge_transfer(*device, "c10d::send", bytes, dst_rank, arrival, true);
  computing.reset();
  c10::intrusive_ptr<c10d::Work> lane_work;
  if (!inline_data) {
    // Its data goes out even if nobody waits for this send: the lane sends it unless wait()
    // claims the send first. wait() usually comes soon and then sends it itself, with no
    // thread hop; kLaneGrace (an assumption, not a measured figure) is how long the lane
    // leaves it that chance.
    lane_work = lanes_->run(dst_rank, tag, [this, dst_rank, tag, pending] {
      {
        std::unique_lock<std::mutex> lock(pending->claim_mutex);
        if (pending->claim_cv.wait_for(lock, kLaneGrace, [&] { return pending->claimed; })) {
          return;
        }
        pending->claimed = true;
      }
      settle_sends(dst_rank, tag, pending);
    });
  }
  // NeuronWork waits for `message_work` before `finish`.
  auto finish = [this, pending, lane_work, message, inline_data, bytes, dst_rank, tag, end] {
    bool mine = true;
    if (!inline_data) {
      {
        std::lock_guard<std::mutex> lock(pending->claim_mutex);
        mine = !pending->claimed;
        pending->claimed = true;
      }
      pending->claim_cv.notify_one();
      if (!mine) lane_work->wait();
    }
    const uint64_t wanted = pending->wanted->get();
    if (mine && (wanted != bytes || !inline_data)) settle_sends(dst_rank, tag, pending);
    pending->settled = true;
    if (wanted != bytes) size_mismatch(getRank(), bytes, dst_rank, wanted);
    return end;
  };
  return c10::make_intrusive<NeuronWork>(
      getRank(), OpType::SEND, tensors, send_stream, std::move(message_work), finish,
      error_context(c10::str("send to rank ", dst_rank)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::point_to_point(
    OpType type, std::vector<at::Tensor>& tensors, int peer, int tag) {
  const auto device = neuron_device(tensors);
  TORCH_CHECK(tensors.size() == 1, "neuron process group: recv takes one tensor");
  check_tag(tag, "recv");
  const uint64_t bytes = tensors[0].numel() * tensors[0].element_size();
  const double arrival = arrival_ns(*device);
  const auto stream = collective_stream(device->index(), stream_slot_);
  if (type == OpType::RECV && gloo_rank(peer) < 0) {
    // From a virtual rank (Note [Virtual world]): it sends when this rank arrives.
    const double end = charge_transfer(*device, "c10d::recv", bytes, peer, arrival, false);
    return c10::make_intrusive<NeuronWork>(getRank(), type, tensors, stream, end);
  }
  TORCH_CHECK(type == OpType::RECV || std::find(gloo_ranks_.begin(), gloo_ranks_.end(), -1) ==
                                          gloo_ranks_.end(),
              "recv from any source is not supported in a virtual world (the sender could be a "
              "virtual rank); name the source rank");
  if (links_) return receive_over_links(type, tensors, *device, peer, tag, arrival);
  // In predict-only mode only the header travels (Note [Point-to-point sizes]).
  const bool moves_data = execution_enabled();
  const bool bulk = moves_data && bytes > static_cast<uint64_t>(kInlineBytes);
  auto staging = std::make_shared<HostStaging>();
  const at::Tensor data = as_bytes(staging->output(tensors[0]));
  std::vector<at::Tensor> inbox{at::empty({kHeaderBytes + kInlineBytes}, at::kByte)};
  std::vector<at::Tensor> mine = one_double(static_cast<double>(bytes));
  // From a known rank all is posted now (Note [Point-to-point sizes]); from any rank, this
  // rank's size and the bulk receive wait for the header, which names the sender.
  c10::intrusive_ptr<c10d::Work> inbox_work, bulk_work, size_work;
  if (type == OpType::RECV) {
    inbox_work = messages_->recv(inbox, gloo_rank(peer), tag);
    if (bulk) {
      std::vector<at::Tensor> into{data};
      bulk_work = messages_->recv(into, gloo_rank(peer), tag | kBulkTagBit);
    }
    size_work = messages_->send(mine, gloo_rank(peer), tag | kSizeTagBit);
  } else {
    inbox_work = messages_->recvAnysource(inbox, tag);
  }
  // NeuronWork waits for `inbox_work` before `finish`; a Gloo receive must not be waited for
  // twice (the second wait blocks for another message).
  auto finish = [this, device, inbox, data, mine, staging, inbox_work, bulk_work, size_work,
                 known = type == OpType::RECV, bulk, moves_data, bytes, arrival, peer, tag,
                 received = tensors[0]]() mutable {
    const int src = known ? peer : inbox_work->sourceRank();
    if (known) {
      size_work->wait();
    } else {
      messages_->send(mine, src, tag | kSizeTagBit)->wait();
      if (bulk) {
        std::vector<at::Tensor> into{data};
        bulk_work = messages_->recv(into, src, tag | kBulkTagBit);
      }
    }
    const auto* header = reinterpret_cast<const double*>(inbox[0].data_ptr());
    const double sent_at = header[0];
    const auto sent = static_cast<uint64_t>(header[1]);
    const bool with_values = header[2] != 0.0 && !data.is_meta();
    if (bulk_work) bulk_work->wait();  // the data, or one byte when the sizes differ
    if (sent != bytes) size_mismatch(src, sent, getRank(), bytes);
    if ((moves_data || with_values) && !bulk && bytes > 0) {
      std::memcpy(data.data_ptr(), inbox[0].data_ptr<uint8_t>() + kHeaderBytes, bytes);
    }
    staging->finish();
    std::optional<ComputeKnownValues> computing;
    if (with_values) computing.emplace();
    const double end = charge_transfer(*device, "c10d::recv", bytes, src,
                                       std::max(sent_at, arrival), false);
    if (with_values) mark_values_known(received);
    return end;
  };
  const std::string peer_name = peer >= 0 ? c10::str("rank ", peer) : "any rank";
  return c10::make_intrusive<NeuronWork>(getRank(), type, tensors, stream, inbox_work, finish,
                                         error_context("receive from " + peer_name));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::send_over_links(
    std::vector<at::Tensor>& tensors, c10::Device device, int dst_rank, int tag, double arrival) {
  const uint64_t bytes = tensors[0].numel() * tensors[0].element_size();
  const bool with_values = !execution_enabled() &&
                           bytes <= static_cast<uint64_t>(kInlineBytes) && values_known(tensors[0]);
  auto wanted = posted_sizes_.next(*messages_, gloo_rank(dst_rank), tag | kSizeTagBit);
  HostStaging staging;
  std::vector<at::Tensor> parts{at::empty({kHeaderBytes}, at::kByte)};
  auto* header = reinterpret_cast<double*>(parts[0].data_ptr());
  header[0] = arrival;
  header[1] = static_cast<double>(bytes);
  header[2] = with_values ? 1.0 : 0.0;
  // The data goes in the same message, from its host alias, whatever its size: the receiver's
  // buffer takes it whole or the receive drops what does not fit (sizes checked below).
  if (execution_enabled() || with_values) parts.push_back(as_bytes(staging.input(tensors[0])));
  // A large message is written by the links' writer thread, so that this rank can post its
  // receives while the peer reads it (both ranks of an exchange send first).
  auto sent = links_->send_parts(parts, gloo_rank(dst_rank), tag, /*may_defer=*/true,
                                 /*owners=*/{tensors[0]});
  std::optional<ComputeKnownValues> computing;
  if (with_values) computing.emplace();
  const double end = charge_transfer(device, "c10d::send", bytes, dst_rank, arrival, true);
  computing.reset();
  auto finish = [this, wanted, bytes, dst_rank, end] {
    const uint64_t size = wanted->get();
    if (size != bytes) size_mismatch(getRank(), bytes, dst_rank, size);
    return end;
  };
  return c10::make_intrusive<NeuronWork>(
      getRank(), OpType::SEND, tensors, collective_stream(device.index(), stream_slot_ + 1),
      std::move(sent), finish, error_context(c10::str("send to rank ", dst_rank)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::receive_over_links(
    OpType type, std::vector<at::Tensor>& tensors, c10::Device device, int peer, int tag,
    double arrival) {
  const uint64_t bytes = tensors[0].numel() * tensors[0].element_size();
  auto staging = std::make_shared<HostStaging>();
  const at::Tensor data = as_bytes(staging->output(tensors[0]));
  at::Tensor header = at::empty({kHeaderBytes}, at::kByte);
  // A predict-only receive whose tensor takes no values still takes (and drops) the values a
  // sender may send, at most kInlineBytes (Note [Known values in predict-only mode]).
  const at::Tensor into =
      data.is_meta() ? at::empty({std::min<int64_t>(bytes, kInlineBytes)}, at::kByte) : data;
  std::vector<at::Tensor> mine = one_double(static_cast<double>(bytes));
  const bool known = type == OpType::RECV;
  auto received = links_->receive({header, into}, known ? gloo_rank(peer) : -1, tag,
                                  /*truncate=*/true);
  // From a known rank this rank's size leaves now; from any rank once the sender is known.
  c10::intrusive_ptr<c10d::Work> size_work;
  if (known) size_work = messages_->send(mine, gloo_rank(peer), tag | kSizeTagBit);
  auto finish = [this, device, header, data, mine, staging, received, size_work, known, bytes,
                 arrival, peer, tag, target = tensors[0]]() mutable {
    const int src = known ? peer : received->sourceRank();
    if (known) {
      size_work->wait();
    } else {
      messages_->send(mine, src, tag | kSizeTagBit)->wait();
    }
    const auto* h = reinterpret_cast<const double*>(header.data_ptr());
    const auto sent = static_cast<uint64_t>(h[1]);
    if (sent != bytes) size_mismatch(src, sent, getRank(), bytes);
    const bool with_values = h[2] != 0.0 && !data.is_meta();
    staging->finish();
    std::optional<ComputeKnownValues> computing;
    if (with_values) computing.emplace();
    const double end =
        charge_transfer(device, "c10d::recv", bytes, src, std::max(h[0], arrival), false);
    if (with_values) mark_values_known(target);
    return end;
  };
  const std::string peer_name = known ? c10::str("rank ", peer) : "any rank";
  return c10::make_intrusive<NeuronWork>(getRank(), type, tensors,
                                         collective_stream(device.index(), stream_slot_),
                                         std::move(received), finish,
                                         error_context("receive from " + peer_name));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  if (!neuron_device(tensors)) return cpu_->recv(tensors, src_rank, tag);
  TORCH_CHECK(src_rank >= 0 && src_rank < getSize(), "recv: source rank ", src_rank,
              " is not in the group of ", getSize(), " ranks");
  return point_to_point(OpType::RECV, tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  if (!neuron_device(tensors)) return cpu_->recvAnysource(tensors, tag);
  return point_to_point(OpType::RECVANYSOURCE, tensors, -1, tag);
}

trnsim::CollectiveAlgorithms collective_algorithms() {
  return trnsim::collective_algorithms_named(
      settings::read_text("TORCH_NEURON_COLLECTIVE_ALGORITHMS"));
}

}  // namespace torch_neuron
