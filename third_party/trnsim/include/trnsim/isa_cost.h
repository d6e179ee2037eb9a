// The cost of one NKI instruction on its engine, from the instruction's operands.
//
// Note [ISA instruction costs]
// AWS publishes an "Estimated instruction cost" for most nki.isa instructions in the docstrings
// of the ISA stub (aws-neuron-sdk commit 1db4d74e, nki/api/nki/isa/__init__.py; later
// releases dropped several). They are engine cycles for back-to-back instructions of the same
// shape, with N the elements per partition of the operand the page names:
//   - nc_matmul: max(min(64, N_stationary), N_moving) TensorE cycles for fp8/bf16/fp16/tf32
//     inputs, 4x for fp32. FP8 double_row mode packs two rows per PE: "2x matmul throughput"
//     (current stub, matmul_perf_mode.double_row), so half the cycles;
//   - nc_transpose: TensorE max(P, min(64, F)); VectorE max(MIN_II, N);
//   - activation max(MIN_II, N); activation_reduce max(MIN_II, N) + MIN_II (ScalarE);
//   - tensor_copy, tensor_scalar, dropout, bn_stats, memset: max(MIN_II, N) (memset of zero
//     to bf16/fp16: max(MIN_II, N/2)); reciprocal max(MIN_II, 8N); bn_aggr max(MIN_II, 13N/3);
//   - tensor_tensor: max(MIN_II, N) when one input is in PSUM and the other in SBUF, or all
//     bf16 in SBUF with add/multiply/subtract; max(MIN_II, 2N) otherwise;
//   - tensor_reduce: N/2 for bf16 in and out with add or maximum, N otherwise;
//   - tensor_tensor_scan max(MIN_II, 2N); iota and affine_select GPSIMD_START + N;
// MIN_II is "roughly 64 engine cycles", GPSIMD_START "roughly 150". Instructions the stub
// gives no formula for are assumptions, marked where they are defined (isa_cost.cpp):
// tensor_partition_reduce (GPSIMD_START + N), select_reduce (the architecture guide's rule
// for two input tiles, max(MIN_II, 2N)).
// Cycles become time at the engine's clock (instance.cpp). The formulas are throughput costs;
// an instruction that reads the output of the instruction just before it on VectorE or ScalarE
// also pays a static overhead of 100 cycles (Note [Dependent instruction overhead],
// kernel_schedule.h).
//
// Note [Strided access]
// On NeuronCore-v2, "when the most-minor F dimension stride is less than 16 bytes, SBUF/PSUM
// ... can supply a peak bandwidth of 128 elements/cycle ... for each tensor read/write
// interface"; above 16 bytes, "the achievable bandwidth of each tensor read/write interface will
// be half of the peak bandwidth, which translates to roughly 50% performance hit on the
// instructions" (NKI architecture guide, trainium_inferentia2_arch.rst, Data Movement,
// Performance Consideration). So a compute instruction with an SBUF or PSUM operand whose
// innermost free dimension (the last one of more than one element) steps over more than 16
// bytes takes twice its cycles on a chip with strided_access_half_rate (instance.h). The
// Trainium2 and Trainium3 guides say nothing of it, so their cores are charged no penalty.
//
// A dma_copy pays, per instruction, the DMA's fixed "descriptor setup, synchronization, and
// semaphore-to-start latency (~1300 ns cross-engine)" (nki/deep-dives/nki-dma-bandwidth-guide.rst),
// then moves its bytes through the core's HBM stream bandwidth (schedule.h) at the efficiency
// its descriptors allow (Note [DMA payload efficiency]).
//
// Note [DMA payload efficiency]
// Small DMA payloads keep the engines busy with per-packet work: "the DMA packet rate---not HBM
// bandwidth---becomes the limiting factor" (DMA bandwidth guide). AWS plots the throughput of
// 128-partition transfers against their bytes per partition, 32 B to 32 KiB
// (nki/get-started/about/nki-dma-overview.rst, figure nki-dma-intro-1.jpg, "DMA Throughput
// varying Bytes per Partition for p_dim = 128"; "at 4096 free bytes, we are able to nearly
// saturate DMA bandwidth"). The plot has no numbers on its throughput axis, so kDmaPayloadCurve
// holds each point as a fraction of the 32 KiB point, read off the plot's pixels (within about
// 0.3% of that point): throughput roughly doubles with the payload up to 1 KiB (a fixed time per
// descriptor) and flattens past 4 KiB. A transfer occupies the bandwidth for its bytes over the
// fraction at its descriptor size (its bytes over its descriptors: one run contiguous on both
// sides, a partition's row for a [128, F] tile), interpolated linearly in log2 of the size,
// proportional below 32 B, 1 above 32 KiB. Assumption: the fractions, plotted for one NeuronCore
// generation the page does not name, hold for every generation's own peak.
#pragma once

