// An NKI kernel's executed instructions, scheduled on the NeuronCore's engines and DMA queues.
//
// Note [Kernel schedule]
// A kernel run (a list of executed nki.isa instructions in program order) becomes a Schedule
// (Note [Engine scheduler]): each instruction goes to its engine's in-order queue (or its DMA
// queue) with the duration of Note [ISA instruction costs], and waits for the instructions whose
// tiles it reads or overwrites (RAW, WAR, WAW by the regions below). A dma_copy is two schedule
// instructions on its queue: its fixed latency (it waits for what it reads, holds the queue and
// moves nothing), then its transfer (its bytes through the core's shared HBM stream bandwidth).
// A transfer moves no faster than the DMA engines of the SBUF/PSUM partitions it touches: each
// of the core's 16 engines serves 8 of the 128 partitions ("each DMA engine is typically
// responsible for moving data for eight SBUF partitions"; a [4, 4096] load runs on one engine:
// aws-neuron-sdk nki/get-started/about/nki-dma-overview.rst, Examples 1 and 2), so its cap is
// those engines' streaming rate (dma_transfer_cap; InstanceSpec dma_engine_gbps).
//
// Regions. HBM tensors are byte ranges of their buffer (space 0, each buffer at its own 2^40
// base). SBUF and PSUM are per-partition address spaces: a tile is partitions [p0, p1) times
// bytes [a0, a1) of each partition. The scheduler's regions are 1-D, so each (memory, core,
// partition quadrant) is an address space of its own and a tile is one region per 32-partition
// quadrant it touches: tiles on disjoint quadrants of the same bytes do not order, tiles sharing
// a quadrant do even if their partitions within it are disjoint. Quadrants because NKI places
// partition offsets of partial tiles at multiples of 32 (the quadrant rules of nc_stream_shuffle
// and of PE tiling in the ISA stub) and one region per partition would multiply the scheduler's
// work by up to 128.
//
// Physical cores. A kernel runs on one physical NeuronCore (LNC=1), or on `programs` of them
// (kernel[2] on NeuronCore-v3), each with its own engines and its own share of HBM. Each
// program is scheduled on its core separately; between barriers (below) their dependencies
// through shared HBM are not modelled. The makespan is the slowest program's.
//
// Note [Core barriers]
// The programs of an LNC launch order their work on each other only at core_barrier and
// sendrecv ("all operations in the group must complete before any can proceed", the ISA stub),
// which reach the schedule as CoreBarrier instructions, one per program, consecutive in the
// instruction list. The kernel is cut there into phases: each phase is scheduled as above and
// starts when the slowest program's previous phase has ended. So a barrier waits for every
// engine of both cores to finish what came before it, where the hardware blocks only the
// barrier's engine until the other core's semaphore arrives and lets independent work on the
// other engines run on: an assumption that over-charges a kernel whose engines have
// independent work queued across a barrier. The semaphore exchange itself takes no time here:
// no Neuron document gives its latency.
//
// Note [Dependent instruction overhead]
// VectorE and ScalarE are pipelined: the ISA formulas are the cycles between back-to-back
// independent instructions. An instruction that reads a tile the previous instruction of its
// engine writes cannot enter the pipeline until that one leaves it; the architecture guide
// charges this as a static overhead of 100 engine cycles (kDependentIssueOverheadCycles). So an
// instruction on VectorE or ScalarE whose reads overlap the writes of the instruction before it
// in its engine's queue (program order) takes 100 cycles more. The guide's other case, "many
// back-to-back instructions with N << 128", is left to MIN_II: it gives no threshold for "<<".
//
// Note [Shared SBUF and PSUM ports]
// On NeuronCore-v2 "Vector Engine and GpSimd Engine cannot access SBUF in parallel" and "Vector
// Engine and Scalar Engine cannot access PSUM in parallel" (NKI architecture guide,
// trainium_inferentia2_arch.rst; NeuronCore-v3 lifts both, trainium2_arch.rst). On a chip with
// shared_ram_ports (instance.h), a VectorE or GpSimdE instruction that touches SBUF holds the
// SBUF port while it runs, and a VectorE or ScalarE instruction that touches PSUM the PSUM port
// (Instruction::ports): an instruction of the other engine that needs the port waits for it.
//
// Note [Engine choice]
// tensor_copy without an engine is placed by the compiler: "compiler selects best engine based
// on engine workload" (ISA stub, nki/api/nki/isa/__init__.py, tensor_copy). A KernelInstruction
// with engine_choices runs on the candidate whose work so far, plus the instruction's own
// duration there, is least (on a chip with shared ports, the work so far of the ports it would
// hold counts too); on a tie, on isa.engine. The work so far is the summed durations of the
// program's instructions placed on that engine (or holding that port) before it in program
// order: the compiler's estimate, not the schedule's timing. KernelTiming::engines says where
// each instruction ran.
//
// Critical path: from the instruction that ends last, repeatedly the instruction that released
// it (the dependency or the previous instruction of its queue that ended exactly when it
// started); a kernel instruction appears once even when it is two schedule instructions.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "trnsim/instance.h"
#include "trnsim/isa_cost.h"
#include "trnsim/schedule.h"
#include "trnsim/work.h"

