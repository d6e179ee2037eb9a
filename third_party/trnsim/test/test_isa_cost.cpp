// NKI instruction costs (isa_cost.h) against the ISA stub's formulas computed by hand, and an
// NKI kernel's schedule (kernel_schedule.h): partition quadrants, DMA latency plus bytes,
// critical path.
#include <gtest/gtest.h>

#include <cmath>

#include "trnsim/trnsim.h"

namespace trnsim {
namespace {

const InstanceSpec& trn2() { return find_instance("trn2.3xlarge"); }
const InstanceSpec& trn1() { return find_instance("trn1.2xlarge"); }

IsaInstruction isa(IsaKind kind, Engine engine, int64_t p, int64_t n) {
  IsaInstruction i;
  i.kind = kind;
  i.engine = engine;
  i.partitions = p;
  i.elements = n;
  return i;
}

TEST(IsaCost, MatmulIsMaxOfMinStationaryAndMoving) {
  IsaInstruction mm = isa(IsaKind::NcMatmul, Engine::Tensor, 128, 512);
  mm.stationary_elements = 128;
  mm.in_dtype = IsaDtype::Bf16;
  EXPECT_DOUBLE_EQ(isa_cycles(mm), 512);  // max(min(64, 128), 512)
  mm.elements = 32;
  EXPECT_DOUBLE_EQ(isa_cycles(mm), 64);   // max(min(64, 128), 32)
  mm.stationary_elements = 16;
  EXPECT_DOUBLE_EQ(isa_cycles(mm), 32);   // max(min(64, 16), 32)
  mm.in_dtype = IsaDtype::Fp32;
  EXPECT_DOUBLE_EQ(isa_cycles(mm), 128);  // 4x for float32
  mm.in_dtype = IsaDtype::Fp8;
  mm.elements = 512;
  mm.double_row = true;
  EXPECT_DOUBLE_EQ(isa_cycles(mm), 256);  // double_row: 2x throughput
  // Trainium2's TensorE runs at 2.4 GHz: 256 cycles = 106.67 ns.
  EXPECT_NEAR(isa_duration_ns(trn2(), mm), 256 / 2.4, 1e-9);
}

TEST(IsaCost, StreamingFormulas) {
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::Activation, Engine::Scalar, 128, 10)), 64);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::Activation, Engine::Scalar, 128, 1000)), 1000);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::ActivationReduce, Engine::Scalar, 128, 1000)), 1064);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::TensorCopy, Engine::Vector, 128, 300)), 300);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::TensorScalar, Engine::Scalar, 128, 20)), 64);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::Reciprocal, Engine::Vector, 128, 100)), 800);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::BnAggr, Engine::Vector, 128, 30)), 130);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::Iota, Engine::GpSimd, 128, 100)), 250);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::AffineSelect, Engine::GpSimd, 128, 100)), 250);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::TensorTensorScan, Engine::Vector, 128, 100)), 200);

  IsaInstruction tt = isa(IsaKind::TensorTensor, Engine::Vector, 128, 512);
  EXPECT_DOUBLE_EQ(isa_cycles(tt), 1024);  // 2N otherwise
  tt.psum_and_sbuf = true;
  EXPECT_DOUBLE_EQ(isa_cycles(tt), 512);   // one input in PSUM
  tt.psum_and_sbuf = false;
  tt.in_dtype = tt.out_dtype = IsaDtype::Bf16;
  tt.op = IsaOp::Multiply;
  EXPECT_DOUBLE_EQ(isa_cycles(tt), 512);   // all bf16, multiply
  tt.op = IsaOp::Maximum;
  EXPECT_DOUBLE_EQ(isa_cycles(tt), 1024);

  IsaInstruction red = isa(IsaKind::TensorReduce, Engine::Vector, 128, 512);
  EXPECT_DOUBLE_EQ(isa_cycles(red), 512);
  red.in_dtype = red.out_dtype = IsaDtype::Bf16;
  red.op = IsaOp::Add;
  EXPECT_DOUBLE_EQ(isa_cycles(red), 256);

  IsaInstruction ms = isa(IsaKind::Memset, Engine::Vector, 128, 512);
  EXPECT_DOUBLE_EQ(isa_cycles(ms), 512);
  ms.zero_fill = true;
  ms.out_dtype = IsaDtype::Bf16;
  EXPECT_DOUBLE_EQ(isa_cycles(ms), 256);

  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::NcTranspose, Engine::Tensor, 128, 32)), 128);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::NcTranspose, Engine::Tensor, 16, 128)), 64);
  EXPECT_DOUBLE_EQ(isa_cycles(isa(IsaKind::NcTranspose, Engine::Vector, 32, 32)), 64);
  // VectorE of Trainium1 at 1.12 GHz.
  EXPECT_NEAR(isa_duration_ns(trn1(), isa(IsaKind::TensorCopy, Engine::Vector, 128, 1120)),
              1000, 1e-9);
  EXPECT_THROW(isa_cycles(isa(IsaKind::Activation, Engine::Vector, 128, 8)), Error);
}

