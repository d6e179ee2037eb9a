// The engine scheduler (schedule.h): overlap across engines, program order on one engine,
// dependencies by buffer region, HBM shared by DMA transfers, tiled pipelines, and an op alone
// scheduled in exactly time_of()'s duration. Expectations are computed by hand.
#include <gtest/gtest.h>

#include <cstdint>

#include "trnsim/trnsim.h"

namespace trnsim {
namespace {

const InstanceSpec& trn2() { return find_instance("trn2.3xlarge"); }

Instruction on(Engine engine, double ns, std::vector<Region> reads = {},
               std::vector<Region> writes = {}) {
  Instruction i;
  i.engine = engine;
  i.duration_ns = ns;
  i.reads = std::move(reads);
  i.writes = std::move(writes);
  return i;
}

Instruction transfer(int queue, uint64_t bytes, std::vector<Region> reads = {},
                     std::vector<Region> writes = {}) {
  Instruction i;
  i.engine = Engine::Dma;
  i.queue = queue;
  i.bytes = bytes;
  i.reads = std::move(reads);
  i.writes = std::move(writes);
  return i;
}

Region bytes(uint64_t begin, uint64_t end) { return {0, begin, end}; }

TEST(Schedule, IndependentInstructionsOnTwoEnginesOverlap) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Tensor, 100));
  s.add(on(Engine::Vector, 60));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.makespan_ns, 100);
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 0);
  EXPECT_DOUBLE_EQ(r.busy_ns[static_cast<int>(Engine::Tensor)], 100);
  EXPECT_DOUBLE_EQ(r.utilization(Engine::Vector), 0.6);
}

TEST(Schedule, InstructionsSharingAPortTakeItInProgramOrder) {
  Schedule s(trn2(), 1);
  Instruction vector = on(Engine::Vector, 60), gpsimd = on(Engine::GpSimd, 40);
  vector.ports = gpsimd.ports = 1;
  Instruction scalar = on(Engine::Scalar, 30);
  scalar.ports = 2;  // another port: runs alongside
  s.add(gpsimd);
  s.add(vector);
  s.add(scalar);
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[0].start_ns, 0);  // first in program order takes the port
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 40);
  EXPECT_DOUBLE_EQ(r.times[2].start_ns, 0);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 100);
}

TEST(Schedule, OneEngineRunsItsStreamInProgramOrder) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Vector, 60));
  s.add(on(Engine::Vector, 40));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 60);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 100);
  EXPECT_EQ(s.track(Engine::Vector), (std::vector<size_t>{0, 1}));
}

TEST(Schedule, ReadAfterWriteWaitsForTheWriter) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Vector, 70, {}, {bytes(0, 100)}));
  s.add(on(Engine::Scalar, 10, {bytes(50, 60)}));
  s.add(on(Engine::GpSimd, 10, {bytes(100, 200)}));  // past the written bytes: no wait
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 70);
  EXPECT_DOUBLE_EQ(r.times[2].start_ns, 0);
  EXPECT_EQ(s.dependencies(1), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(s.dependencies(2).empty());
}

TEST(Schedule, WriteAfterReadWaitsForTheReader) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Tensor, 100, {bytes(0, 64)}));
  s.add(on(Engine::Vector, 30, {}, {bytes(32, 48)}));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 100);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 130);
}

TEST(Schedule, WriteAfterWriteWaitsForTheEarlierWriter) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Tensor, 100, {}, {bytes(0, 64)}));
  s.add(on(Engine::Scalar, 10, {}, {bytes(0, 64)}));
  // A reader after both waits for the last writer only (which itself waited for the first).
  s.add(on(Engine::Vector, 5, {bytes(0, 64)}));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 100);
  EXPECT_EQ(s.dependencies(2), (std::vector<uint32_t>{1}));
  EXPECT_DOUBLE_EQ(r.times[2].start_ns, 110);
}

