// The engine-level scheduler: work as instruction streams on a NeuronCore's engines.
//
// Note [Engine scheduler]
// A NeuronCore runs one in-order instruction stream per engine (TensorE, VectorE, ScalarE,
// GpSimdE) and per DMA queue; the streams synchronise only through the buffers they share
// (NKI architecture guide: the engines are asynchronous and the compiler inserts semaphore
// waits for data dependencies). A Schedule is such a program:
//   - an instruction names its unit (an engine, or a DMA queue), what it costs, the buffer
//     regions it reads and writes, and a source tag (an ATen op, a compiled kernel's loop, an
//     NKI kernel's line);
//   - dependencies come from the regions, in the order instructions are added (program order):
//     a reader waits for the last writer of every region overlapping what it reads (RAW); a
//     writer waits for the earlier readers (WAR) and writers (WAW) of what it overwrites.
//     Regions overlap byte-wise, so partial overlaps count. Instructions of one `group` do not
//     depend on each other (the tile of an op whose engines the op itself pipelines, as
//     time_of() assumes); group 0 means "a group of its own";
//   - each unit runs its stream in program order; an instruction starts when its dependencies
//     are done, its unit is free and no running instruction holds a port it needs (`ports`:
//     on-chip RAM interfaces two engines share, Note [Shared SBUF and PSUM ports] in
//     kernel_schedule.h; when two wait for one port, the earlier in program order takes it);
//   - compute instructions take a fixed time (from trnsim's per-instruction cost functions:
//     tensor_engine.h, streaming_engine.h); a DMA transfer moves `bytes` through HBM, and the
//     transfers in flight share the core's HBM stream bandwidth equally
//     (InstanceSpec::core_stream_gbps: what the core's 16 DMA engines can stream, bounded by its
//     HBM share; NKI DMA bandwidth guide, nki/deep-dives/nki-dma-bandwidth-guide.rst). One
//     transfer alone gets all of it (assumption: a queue's descriptors are spread over all the
//     core's DMA engines, as the guide's bandwidth figures are for one transfer), unless it has
//     a cap (max_rate: the DMA engines it can use, kernel_schedule.h); then it gets no more
//     than its cap and the others share what it leaves (water-filling). A transfer with a
//     fixed duration instead (host link, NeuronLink, a collective) shares nothing.
// run() simulates the program event by event and returns each instruction's start and end, the
// makespan, and per-unit busy time. The launch overhead is not part of a schedule: the caller
// pays it once per launched program (cost.h, kLaunchOverheadNs).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "trnsim/cost.h"
#include "trnsim/instance.h"
#include "trnsim/streaming_engine.h"
#include "trnsim/work.h"

namespace trnsim {

// Bytes [begin, end) of one address space (0: HBM addresses; others are the caller's, e.g. an
// SBUF tile allocator's).
struct Region {
  uint32_t space = 0;
  uint64_t begin = 0, end = 0;
};

// Every byte of every space: an instruction with unknown operands orders against everything.
constexpr Region kEverything{0, 0, UINT64_MAX};

struct Instruction {
  Engine engine = Engine::Vector;  // Engine::Dma: a transfer on DMA queue `queue`
  int queue = 0;
  double duration_ns = 0;  // compute instructions and fixed-duration transfers
  uint64_t bytes = 0;      // a DMA transfer through HBM (its duration follows from the share)
  double max_rate = 0;     // a transfer's most bytes per ns, whatever the share; 0: no cap
  std::vector<Region> reads, writes;
  uint32_t source = 0;  // Schedule::source() id
  uint64_t group = 0;   // see Note [Engine scheduler]; 0: its own
  uint8_t ports = 0;    // shared ports it holds while it runs (a bit each); 0: none
};

struct InstructionTime {
  double start_ns = 0, end_ns = 0;
};

struct ScheduleResult {
  double makespan_ns = 0;
  // Busy time per engine; for Engine::Dma the time at least one DMA queue is busy.
  std::array<double, kEngineCount> busy_ns{};
  std::vector<double> dma_queue_busy_ns;
  std::vector<InstructionTime> times;  // per instruction, in the order they were added
  std::array<uint64_t, kEngineCount> instructions{};  // count per engine