TEST(IsaCost, DmaPayloadEfficiencyFollowsThePlottedCurve) {
  // The plotted points themselves.
  EXPECT_DOUBLE_EQ(dma_payload_efficiency(256), 0.104);
  EXPECT_DOUBLE_EQ(dma_payload_efficiency(4096), 0.966);
  // Between points, linear in log2 of the size: 1.5 KiB is 0.585 of the way from 1 to 2 KiB.
  const double t = std::log2(1.5);
  EXPECT_NEAR(dma_payload_efficiency(1536), 0.423 + t * (0.816 - 0.423), 1e-12);
  // Below 32 B a descriptor takes the time of a 32 B one; past 32 KiB the peak.
  EXPECT_DOUBLE_EQ(dma_payload_efficiency(8), 0.016 / 4);
  EXPECT_DOUBLE_EQ(dma_payload_efficiency(1 << 20), 1.0);
  // It rises with the payload everywhere.
  for (double b = 1; b < 65536; b *= 1.1) {
    EXPECT_LE(dma_payload_efficiency(b), dma_payload_efficiency(b * 1.1));
  }
  EXPECT_THROW(dma_payload_efficiency(0), Error);
  // A dma_copy costs its bytes over the fraction at its bytes per descriptor.
  IsaInstruction dma = isa(IsaKind::DmaCopy, Engine::Dma, 128, 512);
  dma.bytes = 128 * 1024;
  dma.descriptors = 128;
  EXPECT_EQ(isa_dma_bytes(dma), static_cast<uint64_t>(std::llround(128 * 1024 / 0.423)));
  dma.descriptors = 0;
  EXPECT_EQ(isa_dma_bytes(dma), 128u * 1024);
}

KernelInstruction kernel_ins(IsaInstruction i, std::vector<KernelRegion> reads,
                             std::vector<KernelRegion> writes, int queue = 0) {
  KernelInstruction k;
  k.isa = i;
  k.queue = queue;
  k.reads = std::move(reads);
  k.writes = std::move(writes);
  return k;
}

KernelRegion sbuf(int p0, int p1, uint64_t a0, uint64_t a1) {
  return {KernelMemory::Sbuf, 0, p0, p1, a0, a1};
}

TEST(KernelSchedule, DisjointQuadrantsOfOneTileDoNotOrder) {
  const InstanceSpec core = physical_core(trn2());
  // VectorE writes partitions 0-31 of bytes [0, 400); ScalarE reads partitions 64-127 of the
  // same bytes: no dependency, both start at 0.
  std::vector<KernelInstruction> prog{
      kernel_ins(isa(IsaKind::TensorCopy, Engine::Vector, 32, 100), {}, {sbuf(0, 32, 0, 400)}),
      kernel_ins(isa(IsaKind::Activation, Engine::Scalar, 64, 100), {sbuf(64, 128, 0, 400)},
                 {sbuf(64, 128, 1000, 1400)}),
      // Reads partitions 16-48: overlaps the first write's quadrant, so it waits.
      kernel_ins(isa(IsaKind::Activation, Engine::Scalar, 32, 100), {sbuf(16, 48, 0, 400)},
                 {sbuf(16, 48, 2000, 2400)}),
  };
  const KernelTiming t = schedule_kernel(core, 16, 1, prog);
  EXPECT_DOUBLE_EQ(t.times[1].start_ns, 0);
  const double copy_ns = 100 / 0.96;  // VectorE 0.96 GHz
  const double act_ns = 100 / 1.2;    // ScalarE 1.2 GHz
  EXPECT_NEAR(t.times[2].start_ns, std::max(copy_ns, act_ns), 1e-9);
  EXPECT_NEAR(t.makespan_ns, std::max(copy_ns, act_ns) + act_ns, 1e-9);
  ASSERT_EQ(t.critical_path.size(), 2u);
  EXPECT_EQ(t.critical_path.back(), 2u);
}