TEST(Schedule, PartiallyOverlappingRegionsWaitForEveryWriterTheyTouch) {
  Schedule s(trn2(), 1);
  s.add(on(Engine::Tensor, 50, {}, {bytes(0, 100)}));
  s.add(on(Engine::Vector, 80, {}, {bytes(100, 200)}));
  s.add(on(Engine::Scalar, 10, {bytes(90, 110)}));  // straddles both writes
  s.add(on(Engine::GpSimd, 10, {bytes(0, 10)}));    // the first write only
  // A write over the middle of the first region, then a read of its untouched head.
  s.add(on(Engine::Tensor, 20, {}, {bytes(40, 60)}));
  s.add(on(Engine::Vector, 5, {bytes(0, 40)}));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[2].start_ns, 80);
  EXPECT_DOUBLE_EQ(r.times[3].start_ns, 50);
  EXPECT_EQ(s.dependencies(5), (std::vector<uint32_t>{0}));
  // Instruction 4 overwrites [40, 60), which no reader touched: it waits for the writer 0
  // (WAW) only.
  EXPECT_EQ(s.dependencies(4), (std::vector<uint32_t>{0}));
  EXPECT_DOUBLE_EQ(r.times[4].start_ns, 50);
}

TEST(Schedule, InstructionsOfOneGroupDoNotWaitForEachOther) {
  Schedule s(trn2(), 1);
  const uint64_t g = s.new_group();
  Instruction a = on(Engine::Vector, 40, {bytes(0, 8)}, {bytes(8, 16)});
  Instruction b = on(Engine::Scalar, 60, {bytes(0, 8)}, {bytes(8, 16)});
  a.group = b.group = g;
  s.add(a);
  s.add(b);
  // A reader of the group's output waits for both of its writers.
  s.add(on(Engine::GpSimd, 1, {bytes(8, 16)}));
  const ScheduleResult r = s.run();
  EXPECT_DOUBLE_EQ(r.times[1].start_ns, 0);
  EXPECT_EQ(s.dependencies(2), (std::vector<uint32_t>{0, 1}));
  EXPECT_DOUBLE_EQ(r.times[2].start_ns, 60);
}

TEST(Schedule, DmaTransfersInFlightShareTheHbmStream) {
  const double bw = trn2().core_stream_gbps();  // bytes per ns
  const uint64_t b = 1 << 20;
  {
    Schedule alone(trn2(), 2);
    alone.add(transfer(0, b));
    EXPECT_NEAR(alone.run().makespan_ns, b / bw, 1e-6);
  }
  // b and 3b together: both at bw / 2 until the first ends (each has moved b, at 2b / bw);
  // the rest, 2b, at the full bw: 4b / bw in all, the total over the bandwidth.
  Schedule s(trn2(), 2);
  s.add(transfer(0, b));
  s.add(transfer(1, 3 * b));
  const ScheduleResult r = s.run();
  EXPECT_NEAR(r.times[0].end_ns, 2 * b / bw, 1e-6);
  EXPECT_NEAR(r.times[1].end_ns, 4 * b / bw, 1e-6);
  EXPECT_NEAR(r.dma_queue_busy_ns[1], 4 * b / bw, 1e-6);
  EXPECT_NEAR(r.busy_ns[static_cast<int>(Engine::Dma)], 4 * b / bw, 1e-6);
  // Two transfers on one queue run one after the other, each at the full stream.
  Schedule one_queue(trn2(), 2);
  one_queue.add(transfer(0, b));
  one_queue.add(transfer(0, b));
  const ScheduleResult q = one_queue.run();
  EXPECT_NEAR(q.times[0].end_ns, b / bw, 1e-6);
  EXPECT_NEAR(q.times[1].end_ns, 2 * b / bw, 1e-6);
}

