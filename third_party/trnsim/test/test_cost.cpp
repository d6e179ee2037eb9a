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

// A logical core's peak is the chip's rate (architecture table) over its logical cores.
TEST(Cost, PeakFlopsFollowTheInstanceTable) {
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  EXPECT_DOUBLE_EQ(peak_flops_per_ns(trn1, Precision::BF16), 190e3 / 2);
  EXPECT_DOUBLE_EQ(peak_flops_per_ns(trn1, Precision::FP32), 47.5e3 / 2);
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  EXPECT_DOUBLE_EQ(peak_flops_per_ns(trn2, Precision::BF16), 667e3 / 4);
  EXPECT_DOUBLE_EQ(peak_flops_per_ns(trn2, Precision::FP32), 181e3 / 4);
  EXPECT_DOUBLE_EQ(peak_flops_per_ns(trn2, Precision::FP8), 1299e3 / 4);
  EXPECT_DOUBLE_EQ(trn1.core_hbm_gbps(), 820.0 / 2);
  EXPECT_DOUBLE_EQ(trn2.core_hbm_gbps(), 2900.0 / 4);
  // The large instances have the same cores as the small ones.
  for (const auto& inst : instance_table()) {
    const InstanceSpec& small = inst.chip == trn1.chip ? trn1 : trn2;
    for (Precision p : kPrecisions) {
      EXPECT_DOUBLE_EQ(peak_flops_per_ns(inst, p), peak_flops_per_ns(small, p)) << inst.name;
    }
    EXPECT_DOUBLE_EQ(inst.core_hbm_gbps(), small.core_hbm_gbps()) << inst.name;
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
      const double ghz = e == Engine::Vector   ? inst.chip->vector_ghz
                         : e == Engine::Scalar ? inst.chip->scalar_ghz
                                               : inst.chip->gpsimd_ghz;
      const double lanes_per_ns = kEngineLanes * ghz * inst.physical_cores_per_logical();
      for (uint64_t elements : sizes) {
        // A 1-byte copy, an fp32 unary op and an fp32 binary op.
        for (uint64_t bytes_per_element : {2, 8, 12}) {
          const uint64_t bytes = elements * bytes_per_element;
          const OpCost c = streaming_cost(inst, e, elements, bytes);
          const std::string what =
              inst.name + " " + engine_name(e) + " " + std::to_string(elements) + " elements";
          EXPECT_GE(c.engine_ns[static_cast<int>(e)], elements / lanes_per_ns) << what;
          EXPECT_GE(c.duration_ns(), static_cast<double>(bytes) / inst.core_hbm_gbps()) << what;
          EXPECT_GE(c.duration_ns(), kLaunchOverheadNs) << what;
          // Only the named engine is busy.
          for (int other = 0; other < kEngineCount; ++other) {
            if (other != static_cast<int>(e)) EXPECT_EQ(c.engine_ns[other], 0.0) << what;
          }
        }
      }
    }
  }
}

TEST(Cost, DataMovementNeverBeatsHbmBandwidth) {
  for (const auto& inst : instance_table()) {
    for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, kMiB, kGiB}) {
      EXPECT_GE(streaming_duration_ns(inst, bytes), bytes / inst.core_hbm_gbps()) << inst.name;
      EXPECT_GE(streaming_duration_ns(inst, bytes), kLaunchOverheadNs) << inst.name;
    }
  }
}

// Large regular ops approach the peak ---------------------------------------------------------

TEST(Cost, LargeBf16MatmulReachesSeventyPercentOfPeak) {
  const MatmulShape s{1, 4096, 4096, 4096};
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  const OpCost c = matmul(trn2, s, Precision::BF16);
  const double achieved = c.flops / c.duration_ns();  // FLOP/ns
  const double fraction = achieved / peak_flops_per_ns(trn2, Precision::BF16);
  EXPECT_GE(fraction, 0.70) << "4096^3 bf16 on trn2.3xlarge: " << c.duration_ns() << " ns";
  EXPECT_LE(fraction, 1.0);
  // And on every other instance too.
  for (const auto& inst : instance_table()) {
    const OpCost ci = matmul(inst, s, Precision::BF16);
    EXPECT_GE(ci.flops / ci.duration_ns() / peak_flops_per_ns(inst, Precision::BF16), 0.70)
        << inst.name;
  }
}

TEST(Cost, LargeStreamingOpRunsAtHbmBandwidth) {
  // 1 GiB of HBM traffic: an fp32 binary op (12 bytes per element) and an fp32 unary op (8).
  const uint64_t bytes = kGiB;
  for (const auto& inst : instance_table()) {
    const double ideal = static_cast<double>(bytes) / inst.core_hbm_gbps();
    for (Engine e : {Engine::Vector, Engine::Scalar, Engine::GpSimd}) {
      for (uint64_t bytes_per_element : {8, 12}) {
        const OpCost c = streaming_cost(inst, e, bytes / bytes_per_element, bytes);
        EXPECT_NEAR(c.duration_ns() / ideal, 1.0, 0.03)
            << inst.name << " " << engine_name(e) << " " << bytes_per_element << " B/element";
      }
    }
    EXPECT_NEAR(streaming_duration_ns(inst, bytes) / ideal, 1.0, 0.03) << inst.name;
  }
}