TEST(KernelSchedule, ReadingThePreviousInstructionsOutputCostsTheDependentOverhead) {
  const InstanceSpec core = physical_core(trn2());
  const IsaInstruction copy = isa(IsaKind::TensorCopy, Engine::Vector, 128, 512);
  const IsaInstruction gpsimd = isa(IsaKind::TensorCopy, Engine::GpSimd, 128, 512);
  std::vector<KernelInstruction> prog{
      kernel_ins(copy, {}, {sbuf(0, 128, 0, 2048)}),
      kernel_ins(copy, {sbuf(0, 128, 0, 2048)}, {sbuf(0, 128, 4096, 6144)}),  // reads 0's
      kernel_ins(copy, {sbuf(0, 128, 0, 2048)}, {sbuf(0, 128, 8192, 10240)}),  // not 1's
      kernel_ins(gpsimd, {sbuf(0, 128, 8192, 10240)}, {sbuf(0, 128, 12288, 14336)}),
  };
  const KernelTiming t = schedule_kernel(core, 16, 1, prog);
  auto duration = [&](int i) { return t.times[i].end_ns - t.times[i].start_ns; };
  EXPECT_NEAR(duration(0), 512 / 0.96, 1e-9);
  EXPECT_NEAR(duration(1), (512 + kDependentIssueOverheadCycles) / 0.96, 1e-9);
  EXPECT_NEAR(duration(2), 512 / 0.96, 1e-9);
  // GpSimdE: the guide states the overhead for VectorE and ScalarE only.
  EXPECT_NEAR(duration(3), 512 / 1.2, 1e-9);
}

TEST(KernelSchedule, NeuronCoreV2HalvesTheRateOfStridedAccess) {
  // Note [Strided access]: twice the cycles on Trainium1 (VectorE 1.12 GHz), none on Trainium2.
  IsaInstruction copy = isa(IsaKind::TensorCopy, Engine::Vector, 128, 512);
  copy.strided = true;
  EXPECT_NEAR(isa_duration_ns(trn1(), copy), 2 * 512 / 1.12, 1e-9);
  EXPECT_NEAR(isa_duration_ns(trn2(), copy), 512 / 0.96, 1e-9);
  copy.strided = false;
  EXPECT_NEAR(isa_duration_ns(trn1(), copy), 512 / 1.12, 1e-9);
}

TEST(KernelSchedule, NeuronCoreV2EnginesShareTheSbufAndPsumPorts) {
  // Two independent instructions ready at once: VectorE and GpSimdE on SBUF, VectorE and
  // ScalarE on PSUM. On Trainium1 the second waits for the first (Note [Shared SBUF and PSUM
  // ports]); on Trainium2 they run side by side.
  const KernelRegion psum_a{KernelMemory::Psum, 0, 0, 128, 0, 2048};
  const std::vector<std::vector<KernelInstruction>> pairs{
      {kernel_ins(isa(IsaKind::TensorCopy, Engine::Vector, 128, 512), {sbuf(0, 128, 0, 2048)},
                  {sbuf(0, 128, 4096, 6144)}),
       kernel_ins(isa(IsaKind::TensorCopy, Engine::GpSimd, 128, 512), {sbuf(0, 128, 0, 2048)},
                  {sbuf(0, 128, 8192, 10240)})},
      {kernel_ins(isa(IsaKind::TensorCopy, Engine::Vector, 128, 512), {psum_a},
                  {sbuf(0, 128, 4096, 6144)}),
       kernel_ins(isa(IsaKind::Activation, Engine::Scalar, 128, 512), {psum_a},
                  {sbuf(0, 128, 8192, 10240)})},
  };
  for (const auto& pair : pairs) {
    const KernelTiming v2 = schedule_kernel(physical_core(trn1()), 16, 1, pair);
    EXPECT_DOUBLE_EQ(v2.times[0].start_ns, 0);
    EXPECT_NEAR(v2.times[1].start_ns, v2.times[0].end_ns, 1e-9);
    const KernelTiming v3 = schedule_kernel(physical_core(trn2()), 16, 1, pair);
    EXPECT_DOUBLE_EQ(v3.times[1].start_ns, 0);
  }
}