  // busy / makespan, 0 to 1 (0 for an empty schedule).
  double utilization(Engine engine) const;
};

class Schedule {
 public:
  Schedule(const InstanceSpec& instance, int dma_queues);

  const InstanceSpec& instance() const { return *instance_; }
  int dma_queues() const { return dma_queues_; }

  // The id of a source tag (interned; id 0 is the empty tag).
  uint32_t source(const std::string& tag);
  const std::string& source_name(uint32_t id) const { return sources_[id]; }

  // Appends an instruction in program order; returns its index. Throws trnsim::Error for a
  // DMA queue out of range or a negative duration.
  size_t add(Instruction instruction);
  // A fresh group id for instructions that pipeline among themselves.
  uint64_t new_group() { return ++groups_; }
  // The DMA queues in turn (where a program spreads its transfers).
  int next_dma_queue() { return next_queue_++ % dma_queues_; }

  size_t size() const { return instructions_.size(); }
  const Instruction& instruction(size_t i) const { return instructions_[i]; }
  // The instructions `i` waits for (by region), ascending.
  const std::vector<uint32_t>& dependencies(size_t i) const { return deps_[i]; }
  // The indices of the instructions one unit runs, in order (its track).
  std::vector<size_t> track(Engine engine, int queue = 0) const;

  ScheduleResult run() const;

 private:
  // Who last wrote a stretch of bytes and who read it since (Note [Engine scheduler]).
  // Writers: the last write's instructions (several when they are one group's).
  struct Segment {
    uint64_t end;
    uint64_t writer_group = 0;  // 0: never written
    std::vector<uint32_t> writers, readers;
  };
  using Segments = std::map<uint64_t, Segment>;  // by begin
  void split(Segments& segments, uint64_t at);
  void record_read(const Region& r, uint32_t index, uint64_t group, std::vector<uint32_t>& deps);
  void record_write(const Region& r, uint32_t index, uint64_t group, std::vector<uint32_t>& deps);
  int unit_of(const Instruction& instruction) const;