TEST(Schedule, ACappedTransferLeavesTheRestOfTheStreamToTheOthers) {
  const double bw = trn2().core_stream_gbps();  // bytes per ns
  const uint64_t b = 1 << 20;
  // A transfer capped at a tenth of the stream (under the equal half) moves at its cap; the
  // other gets the rest until the capped one ends, then all of it.
  Schedule s(trn2(), 2);
  Instruction capped = transfer(0, b);
  capped.max_rate = bw / 10;
  s.add(capped);
  s.add(transfer(1, 9 * b));
  const ScheduleResult r = s.run();
  EXPECT_NEAR(r.times[0].end_ns, 10 * b / bw, 1e-6);
  EXPECT_NEAR(r.times[1].end_ns, 10 * b / bw, 1e-6);  // 9b at 0.9 bw
  // A cap above the equal share changes nothing.
  Schedule loose(trn2(), 2);
  Instruction high = transfer(0, b);
  high.max_rate = bw;
  loose.add(high);
  loose.add(transfer(1, b));
  EXPECT_NEAR(loose.run().makespan_ns, 2 * b / bw, 1e-6);
}

TEST(Schedule, TransfersTooShortForTheClockStillFinish) {
  // At 1e15 ns a double resolves about 0.1 ns; transfers of a few bytes take far less. They
  // finish (at the clock's resolution) instead of stalling the simulation.
  Schedule s(trn2(), 2);
  s.add(on(Engine::Tensor, 1e15, {}, {bytes(0, 8)}));
  s.add(transfer(0, 1, {bytes(0, 8)}));
  s.add(transfer(1, 3, {bytes(0, 8)}));
  const ScheduleResult r = s.run();
  EXPECT_NEAR(r.makespan_ns, 1e15, 1.0);
  EXPECT_LE(r.times[1].end_ns, r.times[2].end_ns);
}

TEST(Schedule, TiledProducerConsumerPipelines) {
  // T tiles through three stages: a DMA load (L = b / bw; one queue, so one at a time, alone on
  // HBM), a VectorE pass (v) and a ScalarE pass (a), each tile reading its predecessor's
  // output. A flow shop of identical jobs: L + v + a + (T - 1) * max(L, v, a).
  const double bw = trn2().core_stream_gbps();
  const uint64_t b = 64 * 1024;
  const double load = b / bw, v = 30, a = 50;
  const int tiles = 6;
  Schedule s(trn2(), 1);
  for (int i = 0; i < tiles; ++i) {
    const uint64_t base = 1000 * static_cast<uint64_t>(i);
    s.add(transfer(0, b, {bytes(1'000'000 + base, 1'000'000 + base + 100)},
                   {bytes(base, base + 100)}));
    s.add(on(Engine::Vector, v, {bytes(base, base + 100)}, {bytes(base + 100, base + 200)}));
    s.add(on(Engine::Scalar, a, {bytes(base + 100, base + 200)}, {bytes(base + 200, base + 300)}));
  }
  const double slowest = std::max({load, v, a});
  EXPECT_NEAR(s.run().makespan_ns, load + v + a + (tiles - 1) * slowest, 1e-6);
}

TEST(Schedule, BufferReuseSerialisesTiles) {
  // Two tiles share one buffer: the second tile's load (a write of the buffer) waits for the
  // first tile's pass that reads it (WAR), so nothing overlaps: 2 * (10 + 40).
  Schedule s(trn2(), 1);
  for (int i = 0; i < 2; ++i) {
    s.add(on(Engine::GpSimd, 10, {}, {bytes(0, 64)}));
    s.add(on(Engine::Vector, 40, {bytes(0, 64)}, {bytes(1000 + 64 * i, 1064 + 64 * i)}));
  }
  EXPECT_DOUBLE_EQ(s.run().makespan_ns, 100);
}

