// The cost model (cost.h) against the hardware it models: no op is ever predicted faster than
// the peak rates of the instance table (the Neuron architecture docs), large regular ops come
// close to them, precisions and instances scale as the table says, and launched costs reach the
// trace intact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trnsim/cost.h"
#include "trnsim/device.h"
#include "trnsim/instance.h"
#include "trnsim/queue.h"
#include "trnsim/work.h"

namespace trnsim {
namespace {

constexpr Precision kPrecisions[] = {Precision::FP8, Precision::BF16, Precision::FP32};

uint64_t element_bytes(Precision p) {
  switch (p) {
    case Precision::FP8: return 1;
    case Precision::BF16: return 2;
    case Precision::FP32: return 4;
  }
  return 4;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP8: return "fp8";
    case Precision::BF16: return "bf16";
    case Precision::FP32: return "fp32";
  }
  return "?";
}

struct MatmulShape {
  int64_t batch, m, k, n;
};

// Tiny, odd (one past a tile edge), skinny (matrix-vector), square and batched shapes.
const std::vector<MatmulShape> kShapes = {
    {1, 1, 1, 1},         {1, 3, 5, 7},          {1, 1, 4096, 1},        {1, 4096, 1, 4096},
    {1, 129, 257, 513},   {1, 127, 129, 511},    {1, 1000, 999, 1001},   {1, 128, 128, 512},
    {1, 4096, 4096, 4096}, {1, 8192, 1024, 8192}, {1, 16384, 16384, 64}, {8, 64, 64, 64},
    {16, 512, 512, 512},  {32, 1, 4096, 4096},   {4, 2048, 2048, 2048},
};

// HBM traffic of a matmul that reads both operands and writes the output once.
uint64_t matmul_bytes(const MatmulShape& s, Precision p) {
  return static_cast<uint64_t>(s.batch) *
         static_cast<uint64_t>(s.m * s.k + s.k * s.n + s.m * s.n) * element_bytes(p);
}

OpCost matmul(const InstanceSpec& inst, const MatmulShape& s, Precision p) {
  return matmul_cost(inst, s.batch, s.m, s.k, s.n, p, matmul_bytes(s, p));
}

std::string describe(const InstanceSpec& inst, const MatmulShape& s, Precision p) {
  return inst.name + " " + precision_name(p) + " " + std::to_string(s.batch) + "x[" +
         std::to_string(s.m) + "," + std::to_string(s.k) + "]@[" + std::to_string(s.k) + "," +
         std::to_string(s.n) + "]";
}

double tensor_ns(const OpCost& c) { return c.engine_ns[static_cast<int>(Engine::Tensor)]; }

// Peak rates ------------------------------------------------------------------------------------

// One elementwise pass of `engine` over `elements`, with `bytes` of HBM traffic, timed as the
// backend times it (through the work vocabulary).
OpCost streaming(const InstanceSpec& inst, Engine engine, uint64_t elements, uint64_t bytes,
                 Pass pass = Pass::OneInput, bool sixteen_bit = false) {
  const Streaming work{StreamingKernel::Elementwise, engine, elements, pass == Pass::TwoInput,
                       sixteen_bit};
  return time_of(inst, Work{work, bytes}).cost;
}

// A logical core's peak is 128 x 128 multiply-adds per TensorE cycle per physical core; FP32 at a
// quarter of that, FP8 at twice on NeuronCore-v3 (double row). The product pages' TFLOPS agree
// within 7% (Trn1 190 per chip, Trn2 667).
TEST(Cost, PeakFlopsFollowTheTensorEngineClock) {
  for (const auto& inst : instance_table()) {
    const double bf16 = 2.0 * 128 * 128 * inst.chip->tensor_ghz * inst.physical_cores_per_logical();
    EXPECT_DOUBLE_EQ(peak_flops_per_ns(inst, Precision::BF16), bf16) << inst.name;
    EXPECT_DOUBLE_EQ(peak_flops_per_ns(inst, Precision::FP32), bf16 / 4) << inst.name;
    const double fp8 = inst.chip->core_version == "NeuronCore-v3" ? 2 * bf16 : bf16;
    EXPECT_DOUBLE_EQ(peak_flops_per_ns(inst, Precision::FP8), fp8) << inst.name;
    const double documented = inst.core_bf16_tflops() * 1e3;
    EXPECT_NEAR(bf16 / documented, 1.0, 0.07) << inst.name;
  }
  EXPECT_NEAR(peak_flops_per_ns(find_instance("trn1.2xlarge"), Precision::BF16), 91750.4, 0.1);
}

// Trn1's DMA engines (16 x 17 B/ns) stream less than its HBM share; Trn2's (2 x 16 x 23 B/ns
// for an LNC=2 core) more, so there the HBM share is the limit.
TEST(Cost, StreamingBandwidthIsTheDmaEnginesOrTheHbmShare) {
  EXPECT_DOUBLE_EQ(find_instance("trn1.2xlarge").core_stream_gbps(), 272.0);
  EXPECT_DOUBLE_EQ(find_instance("trn1.32xlarge").core_stream_gbps(), 272.0);
  EXPECT_DOUBLE_EQ(find_instance("trn2.3xlarge").core_stream_gbps(), 2900.0 / 4);
  for (const auto& inst : instance_table()) {
    EXPECT_LE(inst.core_stream_gbps(), inst.core_hbm_gbps()) << inst.name;
  }
}

// Never faster than the hardware ---------------------------------------------------------------

TEST(Cost, MatmulNeverBeatsPeakFlopsOrHbmBandwidth) {
  for (const auto& inst : instance_table()) {
    for (const auto& s : kShapes) {
      for (Precision p : kPrecisions) {
        const OpCost c = matmul(inst, s, p);
        const std::string what = describe(inst, s, p);
        const double flops = 2.0 * s.batch * s.m * s.k * s.n;
        EXPECT_DOUBLE_EQ(c.flops, flops) << what;
        EXPECT_EQ(c.bytes, matmul_bytes(s, p)) << what;
        // The engine alone, and the op as a whole.
        EXPECT_GE(tensor_ns(c), flops / peak_flops_per_ns(inst, p)) << what;
        EXPECT_GE(c.duration_ns(), flops / peak_flops_per_ns(inst, p)) << what;
        EXPECT_GE(c.duration_ns(), static_cast<double>(c.bytes) / inst.core_hbm_gbps()) << what;
        EXPECT_GE(c.duration_ns(), kLaunchOverheadNs) << what;
        EXPECT_TRUE(std::isfinite(c.duration_ns())) << what;
      }
    }
  }
}

TEST(Cost, StreamingNeverBeatsEngineLanesOrHbmBandwidth) {
  const uint64_t sizes[] = {0, 1, 127, 128, 129, 4096, 1 << 20, uint64_t{1} << 28};
  for (const auto& inst : instance_table()) {
    for (Engine e : {Engine::Vector, Engine::Scalar, Engine::GpSimd}) {
      const double lanes_per_ns = kEngineLanes * engine_ghz(inst, e) *
                                  inst.physical_cores_per_logical();
      for (uint64_t elements : sizes) {
        for (Pass pass : {Pass::OneInput, Pass::TwoInput}) {
          for (bool sixteen_bit : {false, true}) {
            const uint64_t bytes = elements * 12;
            const OpCost c = streaming(inst, e, elements, bytes, pass, sixteen_bit);
            const std::string what =
                inst.name + " " + engine_name(e) + " " + std::to_string(elements) + " elements";
            // The fastest the hardware goes: 4 elements per lane per cycle (VectorE
            // performance mode), 1 elsewhere.
            const double fastest = e == Engine::Vector && inst.chip->vector_performance_mode ? 4 : 1;
            EXPECT_GE(c.engine_ns[static_cast<int>(e)], elements / lanes_per_ns / fastest) << what;
            EXPECT_GE(c.duration_ns(), static_cast<double>(bytes) / inst.core_hbm_gbps()) << what;
            EXPECT_GE(c.duration_ns(), kLaunchOverheadNs) << what;
            // Only the named engine is busy, but for the VectorE tensor-tensor pass that
            // follows a ScalarE pass with two streamed operands.
            const bool vector_follows = e == Engine::Scalar && pass == Pass::TwoInput;
            for (int other = 0; other < kEngineCount; ++other) {
              if (other == static_cast<int>(e)) continue;
              if (vector_follows && other == static_cast<int>(Engine::Vector)) continue;
              EXPECT_EQ(c.engine_ns[other], 0.0) << what;
            }
          }
        }
      }
    }
  }
}

TEST(Cost, DataMovementNeverBeatsHbmBandwidth) {
  for (const auto& inst : instance_table()) {
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, kMiB, kGiB}) {
      const double ns = time_of(inst, Work{Streaming{}, bytes}).duration_ns;
      EXPECT_GE(ns, bytes / inst.core_hbm_gbps()) << inst.name;
      EXPECT_GE(ns, kLaunchOverheadNs) << inst.name;
    }
  }
}