TEST(KernelSchedule, ACopyWithEngineChoicesRunsWhereTheWorkloadIsLeast) {
  // Note [Engine choice], Trainium2 clocks: VectorE 0.96 GHz, ScalarE and GpSimdE 1.2 GHz.
  const InstanceSpec core = physical_core(trn2());
  auto copy_on = [](Engine engine, int slot) {
    return kernel_ins(isa(IsaKind::TensorCopy, engine, 128, 512), {sbuf(0, 128, 0, 2048)},
                      {sbuf(0, 128, 4096 * (slot + 1), 4096 * (slot + 1) + 2048)});
  };
  KernelInstruction choice = copy_on(Engine::Vector, 10);
  choice.engine_choices =
      engine_bit(Engine::Vector) | engine_bit(Engine::Scalar) | engine_bit(Engine::GpSimd);
  // VectorE holds three copies: the copy goes to ScalarE (426.7 ns from now, against VectorE's
  // 2133 ns; it ties with GpSimdE, and the first listed wins).
  std::vector<KernelInstruction> prog{copy_on(Engine::Vector, 0), copy_on(Engine::Vector, 1),
                                      copy_on(Engine::Vector, 2), choice};
  KernelTiming t = schedule_kernel(core, 16, 1, prog);
  EXPECT_EQ(t.engines[3], Engine::Scalar);
  EXPECT_DOUBLE_EQ(t.times[3].start_ns, 0);
  EXPECT_EQ(t.instructions[static_cast<int>(Engine::Scalar)], 1u);
  EXPECT_EQ(t.instructions[static_cast<int>(Engine::Vector)], 3u);
  // ScalarE and GpSimdE hold two copies each (853 ns), VectorE none (533 ns): VectorE.
  prog = {copy_on(Engine::Scalar, 0), copy_on(Engine::Scalar, 1), copy_on(Engine::GpSimd, 2),
          copy_on(Engine::GpSimd, 3), choice};
  t = schedule_kernel(core, 16, 1, prog);
  EXPECT_EQ(t.engines[4], Engine::Vector);
  // The engine it names must be one of its choices; a DMA queue is none.
  choice.engine_choices = engine_bit(Engine::Scalar);
  EXPECT_THROW(schedule_kernel(core, 16, 1, {choice}), Error);
  choice.engine_choices = engine_bit(Engine::Vector) | engine_bit(Engine::Dma);
  EXPECT_THROW(schedule_kernel(core, 16, 1, {choice}), Error);
}

TEST(KernelSchedule, DmaPaysItsLatencyThenItsBytes) {
  const InstanceSpec core = physical_core(trn2());
  // One physical Trainium2 core streams min(16 x 23, 2900 / 8) = 362.5 GB/s.
  EXPECT_DOUBLE_EQ(core.core_stream_gbps(), 362.5);
  IsaInstruction dma = isa(IsaKind::DmaCopy, Engine::Dma, 128, 512);
  dma.bytes = 128 * 2048;
  dma.descriptors = 128;
  KernelRegion hbm{KernelMemory::Hbm, 1, 0, 0, 0, 128 * 2048};
  std::vector<KernelInstruction> prog{
      kernel_ins(dma, {hbm}, {sbuf(0, 128, 0, 2048)}, 0),
      kernel_ins(isa(IsaKind::TensorCopy, Engine::Vector, 128, 512), {sbuf(0, 128, 0, 2048)},
                 {sbuf(0, 128, 4096, 6144)}),
  };
  const KernelTiming t = schedule_kernel(core, 16, 1, prog);
  // 2 KiB a descriptor: 0.816 of the peak (Note [DMA payload efficiency]).
  const double dma_ns = 1300 + std::llround(128 * 2048 / 0.816) / 362.5;
  EXPECT_NEAR(t.times[0].end_ns, dma_ns, 1e-6);
  EXPECT_NEAR(t.times[1].start_ns, dma_ns, 1e-6);
  EXPECT_NEAR(t.makespan_ns, dma_ns + 512 / 0.96, 1e-6);
  EXPECT_NEAR(t.busy_ns[static_cast<int>(Engine::Dma)], dma_ns, 1e-6);
  EXPECT_EQ(t.instructions[static_cast<int>(Engine::Dma)], 1u);
  EXPECT_EQ(t.critical_path, (std::vector<uint32_t>{0, 1}));
}