TEST(Schedule, AnOpAloneTakesItsTimeOf) {
  // An eager op is a one-op schedule: its instructions scheduled alone take exactly time_of()'s
  // duration less the launch overhead, tiled or not.
  const uint64_t n = 1 << 22;
  const std::vector<Work> works = {
      {Matmul{1, 2048, 1024, 4096, Precision::BF16}, (2048 * 1024 + 1024 * 4096 + 2048 * 4096) * 2},
      {Matmul{8, 128, 64, 128, Precision::FP32}, 8 * (128 * 64 * 2 + 128 * 128) * 4},
      {Streaming{StreamingKernel::Softmax, Engine::Vector, n}, 8 * n},
      {Streaming{StreamingKernel::Elementwise, Engine::Vector, n, true}, 12 * n},
      {Attention{16, 512, 512, 64, 64, Precision::BF16, true}, 4 * 16 * 512 * 64 * 2},
      {FusedKernel{{Streaming{StreamingKernel::Elementwise, Engine::Scalar, n},
                    Streaming{StreamingKernel::Elementwise, Engine::Vector, n, true}}},
       12 * n},
  };
  for (const Work& work : works) {
    const double expected = time_of(trn2(), work).duration_ns - kLaunchOverheadNs;
    for (int tiles : {1, 7}) {
      Schedule s(trn2(), 2);
      add_work(s, work, {{bytes(0, 1 << 20)}, {}, {bytes(1 << 20, 2 << 20)}, {}}, tiles,
               s.source("op"));
      EXPECT_NEAR(s.run().makespan_ns, expected, 1e-6 * expected) << "tiles " << tiles;
    }
  }
}