// Large regular ops approach the peak ---------------------------------------------------------

TEST(Cost, LargeBf16MatmulKeepsTensorEngineBusy) {
  // Full 128 x 128 stationary and 128 x 512 moving tiles: each MultiplyMoving is 512 cycles
  // and the stationary loads hide behind them, so TensorE runs at its peak (the op is then
  // bound by TensorE, not by the PSUM copies or HBM).
  const MatmulShape s{1, 4096, 4096, 4096};
  for (const auto& inst : instance_table()) {
    const OpCost c = matmul(inst, s, Precision::BF16);
    const double fraction = c.flops / tensor_ns(c) / peak_flops_per_ns(inst, Precision::BF16);
    EXPECT_GE(fraction, 0.99) << inst.name;
    EXPECT_LE(fraction, 1.0) << inst.name;
    EXPECT_DOUBLE_EQ(c.duration_ns(), kLaunchOverheadNs + tensor_ns(c)) << inst.name;
  }
}

TEST(Cost, LargeStreamingOpRunsAtTheCoresStreamingBandwidth) {
  // 1 GiB of HBM traffic: an fp32 binary op (12 bytes per element) and an fp32 unary op (8).
  const uint64_t bytes = kGiB;
  for (const auto& inst : instance_table()) {
    const double ideal = static_cast<double>(bytes) / inst.core_stream_gbps();
    for (Engine e : {Engine::Vector, Engine::Scalar, Engine::GpSimd}) {
      const OpCost c = streaming(inst, e, bytes / 8, bytes);
      EXPECT_NEAR(c.duration_ns() / ideal, 1.0, 0.03) << inst.name << " " << engine_name(e);
    }
    EXPECT_NEAR(time_of(inst, Work{Streaming{}, bytes}).duration_ns / ideal, 1.0, 0.03)
        << inst.name;
  }
}