TEST(KernelSchedule, ATransferUsesTheDmaEnginesOfItsPartitions) {
  // The DMA overview's Example 1: [4, 4096] bf16 (32 KiB) into 4 partitions runs on one of the
  // core's 16 engines (each serves 8 partitions), at that engine's 23 B/ns; the same bytes
  // into 128 partitions use all 16, bounded by the core's 362.5 GB/s stream.
  const InstanceSpec core = physical_core(trn2());
  auto load = [&](int partitions, uint64_t row_bytes) {
    IsaInstruction dma = isa(IsaKind::DmaCopy, Engine::Dma, partitions, 0);
    dma.bytes = partitions * row_bytes;
    dma.descriptors = partitions;
    KernelRegion hbm{KernelMemory::Hbm, 1, 0, 0, 0, dma.bytes};
    const KernelInstruction k = kernel_ins(dma, {hbm}, {sbuf(0, partitions, 0, row_bytes)}, 0);
    return std::make_pair(dma_transfer_cap(core, k), schedule_kernel(core, 16, 1, {k}));
  };
  const auto [cap4, four] = load(4, 8192);
  EXPECT_DOUBLE_EQ(cap4, 23.0);
  // 8 KiB a partition: 0.983 of the peak (Note [DMA payload efficiency]).
  EXPECT_NEAR(four.makespan_ns, 1300 + std::llround(32768 / 0.983) / 23.0, 1e-6);
  const auto [cap128, all] = load(128, 256);
  EXPECT_DOUBLE_EQ(cap128, 16 * 23.0);
  EXPECT_NEAR(all.makespan_ns, 1300 + std::llround(32768 / 0.104) / 362.5, 1e-6);
  // Partitions 6-9 straddle two engines' groups of 8.
  IsaInstruction dma = isa(IsaKind::DmaCopy, Engine::Dma, 4, 0);
  const KernelInstruction straddle = kernel_ins(dma, {}, {sbuf(6, 10, 0, 64)}, 0);
  EXPECT_DOUBLE_EQ(dma_transfer_cap(core, straddle), 2 * 23.0);
  const KernelInstruction hbm_to_hbm = kernel_ins(
      dma, {{KernelMemory::Hbm, 1, 0, 0, 0, 64}}, {{KernelMemory::Hbm, 2, 0, 0, 0, 64}}, 0);
  EXPECT_DOUBLE_EQ(dma_transfer_cap(core, hbm_to_hbm), 0);
}

TEST(KernelSchedule, ACoreBarrierStartsEveryProgramsNextPhaseAfterTheSlowest) {
  // Note [Core barriers]: program 0 copies 512 elements, program 1 one of 64 (MIN_II), then
  // both meet; after the barrier program 1's copy starts when program 0's ended, not at its
  // own end. Without the barrier the programs run apart.
  const InstanceSpec core = physical_core(trn2());
  auto on = [](KernelInstruction k, int program) {
    k.program = program;
    return k;
  };
  const IsaInstruction long_copy = isa(IsaKind::TensorCopy, Engine::Vector, 128, 512);
  const IsaInstruction short_copy = isa(IsaKind::TensorCopy, Engine::Vector, 128, 64);
  const IsaInstruction barrier = isa(IsaKind::CoreBarrier, Engine::GpSimd, 1, 1);
  const std::vector<KernelInstruction> before{
      on(kernel_ins(long_copy, {}, {sbuf(0, 128, 0, 2048)}), 0),
      on(kernel_ins(short_copy, {}, {sbuf(0, 128, 0, 256)}), 1),
  };
  std::vector<KernelInstruction> prog = before;
  prog.push_back(on(kernel_ins(barrier, {}, {}), 0));
  prog.push_back(on(kernel_ins(barrier, {}, {}), 1));
  prog.push_back(on(kernel_ins(short_copy, {}, {sbuf(0, 128, 4096, 4352)}), 1));
  const KernelTiming t = schedule_kernel(core, 16, 2, prog);
  const double long_ns = 512 / 0.96, short_ns = 64 / 0.96;
  EXPECT_NEAR(t.times[2].start_ns, long_ns, 1e-9);   // the barriers, where the phase ends
  EXPECT_NEAR(t.times[3].end_ns, long_ns, 1e-9);
  EXPECT_NEAR(t.times[4].start_ns, long_ns, 1e-9);
  EXPECT_NEAR(t.makespan_ns, long_ns + short_ns, 1e-9);
  EXPECT_EQ(t.engines[2], Engine::GpSimd);
  EXPECT_EQ(t.instructions[static_cast<int>(Engine::Vector)], 3u);
  ASSERT_FALSE(t.critical_path.empty());
  EXPECT_EQ(t.critical_path.front(), 0u);  // the slow program's copy, then the phase after
  EXPECT_EQ(t.critical_path.back(), 4u);
  std::vector<KernelInstruction> apart = before;
  apart.push_back(on(kernel_ins(short_copy, {}, {sbuf(0, 128, 4096, 4352)}), 1));
  EXPECT_NEAR(schedule_kernel(core, 16, 2, apart).times[2].start_ns, short_ns, 1e-9);
  EXPECT_THROW(isa_cycles(barrier), Error);
}

}  // namespace
}  // namespace trnsim