TEST(Schedule, ADependentOpsTilesFollowTheProducersTiles) {
  // y = f(x) then z = g(y), 4 tiles each: g's tile i reads slice i of y, so it waits for f's
  // tile i only, and the chain pipelines at tile granularity.
  const uint64_t n = 1 << 20;
  const Work f{Streaming{StreamingKernel::Elementwise, Engine::Vector, n}, 0};
  const Work g{Streaming{StreamingKernel::Elementwise, Engine::Scalar, n}, 0};
  Schedule s(trn2(), 2);
  const Region x = bytes(0, 4 * n), y = bytes(4 * n, 8 * n), z = bytes(8 * n, 12 * n);
  add_work(s, f, {{x}, {}, {y}, {}}, 4, s.source("f"));
  add_work(s, g, {{y}, {}, {z}, {}}, 4, s.source("g"));
  ASSERT_EQ(s.size(), 8u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(s.dependencies(4 + i), (std::vector<uint32_t>{uint32_t(i)}));
  const double tf = time_of(trn2(), f).cost.engine_ns[static_cast<int>(Engine::Vector)] / 4;
  const double tg = time_of(trn2(), g).cost.engine_ns[static_cast<int>(Engine::Scalar)] / 4;
  EXPECT_NEAR(s.run().makespan_ns, tf + tg + 3 * std::max(tf, tg), 1e-6);
  EXPECT_EQ(s.source_name(s.instruction(7).source), "g");
}

TEST(OpProgram, IndependentOpsOverlapAndABarrierSerialises) {
  // A matmul and an unrelated elementwise op: together they take less than one after the
  // other, and no less than the busiest engine. An op of unknown operands orders against both.
  const Work mm{Matmul{1, 1024, 1024, 1024, Precision::BF16}, 3 * 1024 * 1024 * 2};
  const Work add{Streaming{StreamingKernel::Elementwise, Engine::GpSimd, 1 << 22}, 0};
  const WorkTime tm = time_of(trn2(), mm), ta = time_of(trn2(), add);
  const std::vector<Region> a{bytes(0, 2 << 20)}, b{bytes(2 << 20, 4 << 20)},
      c{bytes(4 << 20, 6 << 20)}, x{bytes(8 << 20, 24 << 20)}, y{bytes(24 << 20, 40 << 20)};
  OpProgram program(trn2());
  program.add_op(tm, &a, &c, "mm");
  program.add_op(ta, &x, &y, "add");
  const double alone_mm = tm.duration_ns - kLaunchOverheadNs;
  const double alone_add = ta.duration_ns - kLaunchOverheadNs;
  const double together = program.schedule().run().makespan_ns;
  EXPECT_LT(together, alone_mm + alone_add);
  EXPECT_GE(together + 1e-6, std::max(alone_mm, alone_add));
  program.add_op(ta, nullptr, nullptr, "unknown");
  program.add_op(ta, &x, &y, "add again");
  const double serial = program.schedule().run().makespan_ns;
  EXPECT_NEAR(serial, together + 2 * alone_add, 1e-6 * serial);
}

TEST(OpProgram, AnOutArgumentDoesNotChainAMatmulsTiles) {
  // mm(a, b, out=c) reads its out= argument: its tiles must still run back to back on TensorE.
  const Work mm{Matmul{1, 2048, 2048, 2048, Precision::FP32}, 48ull << 20};
  const WorkTime t = time_of(trn2(), mm);
  const std::vector<Region> in{bytes(0, 16 << 20), bytes(16 << 20, 32 << 20),
                               bytes(32 << 20, 48 << 20)},
      out{bytes(32 << 20, 48 << 20)};
  OpProgram program(trn2());
  program.add_op(t, &in, &out, "mm.out");
  EXPECT_NEAR(program.schedule().run().makespan_ns, t.duration_ns - kLaunchOverheadNs, 1e-3);
}

TEST(OpProgram, AtMostTheSbufRingOfTilesIsInFlight) {
  // trn1.2xlarge: 24 MiB of SBUF / (2 x 1 MiB) = 12 buffers. Forty tiles of independent GpSimdE
  // passes need no buffer twice at once, since one engine runs them in order anyway; what the
  // ring changes is only when a buffer's next user may start, never the sum on one engine.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  OpProgram program(trn1);
  const Work pass{Streaming{StreamingKernel::Elementwise, Engine::GpSimd, 1 << 18}, 0};
  const WorkTime t = time_of(trn1, pass);
  for (int i = 0; i < 40; ++i) {
    const std::vector<Region> in{bytes(0, 1)}, out{bytes(100 + i, 101 + i)};
    program.add_op(t, &in, &out, "p");
  }
  const Schedule& s = program.schedule();
  // Op 12 reuses op 0's buffer: it depends on op 0.
  EXPECT_EQ(s.dependencies(12), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(s.dependencies(11).empty());
  EXPECT_NEAR(program.schedule().run().makespan_ns,
              40 * (t.duration_ns - kLaunchOverheadNs), 1e-6);
}

TEST(OpProgram, IntermediatesStayInSbufInputsAndOutputsInHbm) {
  // x -> f -> t -> g -> y, each a VectorE pass over 1 MiB reading and writing 1 MiB of HBM
  // (2 MiB each alone). With x and y declared the program's input and output, t is an
  // intermediate: f writes it to SBUF and g reads it there, 1 MiB less each (Note
  // [Intermediates in SBUF]). g waits for f, so the program takes twice one op with 1 MiB
  // of HBM traffic: max(its VectorE time, 1 MiB at the core's stream bandwidth).
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work pass{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib / 4}, 2 * mib};
  const WorkTime t = time_of(trn1, pass);
  const std::vector<Region> x{bytes(0, mib)}, tmp{bytes(mib, 2 * mib)}, y{bytes(2 * mib, 3 * mib)};
  OpProgram program(trn1);
  program.keep_in_hbm(x);
  program.add_op(t, &x, &tmp, "f");
  program.add_op(t, &tmp, &y, "g");
  program.keep_in_hbm(y);
  EXPECT_EQ(program.charged_bytes(), 4 * mib);
  EXPECT_EQ(program.sbuf_saved_bytes(), 2 * mib);
  const double vector = t.cost.engine_ns[static_cast<int>(Engine::Vector)];
  const double hbm = static_cast<double>(mib) / trn1.core_stream_gbps();
  EXPECT_NEAR(program.schedule().run().makespan_ns, 2 * std::max(vector, hbm), 1e-6);

  // Without the program's outputs declared, what it writes goes back to HBM: only g's read
  // of t comes from SBUF.
  OpProgram unknown(trn1);
  unknown.add_op(t, &x, &tmp, "f");
  unknown.add_op(t, &tmp, &y, "g");
  EXPECT_EQ(unknown.sbuf_saved_bytes(), mib);
}

TEST(OpProgram, OpTimingsSayWhenEachOpRanAndWhatItMoved) {
  // The chain of IntermediatesStayInSbufInputsAndOutputsInHbm: f reads x from HBM and keeps t
  // in SBUF, g reads t there and writes y to HBM, so each moves 1 MiB, and g's VectorE pass
  // starts when f's ends. A copy of y after them is one transfer of its bytes.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work pass{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib / 4}, 2 * mib};
  const WorkTime t = time_of(trn1, pass);
  const WorkTime copy = time_of(trn1, Work{Copy{CopyKind::DeviceToDeviceSameChip, mib}, 0});
  const std::vector<Region> x{bytes(0, mib)}, tmp{bytes(mib, 2 * mib)},
      y{bytes(2 * mib, 3 * mib)}, z{bytes(3 * mib, 4 * mib)};
  OpProgram program(trn1);
  program.keep_in_hbm(x);
  program.keep_in_hbm(y);
  program.keep_in_hbm(z);
  program.add_op(t, &x, &tmp, "f");
  program.add_op(t, &tmp, &y, "g");
  program.add_op(copy, &y, &z, "copy");
  const ScheduleResult r = program.schedule().run();
  const std::vector<OpTiming> ops = program.op_timings(r);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].source, "f");
  EXPECT_EQ(ops[1].source, "g");
  EXPECT_DOUBLE_EQ(ops[0].start_ns, 0);
  const double vector = t.cost.engine_ns[static_cast<int>(Engine::Vector)];
  EXPECT_GE(ops[1].end_ns, 2 * vector - 1e-6);
  EXPECT_GE(ops[2].start_ns, ops[1].end_ns);  // the copy reads what g wrote
  EXPECT_DOUBLE_EQ(ops[2].end_ns, r.makespan_ns);
  EXPECT_EQ(ops[0].hbm_bytes, mib);
  EXPECT_EQ(ops[1].hbm_bytes, mib);
  ASSERT_GT(copy.cost.bytes, 0u);
  EXPECT_EQ(ops[2].hbm_bytes, copy.cost.bytes);
  EXPECT_NEAR(ops[0].busy_ns[static_cast<int>(Engine::Vector)], vector, 1e-6);
  EXPECT_GT(ops[2].busy_ns[static_cast<int>(Engine::Dma)], 0);
  for (const OpTiming& op : ops) {  // DMA counts time, not transfers, so never above the span
    EXPECT_LE(op.busy_ns[static_cast<int>(Engine::Dma)], op.end_ns - op.start_ns + 1e-6);
  }
  // A run of another program is refused.
  OpProgram other(trn1);
  other.add_op(t, &x, &tmp, "f");
  EXPECT_THROW(program.op_timings(other.schedule().run()), Error);
}

