// Work descriptions (work.h): each kind is timed by the engine rules it names, composites make
// the passes their NKI kernels make, and the README's example runs.
#include <gtest/gtest.h>

#include <cstdint>

#include "trnsim/trnsim.h"

namespace trnsim {
namespace {

const InstanceSpec& trn2() { return find_instance("trn2.3xlarge"); }

constexpr int kVector = static_cast<int>(Engine::Vector);
constexpr int kScalar = static_cast<int>(Engine::Scalar);
constexpr int kGpSimd = static_cast<int>(Engine::GpSimd);
constexpr int kTensor = static_cast<int>(Engine::Tensor);
constexpr int kDma = static_cast<int>(Engine::Dma);

TEST(Work, ElementwiseIsOnePassOnItsEngine) {
  const uint64_t n = 1 << 20;
  const WorkTime t = time_of(trn2(), {Streaming{StreamingKernel::Elementwise, Engine::Vector, n},
                                      8 * n});
  EXPECT_DOUBLE_EQ(t.cost.engine_ns[kVector], streaming_engine_ns(trn2(), Engine::Vector, n));
  EXPECT_EQ(t.cost.engine_ns[kScalar], 0);
  EXPECT_EQ(t.cost.bytes, 8 * n);
  EXPECT_DOUBLE_EQ(t.duration_ns, t.cost.duration_ns());
  // An activation with a second streamed operand adds a VectorE tensor-tensor pass.
  const WorkTime act = time_of(
      trn2(), {Streaming{StreamingKernel::Elementwise, Engine::Scalar, n, /*two_inputs=*/true},
               8 * n});
  EXPECT_DOUBLE_EQ(act.cost.engine_ns[kScalar], streaming_engine_ns(trn2(), Engine::Scalar, n));
  EXPECT_DOUBLE_EQ(act.cost.engine_ns[kVector],
                   streaming_engine_ns(trn2(), Engine::Vector, n, Pass::TwoInput));
}

TEST(Work, SoftmaxIsMaxExpAndScale) {
  const uint64_t n = 1 << 20;
  const WorkTime t = time_of(trn2(), {Streaming{StreamingKernel::Softmax, Engine::Vector, n}, 0});
  // Two VectorE passes (max, scale) and one ScalarE pass (exp with the row sums).
  EXPECT_DOUBLE_EQ(t.cost.engine_ns[kVector], 2 * streaming_engine_ns(trn2(), Engine::Vector, n));
  EXPECT_DOUBLE_EQ(t.cost.engine_ns[kScalar], streaming_engine_ns(trn2(), Engine::Scalar, n));
}

TEST(Work, MatmulIsTensorEngineWork) {
  const WorkTime t =
      time_of(trn2(), {Matmul{2, 512, 1024, 256, Precision::BF16}, 1 << 20});
  EXPECT_DOUBLE_EQ(t.cost.engine_ns[kTensor],
                   tensor_engine_ns(trn2(), 2, 512, 1024, 256, Precision::BF16));
  EXPECT_DOUBLE_EQ(t.cost.flops, 2.0 * 2 * 512 * 1024 * 256);
  EXPECT_GT(t.cost.engine_ns[kVector], 0);  // PSUM evacuation
}

TEST(Work, GatherMovesTheRowsItTouches) {
  // 100 rows of a 1M-element table: the traffic is the rows (read and written) and indices.
  const Gather rows{100 * 64, 1 << 20, 100 * 64 * 4, 100 * 8};
  const uint64_t table_traffic = (1 << 20) * 4 + rows.output_bytes + rows.index_bytes;
  const WorkTime t = time_of(trn2(), {rows, table_traffic});
  EXPECT_EQ(t.cost.bytes, 2 * rows.output_bytes + rows.index_bytes);
  EXPECT_DOUBLE_EQ(t.cost.engine_ns[kGpSimd],
                   streaming_engine_ns(trn2(), Engine::GpSimd, rows.gathered_elements));
  // A small table picked many times: the whole traffic and every element.
  const Gather repeats{1 << 20, 1 << 20, (1 << 20) * 4, (1 << 20) * 8};
  const WorkTime r = time_of(trn2(), {repeats, 64 * 4 + (1 << 20) * 12});
  EXPECT_EQ(r.cost.bytes, 64 * 4 + (1 << 20) * 12);
  // An accumulating indexed write (scatter_add_) also reads the rows it adds to.
  Gather adds = rows;
  adds.accumulates = true;
  EXPECT_EQ(time_of(trn2(), {adds, table_traffic}).cost.bytes,
            3 * rows.output_bytes + rows.index_bytes);
}

TEST(Work, CausalAttentionSkipsTilesAboveTheDiagonal) {
  const Attention full{16, 2048, 2048, 128, 128, Precision::BF16, false, false};
  Attention causal = full;
  causal.causal = true;
  const WorkTime f = time_of(trn2(), {full, 0});
  const WorkTime c = time_of(trn2(), {causal, 0});
  EXPECT_LT(c.cost.engine_ns[kTensor], 0.7 * f.cost.engine_ns[kTensor]);
  EXPECT_GT(c.cost.engine_ns[kTensor], 0.5 * f.cost.engine_ns[kTensor]);
  // The backward does more TensorE work than the forward.
  Attention backward = full;
  backward.backward = true;
  EXPECT_GT(time_of(trn2(), {backward, 0}).cost.engine_ns[kTensor], 2 * f.cost.engine_ns[kTensor]);
}

TEST(Work, FusedKernelLaunchesOnceForAllItsLoops) {
  const uint64_t n = 1 << 16;
  FusedKernel kernel;
  kernel.loops = {Streaming{StreamingKernel::Elementwise, Engine::Vector, n},
                  Streaming{StreamingKernel::Elementwise, Engine::Vector, n}};
  const WorkTime fused = time_of(trn2(), {kernel, 4 * n});
  const WorkTime one = time_of(trn2(), {kernel.loops[0], 4 * n});
  // Two loops' elements in one instruction stream, one launch overhead.
  EXPECT_DOUBLE_EQ(fused.cost.engine_ns[kVector],
                   streaming_engine_ns(trn2(), Engine::Vector, 2 * n));
  EXPECT_LT(fused.duration_ns, 2 * one.duration_ns);
}

TEST(Work, FusedKernelCostsNoMoreThanItsOpsAlone) {
  const uint64_t n = 1 << 20;
  const Streaming two_input{StreamingKernel::Elementwise, Engine::Vector, n, true};
  // GELU as Inductor decomposes it: erf on ScalarE and three VectorE passes.
  FusedKernel decomposed;
  decomposed.loops = {Streaming{StreamingKernel::Elementwise, Engine::Scalar, n}, two_input,
                      two_input, Streaming{StreamingKernel::Elementwise, Engine::Vector, n}};
  FusedKernel bounded = decomposed;
  bounded.fused_ops = {Streaming{StreamingKernel::Elementwise, Engine::Scalar, n}};  // gelu
  const WorkTime loops = time_of(trn2(), {decomposed, 4 * n});
  const WorkTime ops = time_of(trn2(), {bounded, 4 * n});
  // The op alone is one ScalarE pass: no VectorE time, and the same HBM traffic.
  EXPECT_DOUBLE_EQ(ops.cost.engine_ns[kVector], 0);
  EXPECT_DOUBLE_EQ(ops.cost.engine_ns[kScalar], streaming_engine_ns(trn2(), Engine::Scalar, n));
  EXPECT_EQ(ops.cost.bytes, loops.cost.bytes);
  EXPECT_LT(ops.duration_ns, loops.duration_ns);
  // Ops that would cost more alone than the loops leave the loops' cost.
  FusedKernel cheap_loops;
  cheap_loops.loops = {Streaming{StreamingKernel::Elementwise, Engine::Vector, n}};
  cheap_loops.fused_ops = {Streaming{StreamingKernel::LayerNorm, Engine::Vector, n}};
  EXPECT_DOUBLE_EQ(time_of(trn2(), {cheap_loops, 4 * n}).cost.engine_ns[kVector],
                   streaming_engine_ns(trn2(), Engine::Vector, n));
}

TEST(Work, TransfersAreDmaTimeWithoutLaunchOverhead) {
  const uint64_t bytes = 1 << 24;
  const WorkTime copy = time_of(trn2(), {Copy{CopyKind::HostToDevice, bytes}, 0});
  EXPECT_DOUBLE_EQ(copy.duration_ns, copy_duration_ns(trn2(), CopyKind::HostToDevice, bytes));
  EXPECT_DOUBLE_EQ(copy.cost.engine_ns[kDma], copy.duration_ns);
  const WorkTime trip = time_of(trn2(), {HostRoundTrip{bytes, bytes / 2}, 0});
  EXPECT_DOUBLE_EQ(trip.duration_ns,
                   copy_duration_ns(trn2(), CopyKind::DeviceToHost, bytes) +
                       copy_duration_ns(trn2(), CopyKind::HostToDevice, bytes / 2));
  EXPECT_EQ(trip.cost.bytes, bytes + bytes / 2);
}

TEST(Work, CollectivesTakeTheirModelsTime) {
  const InstanceSpec& trn1 = find_instance("trn1.32xlarge");
  const std::vector<RankPlace> ranks{{0, 0}, {0, 1}, {0, 2}, {0, 3}};
  const WorkTime t = time_of(trn1, {CollectiveOp{Collective::AllReduce, 1 << 26, ranks}, 0});
  EXPECT_DOUBLE_EQ(t.duration_ns,
                   collective_cost(trn1, Collective::AllReduce, 1 << 26, ranks).duration_ns);
  for (double ns : t.cost.engine_ns) EXPECT_EQ(ns, 0);  // compute engines stay free
}

TEST(Work, ReadmeExample) {
  SystemConfig config;
  config.instance = "trn1.32xlarge";
  auto system = System::create(config);
  Queue& queue = system->device(0).queue(0);
  Work work{Matmul{1, 4096, 4096, 4096, Precision::BF16}, 3 * 4096 * 4096 * 2};
  auto t = time_of(system->instance(), work);
  queue.launch("matmul", t.cost, t.duration_ns, "4096^3 bf16");
  const double finished_ns = system->device(0).synchronize_ns();
  // Never faster than the peak: 2 * 4096^3 FLOPs at 2 x 128 x 128 x clock.
  EXPECT_GE(finished_ns, 2.0 * 4096 * 4096 * 4096 / peak_flops_per_ns(system->instance(),
                                                                         Precision::BF16));
  EXPECT_DOUBLE_EQ(finished_ns, t.duration_ns);
}

}  // namespace
}  // namespace trnsim