// Precisions ----------------------------------------------------------------------------------

TEST(Cost, Fp32MatmulIsAboutFourTimesSlowerThanBf16) {
  // The table: Trn1 190 / 47.5 = 4, Trn2 667 / 181 = 3.7.
  const MatmulShape s{1, 4096, 4096, 4096};
  for (const auto& inst : instance_table()) {
    const double ratio = matmul(inst, s, Precision::FP32).duration_ns() /
                         matmul(inst, s, Precision::BF16).duration_ns();
    EXPECT_GE(ratio, 3.0) << inst.name;
    EXPECT_LE(ratio, 4.5) << inst.name;
    const double table = inst.chip->bf16_tflops / inst.chip->fp32_tflops;
    EXPECT_NEAR(ratio / table, 1.0, 0.05) << inst.name << " ratio " << ratio;
  }
}

TEST(Cost, Fp8MatmulOnTrn2IsTwiceBf16) {
  const MatmulShape s{1, 4096, 4096, 4096};
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  const double speedup = matmul(trn2, s, Precision::BF16).duration_ns() /
                         matmul(trn2, s, Precision::FP8).duration_ns();
  EXPECT_GE(speedup, 1.8);
  EXPECT_LE(speedup, 2.05);  // 1299 / 667 = 1.95
  // Trainium1 runs FP8 at its BF16 rate.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  EXPECT_NEAR(tensor_ns(matmul(trn1, s, Precision::FP8)) /
                  tensor_ns(matmul(trn1, s, Precision::BF16)),
              1.0, 1e-9);
}

// Instances -----------------------------------------------------------------------------------

TEST(Cost, Trn2CoreIsFasterThanTrn1CoreAsTheTableSays) {
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const InstanceSpec& trn2 = find_instance("trn2.3xlarge");
  const MatmulShape s{1, 4096, 4096, 4096};
  const double mm = matmul(trn1, s, Precision::BF16).duration_ns() /
                    matmul(trn2, s, Precision::BF16).duration_ns();
  EXPECT_NEAR(mm / ((667.0 / 4) / (190.0 / 2)), 1.0, 0.05) << mm;
  const double stream = streaming_cost(trn1, Engine::Vector, kGiB / 12, kGiB).duration_ns() /
                        streaming_cost(trn2, Engine::Vector, kGiB / 12, kGiB).duration_ns();
  EXPECT_NEAR(stream / ((2900.0 / 4) / (820.0 / 2)), 1.0, 0.05) << stream;
}

// Tiling --------------------------------------------------------------------------------------

TEST(Cost, PaddedTilesCostAsMuchAsFullOnes) {
  // TensorE runs ceil(M/128) x ceil(K/128) x ceil(N/512) full tiles: one row, column or
  // contraction step past a tile edge pays for a whole tile.
  const InstanceSpec& inst = find_instance("trn2.3xlarge");
  const auto t = [&](int64_t m, int64_t k, int64_t n) {
    return tensor_ns(matmul(inst, {1, m, k, n}, Precision::BF16));
  };
  EXPECT_DOUBLE_EQ(t(129, 4096, 4096), t(256, 4096, 4096));
  EXPECT_DOUBLE_EQ(t(4096, 129, 4096), t(4096, 256, 4096));
  EXPECT_DOUBLE_EQ(t(4096, 4096, 513), t(4096, 4096, 1024));
  EXPECT_DOUBLE_EQ(t(1, 1, 1), t(128, 128, 512));
  // ... and about twice what the full tile below it costs (the fill is per output tile).
  EXPECT_NEAR(t(129, 4096, 4096) / t(128, 4096, 4096), 2.0, 0.02);
  EXPECT_NEAR(t(4096, 4096, 513) / t(4096, 4096, 512), 2.0, 0.02);
  // The whole op: M=129 is within a few % of M=256 (only its HBM traffic is smaller).
  const auto d = [&](int64_t m) {
    return matmul(inst, {1, m, 4096, 4096}, Precision::BF16).duration_ns();
  };
  EXPECT_NEAR(d(129) / d(256), 1.0, 0.05);
  // (M=128 itself is bound by reading the 32 MiB weight from HBM, not by TensorE.)
  EXPECT_GE(d(129), d(128));
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
  const OpCost c = streaming_cost(inst, Engine::Vector, 1 << 20, 12 << 20);
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
  costs.push_back(streaming_cost(inst, Engine::Scalar, 1000, 8000));
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