// Precisions ----------------------------------------------------------------------------------

TEST(Cost, Fp32MatmulIsFourTimesSlowerThanBf16OnTensorEngine) {
  const MatmulShape s{1, 4096, 4096, 4096};
  for (const auto& inst : instance_table()) {
    const double ratio =
        tensor_ns(matmul(inst, s, Precision::FP32)) / tensor_ns(matmul(inst, s, Precision::BF16));
    EXPECT_NEAR(ratio, 4.0, 0.01) << inst.name;
  }
}

TEST(Cost, Fp8MatmulOnTrn2IsTwiceBf16) {
  const MatmulShape s{1, 4096, 4096, 4096};
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  EXPECT_NEAR(tensor_ns(matmul(trn2, s, Precision::BF16)) /
                  tensor_ns(matmul(trn2, s, Precision::FP8)),
              2.0, 0.01);
  // Trainium1 runs FP8 at its BF16 rate.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  EXPECT_NEAR(tensor_ns(matmul(trn1, s, Precision::FP8)) /
                  tensor_ns(matmul(trn1, s, Precision::BF16)),
              1.0, 1e-9);
}

// Instances -----------------------------------------------------------------------------------

TEST(Cost, Trn2CoreIsFasterThanTrn1CoreByItsClocksAndBandwidth) {
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  const MatmulShape s{1, 4096, 4096, 4096};
  const double mm = tensor_ns(matmul(trn1, s, Precision::BF16)) /
                    tensor_ns(matmul(trn2, s, Precision::BF16));
  EXPECT_NEAR(mm, (2.4 * 2) / 2.8, 0.01);  // two physical cores at 2.4 GHz vs one at 2.8
  const double stream = streaming(trn1, Engine::Vector, kGiB / 12, kGiB).duration_ns() /
                        streaming(trn2, Engine::Vector, kGiB / 12, kGiB).duration_ns();
  EXPECT_NEAR(stream / (725.0 / 272.0), 1.0, 0.05) << stream;
}

// TensorE instructions ----------------------------------------------------------------------------

double cycles(const InstanceSpec& inst, const OpCost& c) {
  return tensor_ns(c) * inst.chip->tensor_ghz * inst.physical_cores_per_logical() -
         kArrayFillCycles;
}

