// The c10d backend "neuron": torch.distributed on neuron tensors.
//
// Note [Neuron process group]: Gloo moves the bytes (the group's own messages go over local
// links between ranks on one machine: Note [Local links]) and trnsim says how long the move
// would take on Trainium. Each rank is one process driving one NeuronCore (neuron:LOCAL_RANK). A
// collective on neuron tensors hands Gloo host views of them (HostStaging), runs to completion
// when issued (Note [Collective completion]), and is charged on the group's collective stream:
//   start = max over ranks of each rank's arrival (its current stream's clock, or the
//           collective stream's, or when its core's DMA queues are free of other streams'
//           work, whichever is latest: Note [Collective DMA share]), agreed by every rank sending a small
//           record to every other before the data is used, which also checks that all ranks
//           call the same collective with the same size, dtype, root and reduce op (Gloo would
//           abort the process); a small collective's data rides in the same message (Note
//           [Collectives that carry their data]);
//   end   = start + trnsim::collective_cost(op, bytes, where the group's cores sit).
// Every rank computes the same start and cost, so clocks agree across ranks and a late rank
// delays everyone, as on hardware. CPU tensors go to Gloo unchanged and cost no device time
// (to a Gloo group of their own: Note [CPU tensors in a group of their own]). In predict-only
// mode (Note [Predict-only execution]) collectives agree and are charged the same, but no data
// moves: neuron tensors hold no values. In a virtual world (Note [Virtual world]) the Gloo
// groups hold only the ranks that run as processes.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <trnsim/collective.h>

#include "distributed/InlineCollective.h"
#include "distributed/PointToPoint.h"
#include "distributed/PostedInboxes.h"
#include "distributed/SendLanes.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_neuron {

class HostStaging;
class LocalLinks;

class ProcessGroupNeuron final : public c10d::Backend {
 public:
  // `gloo` is a ProcessGroupGloo over the same ranks that moves neuron tensors' bytes;
  // `cpu_gloo` another one for calls on CPU tensors only, or null to use `gloo` for those too
  // (Note [CPU tensors in a group of their own]); `node` is the simulated instance this
  // process sits on (torchrun's GROUP_RANK); `global_ranks` the world ranks of the group's
  // ranks (empty: the world). Exchanges every rank's NeuronCore with the group and raises if a
  // rank has no core or two ranks claim the same one. In a virtual world the Gloo groups hold
  // the group's running ranks only and the places are where torchrun would put each rank.
  ProcessGroupNeuron(c10::intrusive_ptr<c10d::Backend> gloo,
                     c10::intrusive_ptr<c10d::Backend> cpu_gloo, int rank, int size,
                     std::chrono::milliseconds timeout, std::string group_name,
                     c10::DeviceIndex device, int node, std::vector<int> global_ranks = {});