#include <cstdint>

#include "trnsim/instance.h"
#include "trnsim/streaming_engine.h"

namespace trnsim {

// The instruction kinds of nki.isa whose cost is modelled.
enum class IsaKind : uint8_t {
  DmaCopy = 0,
  NcMatmul,
  NcTranspose,
  TensorCopy,
  TensorTensor,
  TensorScalar,
  TensorReduce,
  TensorPartitionReduce,
  Activation,
  ActivationReduce,
  Memset,
  Iota,
  AffineSelect,
  BnStats,
  BnAggr,
  SelectReduce,
  TensorTensorScan,
  Dropout,
  Reciprocal,
  // Not an engine instruction: where the programs of an LNC launch wait for each other
  // (Note [Core barriers] in kernel_schedule.h).
  CoreBarrier,
};
constexpr int kIsaKindCount = 20;

// The data types the cost formulas distinguish.
enum class IsaDtype : uint8_t { Other = 0, Fp32, Bf16, Fp16, Fp8, Tf32 };
// The ALU operators the cost formulas distinguish.
enum class IsaOp : uint8_t { Other = 0, Add, Subtract, Multiply, Maximum };

struct IsaInstruction {
  IsaKind kind = IsaKind::TensorCopy;
  Engine engine = Engine::Vector;  // where it runs (nc_transpose: TensorE or VectorE)
  int64_t partitions = 0;          // P of the operand the formula names
  int64_t elements = 0;            // N: its elements per partition (nc_matmul: N_moving)
  int64_t stationary_elements = 0; // nc_matmul: N_stationary
  IsaDtype in_dtype = IsaDtype::Other, out_dtype = IsaDtype::Other;
  IsaOp op = IsaOp::Other;
  bool double_row = false;         // nc_matmul perf_mode=double_row
  bool psum_and_sbuf = false;      // tensor_tensor: one input in PSUM, the other in SBUF
  bool zero_fill = false;          // memset of 0
  bool strided = false;            // an on-chip operand's innermost stride is over 16 bytes
  // dma_copy
  uint64_t bytes = 0;
  uint64_t descriptors = 0;
};

// "MIN_II is roughly 64 engine cycles" (ISA stub, every max(MIN_II, N) formula).
constexpr int64_t kIsaMinII = 64;
// "GPSIMD_START is the instruction startup overhead on GpSimdE, roughly 150 engine cycles"
// (ISA stub, affine_select; iota: "150 + N").
constexpr int64_t kGpSimdStartCycles = 150;
// "with every instruction depending on the output tile of the previous instruction, we need to
// add a static instruction overhead of 100 engine cycles" (NKI architecture guide,
// nki/guides/architecture/trainium_inferentia2_arch.rst, Vector Engine, Performance
// Consideration; its Scalar Engine section: "all the performance notes discussed for Vector
// Engine earlier are applicable to Scalar Engine").
constexpr int64_t kDependentIssueOverheadCycles = 100;
// The DMA fixed latency per transfer, ns (DMA bandwidth guide, "~1300 ns cross-engine").
constexpr double kDmaFixedLatencyNs = 1300.0;
// Note [DMA payload efficiency]: {bytes per descriptor, fraction of the peak throughput}.
struct DmaPayloadPoint {
  double bytes;
  double fraction;
};
constexpr DmaPayloadPoint kDmaPayloadCurve[] = {
    {32, 0.016},   {64, 0.028},   {128, 0.054},  {256, 0.104},   {512, 0.210},    {1024, 0.423},
    {2048, 0.816}, {4096, 0.966}, {8192, 0.983}, {16384, 0.993}, {32768, 1.000},
};
// The fraction of the DMA engines' peak throughput a transfer with descriptors of
// `descriptor_bytes` reaches (Note [DMA payload efficiency]). Throws trnsim::Error for a
// descriptor of no bytes.
double dma_payload_efficiency(double descriptor_bytes);

// Engine cycles of a compute instruction (not DmaCopy). Throws trnsim::Error for an engine the
// kind cannot run on.
double isa_cycles(const IsaInstruction& instruction);
// Its duration on `instance`'s engine clocks, ns, twice as long for a strided access on a chip
// that halves its rate (Note [Strided access]).
double isa_duration_ns(const InstanceSpec& instance, const IsaInstruction& instruction);
// The bytes a dma_copy costs of the HBM stream bandwidth: its bytes over its payload
// efficiency (a dma_copy of no descriptors: its bytes).
uint64_t isa_dma_bytes(const IsaInstruction& instruction);

const char* isa_kind_name(IsaKind kind);

}  // namespace trnsim