namespace trnsim {

enum class KernelMemory : uint8_t { Hbm = 0, Sbuf, Psum };

struct KernelRegion {
  KernelMemory memory = KernelMemory::Hbm;
  uint64_t buffer = 0;          // HBM: the buffer id (unique within the kernel run)
  int32_t p0 = 0, p1 = 0;       // on chip: partitions [p0, p1)
  uint64_t begin = 0, end = 0;  // bytes [begin, end) of the buffer / of each partition
};

struct KernelInstruction {
  IsaInstruction isa;
  int queue = 0;  // DMA queue of a dma_copy
  int program = 0;  // the logical-core program (nl.program_id()) that issued it
  // Engines the compiler may place it on, a bit (1 << Engine) each (Note [Engine choice]);
  // 0: isa.engine.
  uint8_t engine_choices = 0;
  std::vector<KernelRegion> reads, writes;
};

// The bit of `engine` in KernelInstruction::engine_choices.
constexpr uint8_t engine_bit(Engine engine) { return uint8_t{1} << static_cast<int>(engine); }

// Partitions per scheduler address space (Note [Kernel schedule]).
constexpr int32_t kPartitionQuadrant = 32;

// Scheduler regions of one kernel region on `program`'s core (appended to `out`).
void kernel_regions(const KernelRegion& region, int program, std::vector<Region>& out);

struct KernelTiming {
  int programs = 1;
  double makespan_ns = 0;
  // Summed over the programs' cores; divide by programs x makespan for a fraction.
  std::array<double, kEngineCount> busy_ns{};  // DMA: time at least one queue is busy
  std::vector<double> dma_queue_busy_ns;
  std::array<uint64_t, kEngineCount> instructions{};
  std::vector<InstructionTime> times;  // per kernel instruction
  std::vector<Engine> engines;         // per kernel instruction: where it ran
  std::vector<uint32_t> critical_path;  // kernel instruction indices, in execution order

  double utilization(Engine engine) const;
};

// One physical NeuronCore of `instance`'s chip: its HBM and DMA shares as an LNC=1 core.
InstanceSpec physical_core(const InstanceSpec& instance);
// One physical NeuronCore of a one-chip system of `chip` (a chip no instance type has).
InstanceSpec physical_core(const ChipSpec& chip);

// A dma_copy's most bytes per ns: the streaming rate of the DMA engines serving the on-chip
// partitions it touches (Note [Kernel schedule]); 0 (no cap) between HBM buffers.
double dma_transfer_cap(const InstanceSpec& core, const KernelInstruction& ki);

// Schedules `instructions` (program order) on `programs` physical cores of `core` (already one
// physical core: physical_core()) with `dma_queues` DMA queues each.
KernelTiming schedule_kernel(const InstanceSpec& core, int dma_queues, int programs,
                             const std::vector<KernelInstruction>& instructions);

// A scheduled kernel launched on a logical core of `instance` (Note [Kernel schedule]): the
// launch overhead once plus the makespan, as a compiled graph's launch (cost.h,
// kLaunchOverheadNs); its engines busy for `busy_ns`, its HBM traffic `hbm_bytes`.
WorkTime kernel_launch(const InstanceSpec& instance, double makespan_ns,
                       const std::array<double, kEngineCount>& busy_ns, uint64_t hbm_bytes,
                       double flops);

}  // namespace trnsim