  const std::string getBackendName() const override { return "neuron"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // Where each rank of the group sits, and this rank's device.
  const std::vector<trnsim::RankPlace>& places() const { return places_; }
  c10::DeviceIndex device() const { return device_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  // dist.split_group (and DeviceMesh on a group bound to a device): the subgroup of `ranks`,
  // over Gloo's split of this group; nullptr on ranks outside it.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

 private:
  // The Gloo works of one collective on host tensors.
  using GlooOps = std::function<std::vector<c10::intrusive_ptr<c10d::Work>>()>;

  // Agrees with the other ranks on the start time and on what is being called (kind, bytes,
  // dtype, `detail`: root and reduce op), runs `ops` (or `plan`, whose data rides in the
  // agreement: Note [Collectives that carry their data]), finishes `staging`, charges `bytes`
  // of `kind` on the collective stream of `device` and returns the finished Work with
  // `outputs`.
  c10::intrusive_ptr<c10d::Work> collective(trnsim::Collective kind, c10d::OpType type,
                                            c10::Device device, uint64_t bytes,
                                            at::ScalarType dtype,
                                            std::vector<at::Tensor> outputs,
                                            HostStaging& staging, const GlooOps& ops,
                                            double detail = 0,
                                            const std::optional<InlinePlan>& plan = {});
  // Waits for Gloo works, turning their errors into one that names this group and op.
  void wait_all(const std::vector<c10::intrusive_ptr<c10d::Work>>& works, const char* op);
  // Raises the DistBackendError of a failed `op` (naming ranks whose processes exited).
  [[noreturn]] void raise_failed(const char* op, const std::exception& e) const;
  // A point-to-point op's Work: `finish` copies data into place and returns the end time.
  c10::intrusive_ptr<c10d::Work> point_to_point(c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                int peer, int tag);
  // Point-to-point over the local links (Note [Point-to-point sizes]): one message each way.
  c10::intrusive_ptr<c10d::Work> send_over_links(std::vector<at::Tensor>& tensors,
                                                 c10::Device device, int dst_rank, int tag,
                                                 double arrival);
  c10::intrusive_ptr<c10d::Work> receive_over_links(c10d::OpType type,
                                                    std::vector<at::Tensor>& tensors,
                                                    c10::Device device, int peer, int tag,
                                                    double arrival);
  // Sends what the unsettled sends to (peer, tag) owe their receivers' bulk receives, oldest
  // first, until `last` is settled (Note [Point-to-point sizes]): on that lane, or in a
  // send's wait() that gets there first, one thread at a time.
  void settle_sends(int peer, int tag, const std::shared_ptr<PendingSend>& last);
  // Charges a transfer between this rank and `peer` that can start at `start_ns`, on the
  // group's send stream or its collective stream (receives).
  double charge_transfer(c10::Device device, const char* name, uint64_t bytes, int peer,
                         double start_ns, bool sending);
  // This rank's arrival on `device`: the later of its current and collective streams.
  double arrival_ns(c10::Device device);
  // The rank of group rank `r` in gloo_, or -1 for a virtual rank (Note [Virtual world]).
  int gloo_rank(int r) const { return gloo_ranks_[r]; }
  // Where each rank sits and which Gloo rank it is, in a virtual world.
  void join_virtual_world();
  std::string error_context(const std::string& op) const;
  // "1, 3": the group's ranks on this machine whose processes have exited.
  std::string exited_ranks() const;

  c10::intrusive_ptr<c10d::Backend> gloo_;
  // What carries the group's own messages (agreement records, point-to-point headers, sizes
  // and data): LocalLinks between ranks on one machine (Note [Local links]), else gloo_.
  c10::intrusive_ptr<c10d::Backend> messages_;
  LocalLinks* links_ = nullptr;  // messages_ when it is the local links
  // Note [CPU tensors in a group of their own]
  // Calls on CPU tensors only go to a Gloo group of their own, not to gloo_: a thread may then
  // run CPU collectives while another runs neuron ones, as torch.distributed.checkpoint's
  // async_save does (its background thread exchanges the save plan on the CPU while training
  // goes on). Two threads issuing collectives on one Gloo group interleave them differently on
  // different ranks and Gloo aborts on the mismatch. This is what "cpu:gloo,cuda:nccl" gives
  // CUDA users; for a group whose CPU tensors another backend takes ("cpu:gloo,neuron:neuron")
  // torch_neuron.distributed passes no CPU group and cpu_ is gloo_.
  c10::intrusive_ptr<c10d::Backend> cpu_;
  // The Gloo group under cpu_ (cpu_ itself, or SpmdCpuBackend's in a virtual world).
  c10::intrusive_ptr<c10d::Backend> cpu_gloo_;
  // What moves neuron tensors' bytes in collectives: gloo_, or the SPMD rule for a group with
  // virtual ranks (Note [Virtual world]).
  c10::intrusive_ptr<c10d::Backend> data_;
  std::chrono::milliseconds timeout_;
  std::string group_name_;
  c10::DeviceIndex device_;
  int node_;
  int stream_slot_;  // this group's collective stream slot; slot + 1 is its send stream
  std::vector<trnsim::RankPlace> places_;
  std::vector<int64_t> pids_;  // per rank; -1 for ranks on other machines or virtual
  std::vector<int> global_ranks_;  // per group rank, its world rank
  std::vector<int> gloo_ranks_;    // per group rank, its rank in gloo_; -1: virtual
  SendQueues send_queues_;
  PostedSizes posted_sizes_;  // destroyed before the Gloo group its receives are on
  // The receives of each peer's next agreement message (Note [Receives posted in advance]),
  // made at the first collective; destroyed before the Gloo groups its receives are on.
  std::unique_ptr<PostedInboxes> agreement_inboxes_;
  // Last, so that it is destroyed first: its threads use gloo_ and send_queues_.
  std::unique_ptr<SendLanes> lanes_ = std::make_unique<SendLanes>();
};

// The runtime whose collective algorithms the cost model picks from
// (TORCH_NEURON_COLLECTIVE_ALGORITHMS; Note [Collective algorithms by release] in trnsim).
trnsim::CollectiveAlgorithms collective_algorithms();

}  // namespace torch_neuron