TEST(TensorEngine, MovingTileCostsMaxOfItsColumnsAnd64Cycles) {
  // NKI architecture guide: a MultiplyMoving's initiation interval is max(N, 64) cycles.
  const InstanceSpec& inst = find_instance("trn1.2xlarge");
  const auto c = [&](int64_t m, int64_t k, int64_t n) {
    return cycles(inst, matmul(inst, {1, m, k, n}, Precision::BF16));
  };
  EXPECT_NEAR(c(128, 128, 512), 512, 1e-6);
  // A 4096-row output laid out as C^T: 8 moving tiles of 512 columns per contraction tile.
  EXPECT_NEAR(c(4096, 128, 128), 4096, 1e-6);
  // 64 columns or fewer cost the 64-cycle minimum; both layouts of a 32x32 output pay it.
  EXPECT_NEAR(c(32, 128, 32), 64, 1e-6);
  EXPECT_NEAR(c(1, 128, 1), 64, 1e-6);
  // One column past a PSUM bank pays the minimum once more, not a whole 512-column pass.
  EXPECT_NEAR(c(128, 128, 513), 512 + 64, 1e-6);
  // One contraction row past a tile is a second instruction.
  EXPECT_NEAR(c(128, 129, 512), 2 * 512, 1e-6);
  // 129 output rows: as C (two stationary tiles, 2 x 512 cycles) or as C^T (four stationary
  // tiles of 128 of the 512 columns, each moving 129 columns: 4 x 129); the kernel takes C^T.
  EXPECT_NEAR(c(129, 128, 512), 4 * 129, 1e-6);
}

TEST(TensorEngine, TheShortOperandMoves) {
  // A matrix-vector product keeps the matrix stationary and moves the vector: 64 cycles per
  // 128 x 128 block of the matrix (the MM minimum; fast LoadStationary takes 32), not a pass
  // of 128 cycles per block as with the vector stationary.
  const InstanceSpec& inst = find_instance("trn1.2xlarge");
  const double mv = cycles(inst, matmul(inst, {1, 4096, 4096, 1}, Precision::BF16));
  EXPECT_NEAR(mv, 32 * 32 * 64, 1e-6);
  const double vm = cycles(inst, matmul(inst, {1, 1, 4096, 4096}, Precision::BF16));
  EXPECT_NEAR(vm, mv, 1e-6);
}

TEST(TensorEngine, PsumResultsLeaveThroughVectorAndScalarEngines) {
  // K = 128 makes one 512-cycle instruction per output tile on TensorE, while copying that
  // tile out of PSUM takes ~512 cycles of a slower engine: such a matmul is bound by the copies.
  const InstanceSpec& inst = find_instance("trn1.2xlarge");
  const OpCost c = matmul(inst, {1, 4096, 128, 4096}, Precision::BF16);
  const double vector = c.engine_ns[static_cast<int>(Engine::Vector)];
  const double scalar = c.engine_ns[static_cast<int>(Engine::Scalar)];
  EXPECT_GT(vector, tensor_ns(c));
  EXPECT_NEAR(vector, streaming_engine_ns(inst, Engine::Vector, 4096 * 4096 / 2), 1e-6);
  EXPECT_NEAR(scalar, streaming_engine_ns(inst, Engine::Scalar, 4096 * 4096 / 2), 1e-6);
}

// Streaming engines -----------------------------------------------------------------------------

TEST(StreamingEngine, TwoInputVectorInstructionsTakeTwiceAsLongOnNeuronCoreV2) {
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t n = 128 * 2048 * 64;
  const double one = streaming_engine_ns(trn1, Engine::Vector, n, Pass::OneInput);
  const double two = streaming_engine_ns(trn1, Engine::Vector, n, Pass::TwoInput);
  // 2048 elements per lane and instruction, plus 100 cycles of static overhead each.
  EXPECT_NEAR(one, 64 * (2048 + 100) / 1.12, 1e-6);
  EXPECT_NEAR(two, 64 * (2 * 2048 + 100) / 1.12, 1e-6);
  // 16-bit operands change nothing on NeuronCore-v2 ...
  EXPECT_DOUBLE_EQ(streaming_engine_ns(trn1, Engine::Vector, n, Pass::TwoInput, true), two);
  // ... while NeuronCore-v3's performance mode runs them at 4x (one input) and 2x (two).
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  const double per_lane = 2048.0 * 64 / 2;  // two physical cores
  EXPECT_NEAR(streaming_engine_ns(trn2, Engine::Vector, n, Pass::OneInput, true),
              (per_lane / 4 + 32 * 100) / 0.96, 1e-6);
  EXPECT_NEAR(streaming_engine_ns(trn2, Engine::Vector, n, Pass::TwoInput, true),
              (per_lane + 32 * 100) / 0.96, 1e-6);
  // ScalarE has no two-input instructions: the kind changes nothing there.
  EXPECT_DOUBLE_EQ(streaming_engine_ns(trn1, Engine::Scalar, n, Pass::TwoInput),
                   streaming_engine_ns(trn1, Engine::Scalar, n, Pass::OneInput));
}

