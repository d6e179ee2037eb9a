// One logical NeuronCore: lazily reserved HBM sized from the instance table, and its queues.
#include <gtest/gtest.h>

#include "trnsim/device.h"
#include "trnsim/error.h"

namespace trnsim {
namespace {

TEST(Device, ChipAndHbmComeFromInstance) {
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  Device d(1, 9, s);
  EXPECT_EQ(d.index(), 1);
  EXPECT_EQ(d.core(), 9);
  EXPECT_EQ(d.chip(), 2);  // 4 logical cores per Trainium2 chip
  // Unused devices must not reserve address space.
  EXPECT_FALSE(d.hbm_reserved());
  EXPECT_EQ(d.hbm().capacity(), 24 * kGiB);
  EXPECT_TRUE(d.hbm_reserved());
  EXPECT_EQ(&d.hbm(), &d.hbm());
}

TEST(Device, OutOfMemoryNamesDeviceIndex) {
  // Users see neuron:<index>, not the core id behind it.
  Device d(1, 9, find_instance("trn1.2xlarge"));
  try {
    d.hbm().allocate(17 * kGiB);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.device(), 1);
    EXPECT_EQ(e.capacity(), 16 * kGiB);
  }
}

TEST(Device, QueuesAreStableAndRangeChecked) {
  Device d(2, 2, find_instance("trn2.3xlarge"));
  Queue& q = d.queue(0);
  EXPECT_EQ(&d.queue(0), &q);
  EXPECT_EQ(q.device(), 2);
  EXPECT_EQ(d.queue(Device::kMaxQueues - 1).id(), Device::kMaxQueues - 1);
  EXPECT_THROW(d.queue(-1), Error);
  EXPECT_THROW(d.queue(Device::kMaxQueues), Error);
}

TEST(Device, SynchronizeWaitsForSlowestQueue) {
  Device d(0, 0, find_instance("trn2.3xlarge"));
  EXPECT_EQ(d.synchronize_ns(), 0.0);
  d.queue(0).launch("a", 100.0);
  d.queue(7).launch("b", 250.0);
  d.queue(3).launch("c", 50.0);
  EXPECT_EQ(d.synchronize_ns(), 250.0);
}

}  // namespace
}  // namespace trnsim