TEST(OpProgram, AWeightLoadDoesNotWaitForTheActivationInSbuf) {
  // f makes t (1 MiB, kept in SBUF: no HBM bytes) on VectorE; g reads t and a program input
  // w and writes the output y on ScalarE (3 MiB alone, 2 MiB with t in SBUF). g's transfer
  // moves w and y only, so it starts at once, beside f: the program takes
  // max(f + g on their engines, g's 2 MiB at the stream bandwidth), not f + max(g, 2 MiB).
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work f{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib / 4}, mib};
  const Work g{Streaming{StreamingKernel::Elementwise, Engine::Scalar, mib / 4}, 3 * mib};
  const WorkTime tf = time_of(trn1, f), tg = time_of(trn1, g);
  const std::vector<Region> none, tmp{bytes(0, mib)}, w{bytes(mib, 2 * mib)},
      y{bytes(2 * mib, 3 * mib)}, g_in{bytes(0, mib), bytes(mib, 2 * mib)};
  OpProgram program(trn1);
  program.keep_in_hbm(w);
  program.keep_in_hbm(y);
  program.add_op(tf, &none, &tmp, "f");
  program.add_op(tg, &g_in, &y, "g");
  EXPECT_EQ(program.sbuf_saved_bytes(), 2 * mib);
  const double vf = tf.cost.engine_ns[static_cast<int>(Engine::Vector)];
  const double vg = tg.cost.engine_ns[static_cast<int>(Engine::Scalar)];
  const double dma = static_cast<double>(2 * mib) / trn1.core_stream_gbps();
  ASSERT_GT(dma, vf + vg);  // the load is the longer: it hides f entirely
  EXPECT_NEAR(program.schedule().run().makespan_ns, std::max(vf + vg, dma), 1e-6);
}