TEST(StreamingEngine, TinyInstructionsPayTheStaticOverhead) {
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  // One element per partition: about 101 cycles, not 1 (NKI performance guide, "Opt #5").
  EXPECT_NEAR(streaming_engine_ns(trn1, Engine::Scalar, 128), 101 / 1.4, 1e-6);
  EXPECT_EQ(streaming_engine_ns(trn1, Engine::Scalar, 0), 0.0);
}

TEST(Cost, EmptyMatmulCostsTheLaunch) {
  const InstanceSpec& inst = find_instance("trn2.3xlarge");
  const OpCost c = matmul_cost(inst, 1, 0, 64, 64, Precision::BF16, 0);
  EXPECT_EQ(c.flops, 0.0);
  EXPECT_DOUBLE_EQ(c.duration_ns(), kLaunchOverheadNs);
}

TEST(Cost, DurationIsLaunchPlusBusiestEngineOrHbm) {
  OpCost c;
  c.engine_ns[static_cast<int>(Engine::Vector)] = 300;
  c.engine_ns[static_cast<int>(Engine::Tensor)] = 700;
  c.hbm_ns = 500;
  EXPECT_DOUBLE_EQ(c.duration_ns(), kLaunchOverheadNs + 700);
  c.hbm_ns = 900;
  EXPECT_DOUBLE_EQ(c.duration_ns(), kLaunchOverheadNs + 900);
}

TEST(Cost, EngineNames) {
  EXPECT_STREQ(engine_name(Engine::Tensor), "TensorE");
  EXPECT_STREQ(engine_name(Engine::Vector), "VectorE");
  EXPECT_STREQ(engine_name(Engine::Scalar), "ScalarE");
  EXPECT_STREQ(engine_name(Engine::GpSimd), "GpSimdE");
  EXPECT_STREQ(engine_name(Engine::Dma), "DMA");
  EXPECT_EQ(kEngineCount, 5);
}

// Costs on queues -------------------------------------------------------------------------------

// Turns the process-wide tracing switch on or off for a scope and restores it afterwards.
class GlobalTracing {
 public:
  explicit GlobalTracing(bool on) : before_(tracing_enabled()) { set_tracing_enabled(on); }
  ~GlobalTracing() { set_tracing_enabled(before_); }

 private:
  bool before_;
};

TEST(CostOnQueue, GlobalTracingRecordsTheCost) {
  const InstanceSpec& inst = find_instance("trn2.3xlarge");
  const OpCost c = matmul(inst, {2, 300, 200, 100}, Precision::BF16);
  Queue q(3, 7);
  q.launch("before", 10.0);
  {
    GlobalTracing tracing(true);
    EXPECT_TRUE(tracing_enabled());
    EXPECT_DOUBLE_EQ(q.launch("aten::bmm", c, "BFloat16[2,300,200], BFloat16[2,200,100]"),
                     10.0 + c.duration_ns());
  }
  const auto trace = q.take_trace();
  ASSERT_EQ(trace.size(), 1u);
  const TraceRecord& r = trace[0];
  EXPECT_EQ(r.name, "aten::bmm");
  EXPECT_EQ(r.device, 3);
  EXPECT_EQ(r.queue, 7);
  EXPECT_DOUBLE_EQ(r.start_ns, 10.0);
  EXPECT_DOUBLE_EQ(r.duration_ns, c.duration_ns());
  for (int e = 0; e < kEngineCount; ++e) EXPECT_DOUBLE_EQ(r.engine_ns[e], c.engine_ns[e]) << e;
  EXPECT_GT(r.engine_ns[static_cast<int>(Engine::Tensor)], 0.0);
  EXPECT_DOUBLE_EQ(r.flops, 2.0 * 2 * 300 * 200 * 100);
  EXPECT_EQ(r.bytes, c.bytes);
  EXPECT_EQ(r.detail, "BFloat16[2,300,200], BFloat16[2,200,100]");
}