  const InstanceSpec* instance_;
  int dma_queues_;
  uint64_t groups_ = 0;
  uint64_t next_queue_ = 0;
  std::vector<Instruction> instructions_;
  std::vector<uint64_t> group_of_;  // resolved group of each instruction
  std::vector<std::vector<uint32_t>> deps_;
  std::unordered_map<uint32_t, Segments> spaces_;
  std::vector<std::string> sources_{""};
  std::unordered_map<std::string, uint32_t> source_ids_;
};

// Note [Work as instructions]
// An op's work (work.h) as schedule instructions, split into `tiles` tiles along its leading
// (partition/row) dimension: tile i of every engine the op uses runs 1/tiles of the op's busy
// time on that engine (time_of()'s per-engine cost, so an op has one cost whether it is timed
// alone or scheduled), and one DMA transfer moves 1/tiles of its HBM traffic. The instructions
// of one tile form a group: within a tile the op's engines and DMA pipeline as time_of()
// assumes (the kernel double-buffers), so an op alone schedules in exactly max(engines, HBM),
// and time_of()'s duration is kLaunchOverheadNs + that. Tile i reads slice i of its
// `tiled_reads` and all of its `whole_reads` (a matmul's operands, a broadcast operand), and
// writes slice i of its `writes`, so a consumer's tile waits only for the producer tiles it
// reads. Transfers take the DMA queues in turn. Work that is not compute (a copy, a host round
// trip, a collective) is one fixed-duration transfer reading and writing its whole regions.
struct OpRegions {
  std::vector<Region> tiled_reads, whole_reads, writes;
  std::vector<Region> whole_writes;  // written whole by every tile (a reduction's result)
  // Written whole by the last tile's engines, once every tile has written its slice of it: a
  // result each tile adds to all of (a matmul cut along its weight), which its readers may use
  // only when every tile is done, while the tiles do not wait for each other.
  std::vector<Region> completed_writes;
  // Empty, or one region per tile that tile i also writes (its SBUF buffer: buffers reused
  // across ops make a tile wait until the earlier tile of that buffer is done).
  std::vector<Region> tile_scratch;
  // Regions the op's engines read and write where they stay in SBUF (Note [Intermediates in
  // SBUF]), tiled or whole as above: its DMA transfers move none of their bytes, so they do
  // not wait for them (a weight load starts before the activation it multiplies is made).
  std::vector<Region> sbuf_tiled_reads, sbuf_whole_reads, sbuf_writes, sbuf_whole_writes;
};
// Appends `work` as above; returns the number of instructions added.
size_t add_work(Schedule& schedule, const Work& work, const OpRegions& regions, int tiles,
                uint32_t source);
// The same for work already timed (time_of(instance, work)): compute work unless it occupies
// the DMA engines for a fixed time or nothing at all (copies, host round trips, collectives).
size_t add_work(Schedule& schedule, const WorkTime& time, const OpRegions& regions, int tiles,
                uint32_t source);

// Note [Ops as tiles]
// A program of ops launched together (a compiled graph) on one core, scheduled on its engines:
//   - an op is cut into tiles of kProgramTileBytes of its largest output, at most
//     kMaxOpTiles (assumption: a tile of 128 partitions x kStreamTileElements fp32, the size
//     streaming_engine.h assumes an eager op streams in); TensorE work (matmul, attention,
//     convolution) whose largest input is larger than its result is cut along that input
//     instead: a decode step's matmul streams its weight, its attention the KV cache, through
//     SBUF tile by tile;
//   - inputs at least as large as the size cut are read tile by tile (elementwise operands,
//     a row reduction's input, a streamed operand); smaller inputs (broadcast operands) and,
//     when TensorE work is cut along its result, all its inputs (a tile of output rows reads
//     all of the right operand) are read whole; the largest outputs are written tile by tile,
//     smaller ones (a reduction's result) whole by every tile; a streamed operand's tiles each
//     add to all of the result, so they write it slice by slice (they do not wait for each
//     other) and the last tile's engines write it whole once the others are done (its readers
//     wait for every tile: OpRegions::completed_writes);
//   - each tile holds an SBUF buffer from a ring of SBUF / (2 x kProgramTileBytes) buffers
//     (assumption: an input and an output tile each; SBUF size from the architecture guides,
//     instance.cpp), so at most that many tiles are in flight;
//   - transfers spread over one DMA queue per DMA engine of the core (16 per physical core,
//     NKI DMA bandwidth guide; instance.cpp), in turn;
//   - an input that is also an output (an out= argument, an in-place operand) counts as an
//     output only: the write waits for every earlier access anyway, and reading it whole would
//     chain each tile to the previous one;
//   - an op whose operands are not known reads and writes everything (a barrier).
//   - what the program keeps in SBUF moves no HBM bytes (Note [Intermediates in SBUF]).
//
// Note [Intermediates in SBUF]
// A compiled program (a NEFF) keeps the tensors it makes in the state buffer (SBUF) and uses
// HBM only for its inputs and outputs, its constants, and "temporary spills out of the state
// buffer" when its working set does not fit (aws-neuron-sdk
// neuron-runtime/explore/device-memory.rst, the scratchpad). So a tensor an op of the program
// writes is an intermediate unless it overlaps a region declared with keep_in_hbm() (the
// program's inputs, which it may update in place, and its outputs); in program order, an
// intermediate stays in SBUF from the op that writes it to the last op that reads it when it
// fits beside the others resident then (first come, first kept; the rest spill), and then:
//   - its write moves no HBM bytes, and every read of it moves none for the bytes it overlaps;
//   - a kept output is still written to HBM, but read back from SBUF;
//   - an input the program updates in place stays in HBM, and is read back from there: the
//     update may write a few entries (a KV cache's new position), and the rest of the tensor
//     was never on chip;
//   - the op's DMA transfers neither read nor write what stays in SBUF (OpRegions' sbuf_
//     lists), so a weight load does not wait for the activation it will multiply: it starts
//     when its DMA queue and its tile's SBUF buffer are free, so Note [Ops as tiles]'s ring of
//     buffers bounds how far loads run ahead of compute, as SBUF space does on the hardware.
// Capacity: half of the core's SBUF (assumption: the other half holds the tiles streamed
// from HBM, Note [Ops as tiles]'s ring). Only ops with engine work are reduced (a copy is a
// transfer whatever it moves), never below zero bytes. An op of unknown operands may read
// anything from HBM and overwrite it: the intermediates live across it are written back, their
// residency ends there, and it saves nothing. The ops are turned
// into instructions when the schedule is first asked for, once every region is known.
constexpr uint32_t kSbufSpace = 1;  // the address space of OpProgram's SBUF buffers
constexpr uint64_t kProgramTileBytes = kEngineLanes * kStreamTileElements * 4;
constexpr int kMaxOpTiles = 256;

// One op of a scheduled program: when its first instruction started and its last ended (from
// the program's start), each engine's busy time on it (Engine::Dma: the time at least one of
// its transfers runs), and the HBM bytes its transfers moved (what SBUF residency left of its
// charge). Ops overlap, so their spans do not add up to the makespan.
struct OpTiming {
  std::string source;
  double start_ns = 0, end_ns = 0;
  std::array<double, kEngineCount> busy_ns{};
  uint64_t hbm_bytes = 0;
};

class OpProgram {
 public:
  explicit OpProgram(const InstanceSpec& instance);
  // Appends one op (its time from time_of()); `inputs`/`outputs` null: unknown operands.
  void add_op(const WorkTime& time, const std::vector<Region>* inputs,
              const std::vector<Region>* outputs, const std::string& source);
  // Regions the program must leave in HBM: its inputs and outputs (Note [Intermediates in
  // SBUF]). May be called before or after the ops are added. Until it is called, every
  // tensor the program writes is kept (written back): only reads come from SBUF.
  enum class Kept { Input, Output };
  void keep_in_hbm(const std::vector<Region>& regions, Kept role = Kept::Output);
  // The program as instructions (built on first use after an op or region is added).
  Schedule& schedule();
  const Schedule& schedule() const;
  size_t ops() const { return pending_.size(); }
  // HBM bytes the ops would move on their own, and what SBUF residency saved of them.
  uint64_t charged_bytes() const { return charged_bytes_; }
  uint64_t sbuf_saved_bytes() const;
  // Each op's timing in `result`, a run of this program's schedule, in program order.
  std::vector<OpTiming> op_timings(const ScheduleResult& result) const;

 private:
  struct PendingOp {
    WorkTime time;
    bool known = false;
    std::vector<Region> inputs, outputs;
    std::string source;
  };
  // What an op reads and writes in SBUF: the bytes it saves, and which of its inputs and
  // outputs are wholly there.
  struct SbufUse {
    uint64_t saved = 0;
    std::vector<bool> input_in_sbuf, output_in_sbuf;
  };
  std::vector<SbufUse> sbuf_use() const;
  void build() const;
  void place(const PendingOp& op, SbufUse use) const;

  const InstanceSpec* instance_;
  uint64_t sbuf_buffers_;
  uint64_t resident_capacity_;
  std::vector<PendingOp> pending_;
  std::vector<Region> kept_, inputs_;
  bool kept_known_ = false;
  uint64_t charged_bytes_ = 0;
  mutable Schedule schedule_;
  mutable uint64_t next_buffer_ = 0;
  mutable uint64_t saved_bytes_ = 0;
  mutable std::vector<size_t> first_instruction_;  // per op; one past the last op's: size()
  mutable bool built_ = false;
};

}  // namespace trnsim