TEST(OpProgram, AnIntermediateLargerThanHalfTheSbufSpills) {
  // trn1.2xlarge: 24 MiB of SBUF, 12 MiB of it for intermediates. A 16 MiB intermediate does
  // not fit and round-trips through HBM. An op of unknown operands may read anything from HBM
  // and overwrite it: what is live across it is written back and read again from HBM.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work big{Streaming{StreamingKernel::Elementwise, Engine::Vector, 4 * mib}, 32 * mib};
  const WorkTime tb = time_of(trn1, big);
  const std::vector<Region> x{bytes(0, 16 * mib)}, tmp{bytes(16 * mib, 32 * mib)},
      y{bytes(32 * mib, 48 * mib)};
  OpProgram program(trn1);
  program.keep_in_hbm(x);
  program.keep_in_hbm(y);
  program.add_op(tb, &x, &tmp, "f");
  program.add_op(tb, &tmp, &y, "g");
  EXPECT_EQ(program.sbuf_saved_bytes(), 0u);

  const Work small{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib / 4}, 2 * mib};
  const WorkTime ts = time_of(trn1, small);
  const std::vector<Region> a{bytes(0, mib)}, b{bytes(mib, 2 * mib)}, c{bytes(2 * mib, 3 * mib)};
  OpProgram barrier(trn1);
  barrier.keep_in_hbm(a);
  barrier.keep_in_hbm(c);
  barrier.add_op(ts, &a, &b, "f");
  barrier.add_op(ts, nullptr, nullptr, "unknown");
  barrier.add_op(ts, &b, &c, "g");
  EXPECT_EQ(barrier.sbuf_saved_bytes(), 0u);
}

TEST(OpProgram, ADecodeMatmulStreamsItsWeightThroughTheSbufRing) {
  // Two independent matmuls of 4 rows by a 16 MiB bf16 weight each (a decode step): each is
  // cut along its weight into 16 tiles of 1 MiB, which spread over the core's 16 DMA queues,
  // each running its transfers in program order. So the first weight streams first: the
  // first matmul ends when 16 of the 32 MiB have moved, where as one transfer each the two
  // weights would share the bandwidth and both end at 32.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work mm{Matmul{1, 4, 4096, 2048, Precision::BF16}, 16 * mib};
  const WorkTime t = time_of(trn1, mm);
  const std::vector<Region> x{bytes(0, 32 * 1024)}, w1{bytes(mib, 17 * mib)},
      w2{bytes(17 * mib, 33 * mib)}, y1{bytes(40 * mib, 40 * mib + 32 * 1024)},
      y2{bytes(41 * mib, 41 * mib + 32 * 1024)};
  const std::vector<Region> in1{x[0], w1[0]}, in2{x[0], w2[0]};
  OpProgram program(trn1);
  program.add_op(t, &in1, &y1, "mm1");
  program.add_op(t, &in2, &y2, "mm2");
  const Schedule& s = program.schedule();
  std::vector<Region> weight_slices;
  for (size_t i = 0; i < s.size(); ++i) {
    const Instruction& in_i = s.instruction(i);
    if (in_i.engine != Engine::Dma || in_i.source != s.instruction(0).source) continue;
    for (const Region& r : in_i.reads) {
      if (r.begin >= w1[0].begin && r.end <= w1[0].end) weight_slices.push_back(r);
    }
  }
  ASSERT_EQ(weight_slices.size(), 16u);
  EXPECT_EQ(weight_slices.front().end - weight_slices.front().begin, mib);
  const ScheduleResult r = program.schedule().run();
  const std::vector<OpTiming> ops = program.op_timings(r);
  const double all = 32.0 * mib / trn1.core_stream_gbps();
  // Within a few tiles' TensorE time of the transfers (the last tiles' buffers free late).
  EXPECT_GE(r.makespan_ns, all);
  EXPECT_LT(r.makespan_ns, 1.05 * all);
  EXPECT_GE(ops[0].end_ns, 0.5 * all);
  EXPECT_LT(ops[0].end_ns, 0.55 * all);
}