TEST(CostOnQueue, NothingIsRecordedWhenTracingIsOff) {
  GlobalTracing tracing(false);
  const InstanceSpec& inst = find_instance("trn1.2xlarge");
  Queue q(0, 0);
  const OpCost c = streaming(inst, Engine::Vector, 1 << 20, 12 << 20);
  EXPECT_DOUBLE_EQ(q.launch("aten::add.Tensor", c, "detail"), c.duration_ns());
  q.launch("plain", 5.0);
  EXPECT_TRUE(q.take_trace().empty());
  EXPECT_DOUBLE_EQ(q.now_ns(), c.duration_ns() + 5.0);
}

TEST(CostOnQueue, TracedOpsAreOrderedAndDoNotOverlap) {
  GlobalTracing tracing(true);
  const InstanceSpec& inst = find_instance("trn2.3xlarge");
  Queue q(0, 1);
  std::vector<OpCost> costs;
  for (const auto& s : kShapes) costs.push_back(matmul(inst, s, Precision::BF16));
  costs.push_back(streaming(inst, Engine::Scalar, 1000, 8000));
  for (size_t i = 0; i < costs.size(); ++i) {
    q.launch("op" + std::to_string(i), costs[i]);
    if (i == 3) q.wait_until(q.now_ns() + 1e6);  // a gap, as after an event wait
  }
  const auto trace = q.take_trace();
  ASSERT_EQ(trace.size(), costs.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i].name, "op" + std::to_string(i));
    EXPECT_DOUBLE_EQ(trace[i].duration_ns, costs[i].duration_ns());
    if (i > 0) {
      EXPECT_LE(trace[i - 1].start_ns + trace[i - 1].duration_ns, trace[i].start_ns) << i;
    }
  }
  EXPECT_DOUBLE_EQ(trace.back().start_ns + trace.back().duration_ns, q.now_ns());
}

// Note [Shared engines]: queues of one core share its engines and HBM share.
TEST(CostOnQueue, QueuesOfOneCoreShareItsEngines) {
  const InstanceSpec& inst = find_instance("trn2.3xlarge");
  const OpCost c = matmul(inst, {1, 1024, 1024, 1024}, Precision::BF16);
  const double d = c.duration_ns();
  double busiest = c.hbm_ns;  // when the first matmul frees everything it uses
  for (double ns : c.engine_ns) busiest = std::max(busiest, ns);
  const double tensor = c.engine_ns[static_cast<int>(Engine::Tensor)];
  ASSERT_GT(tensor, 0.0);
  {
    // Two TensorE-bound matmuls on two queues: the second waits for TensorE.
    Device dev(0, 0, inst);
    dev.queue(1).launch("mm", c);
    dev.queue(2).launch("mm", c);
    EXPECT_DOUBLE_EQ(dev.queue(1).now_ns(), d);
    EXPECT_DOUBLE_EQ(dev.queue(2).now_ns(), busiest + d);
    // TensorE is busy 2 x tensor within the span, never more than the span.
    EXPECT_LE(2 * tensor, dev.synchronize_ns());
  }
  {
    // Work on different engines overlaps: a VectorE-only op beside the matmul.
    OpCost vector_only;
    vector_only.engine_ns[static_cast<int>(Engine::Vector)] = 500;
    OpCost matmul_only;
    matmul_only.engine_ns[static_cast<int>(Engine::Tensor)] = 1000;
    Device dev(0, 0, inst);
    dev.queue(1).launch("mm", matmul_only, 1000, {});
    dev.queue(2).launch("vec", vector_only, 500, {});
    EXPECT_DOUBLE_EQ(dev.queue(2).now_ns(), 500);
    EXPECT_DOUBLE_EQ(dev.synchronize_ns(), 1000);
  }
  {
    // Other cores have engines of their own.
    Device a(0, 0, inst), b(1, 1, inst);
    a.queue(1).launch("mm", c);
    b.queue(1).launch("mm", c);
    EXPECT_DOUBLE_EQ(b.queue(1).now_ns(), d);
  }
  {
    Device dev(0, 0, inst);
    dev.queue(0).launch("mm", c);
    dev.queue(0).launch("mm", c);
    EXPECT_DOUBLE_EQ(dev.synchronize_ns(), 2 * d);
  }
}

}  // namespace
}  // namespace trnsim
