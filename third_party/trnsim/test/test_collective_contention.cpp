// A collective and compute on two queues of one NeuronCore share its DMA queues (Note
// [Collective DMA share] in collective.h, Note [Shared engines] in queue.h): HBM-bound compute
// that runs while a collective moves data finishes later by the time the collective's bytes take
// on the core's DMA engines, computed here by hand from the NKI DMA guide's engine rates.
#include <gtest/gtest.h>

#include <vector>

#include "trnsim/device.h"
#include "trnsim/instance.h"
#include "trnsim/queue.h"
#include "trnsim/work.h"

namespace trnsim {
namespace {

// An elementwise add over `elements` fp32 values: 12 bytes of HBM traffic per element, far
// more time on the DMA queues than on VectorE.
Work hbm_bound_add(uint64_t elements) {
  return Work{Streaming{StreamingKernel::Elementwise, Engine::Vector, elements, true, false},
              12 * elements};
}

double compute_end(const InstanceSpec& s, const Work* collective, uint64_t elements) {
  SharedEngines engines;
  Queue compute(0, 0, nullptr, &engines), comm(0, 1, nullptr, &engines);
  if (collective != nullptr) {
    const WorkTime c = time_of(s, *collective);
    comm.launch("all_reduce", c.cost, c.duration_ns, {});
  }
  const WorkTime add = time_of(s, hbm_bound_add(elements));
  compute.launch("add", add.cost);
  return compute.now_ns();
}

TEST(CollectiveContention, HbmBoundComputeWaitsForTheCollectivesBytes) {
  // 2 ranks on the two cores of one chip all-reduce 64 MiB: each sends the whole buffer (half
  // reduce-scatter, half all-gather). A Trainium1 core's 16 DMA engines move 17 B/ns each; a
  // Trainium2 logical core (LNC=2) has 32 engines at 23 B/ns.
  const uint64_t bytes = 64 * kMiB, elements = 16 * kMiB;
  const struct {
    const char* instance;
    double dma_gbps;
  } cases[] = {{"trn1.32xlarge", 16 * 17.0}, {"trn2.3xlarge", 2 * 16 * 23.0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.instance);
    const InstanceSpec& s = find_instance(c.instance);
    const Work all_reduce{CollectiveOp{Collective::AllReduce, bytes, {{0, 0}, {0, 0}}}};
    const double alone = compute_end(s, nullptr, elements);
    const double shared = compute_end(s, &all_reduce, elements);
    const double expected_delay = bytes / c.dma_gbps;
    EXPECT_NEAR(shared - alone, expected_delay, 1e-6 * expected_delay);
    // The collective itself is slower than its bytes on the DMA engines (HBM and latency), so
    // the compute overlaps the rest of it.
    EXPECT_GT(time_of(s, all_reduce).duration_ns, expected_delay);
  }
}

TEST(CollectiveContention, ComputeEnginesStayFree) {
  // Compute that does not touch HBM (TensorE on operands already in SBUF) is not delayed.
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  const WorkTime c = time_of(s, Work{CollectiveOp{Collective::AllReduce, 64 * kMiB,
                                                  {{0, 0}, {0, 0}}}});
  for (double ns : c.cost.engine_ns) EXPECT_EQ(ns, 0.0);
  EXPECT_GT(c.cost.hbm_ns, 0.0);
  SharedEngines engines;
  Queue compute(0, 0, nullptr, &engines), comm(0, 1, nullptr, &engines);
  comm.launch("all_reduce", c.cost, c.duration_ns, {});
  const WorkTime mm = time_of(s, Work{Matmul{1, 128, 128, 512, Precision::BF16}, 0});
  compute.launch("matmul", mm.cost);
  EXPECT_DOUBLE_EQ(compute.now_ns(), mm.duration_ns);
}

TEST(CollectiveContention, DmaFreeTimeIsWhenLaunchedWorkLeavesTheDmaQueues) {
  // What a collective's arrival waits for (ProcessGroupNeuron): HBM traffic on any queue of the
  // core, not its compute-only work.
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  Device device(0, 0, s);
  EXPECT_EQ(device.dma_free_ns(), 0.0);
  const WorkTime mm = time_of(s, Work{Matmul{1, 128, 128, 512, Precision::BF16}, 0});
  device.queue(2).launch("matmul", mm.cost);
  EXPECT_EQ(device.dma_free_ns(), 0.0);
  const WorkTime add = time_of(s, hbm_bound_add(kMiB));
  // (The add starts once the matmul's PSUM copies leave VectorE.)
  const double add_start = device.queue(1).launch("add", add.cost) - add.duration_ns;
  EXPECT_DOUBLE_EQ(device.dma_free_ns(), add_start + add.cost.hbm_ns);
  EXPECT_EQ(device.queue(0).now_ns(), 0.0);
}

}  // namespace
}  // namespace trnsim