TEST(OpProgram, AResultEveryTileAddsToIsReadAfterTheLastTile) {
  // A matmul of 512 rows by a 16 MiB weight is cut along the weight (16 tiles); each tile adds
  // to all of its 4 MiB result. An elementwise op over the result (4 tiles, one per MiB) may
  // start none of its tiles before the matmul's last tile has run.
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work mm{Matmul{1, 512, 4096, 2048, Precision::BF16}, 20 * mib};
  const Work pass{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib}, 8 * mib};
  const std::vector<Region> x{bytes(0, 4 * mib)}, w{bytes(4 * mib, 20 * mib)},
      y{bytes(20 * mib, 24 * mib)}, z{bytes(24 * mib, 28 * mib)}, in{x[0], w[0]};
  OpProgram program(trn1);
  program.add_op(time_of(trn1, mm), &in, &y, "mm");
  program.add_op(time_of(trn1, pass), &y, &z, "pass");
  const Schedule& s = program.schedule();
  const ScheduleResult r = s.run();
  const uint32_t mm_tag = s.instruction(0).source;
  double last_tensor_end = 0, first_pass_start = 1e300;
  int pass_vector_tiles = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const Instruction& in_i = s.instruction(i);
    if (in_i.source == mm_tag && in_i.engine == Engine::Tensor) {
      last_tensor_end = std::max(last_tensor_end, r.times[i].end_ns);
    } else if (in_i.source != mm_tag && in_i.engine == Engine::Vector) {
      first_pass_start = std::min(first_pass_start, r.times[i].start_ns);
      ++pass_vector_tiles;
    }
  }
  EXPECT_EQ(pass_vector_tiles, 4);
  EXPECT_GE(first_pass_start, last_tensor_end);
}

TEST(OpProgram, AnInputUpdatedInPlaceStaysInHbm) {
  // u updates a few entries of the 4 MiB cache c (a program input, moving 64 KiB); g then reads
  // all of c: from HBM, since u did not bring it on chip. Had u written a 4 MiB tensor the
  // program made, g would read it from SBUF (Note [Intermediates in SBUF]).
  const InstanceSpec& trn1 = find_instance("trn1.2xlarge");
  const uint64_t mib = 1 << 20;
  const Work update{Streaming{StreamingKernel::Elementwise, Engine::GpSimd, 16 * 1024}, mib / 16};
  const Work whole{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib}, 4 * mib};
  const Work read{Streaming{StreamingKernel::Elementwise, Engine::Vector, mib}, 4 * mib + 4096};
  const std::vector<Region> c{bytes(0, 4 * mib)}, v{bytes(8 * mib, 8 * mib + 4096)},
      y{bytes(9 * mib, 9 * mib + 4096)};
  for (const bool made : {false, true}) {
    OpProgram program(trn1);
    if (!made) program.keep_in_hbm(c, OpProgram::Kept::Input);
    program.keep_in_hbm(y);
    program.add_op(time_of(trn1, made ? whole : update), &v, &c, "u");
    program.add_op(time_of(trn1, read), &c, &y, "g");
    // Made: u's write stays on chip (4 MiB) and g reads it there (4 MiB).
    EXPECT_EQ(program.sbuf_saved_bytes(), made ? 8 * mib : 0) << made;
  }
}

TEST(Schedule, RejectsABadQueue) {
  Schedule s(trn2(), 2);
  EXPECT_THROW(s.add(transfer(2, 8)), Error);
  EXPECT_THROW(Schedule(trn2(), 0), Error);
}

}  // namespace
}  // namespace trnsim
