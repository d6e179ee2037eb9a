// Copy costs on the simulated clock: what the host link and the DMA engines charge for a copy.
#include <gtest/gtest.h>

#include "trnsim/instance.h"
#include "trnsim/transfer.h"

namespace trnsim {
namespace {

constexpr CopyKind kAllKinds[] = {CopyKind::HostToDevice, CopyKind::DeviceToHost,
                                  CopyKind::DeviceToDeviceSameChip,
                                  CopyKind::DeviceToDeviceCrossChip};

TEST(Transfer, ZeroBytesIsFree) {
  for (const InstanceSpec& s : instance_table()) {
    for (CopyKind kind : kAllKinds) EXPECT_EQ(copy_duration_ns(s, kind, 0), 0.0) << s.name;
  }
}

TEST(Transfer, LargerCopiesCostMore) {
  for (const InstanceSpec& s : instance_table()) {
    for (CopyKind kind : kAllKinds) {
      SCOPED_TRACE(s.name + " kind " + std::to_string(static_cast<int>(kind)));
      const double one = copy_duration_ns(s, kind, 1);
      const double mib = copy_duration_ns(s, kind, kMiB);
      const double gib = copy_duration_ns(s, kind, kGiB);
      // Even one byte pays the DMA setup.
      EXPECT_GE(one, kDmaSetupNs);
      EXPECT_LT(one, mib);
      EXPECT_LT(mib, gib);
    }
  }
}

TEST(Transfer, HostLinkIsBandwidthPlusSetup) {
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  for (uint64_t bytes : {uint64_t{4096}, kMiB, kGiB}) {
    SCOPED_TRACE(bytes);
    // GB/s is bytes per ns.
    const double expected = kDmaSetupNs + static_cast<double>(bytes) / kHostLinkGBps;
    EXPECT_NEAR(copy_duration_ns(s, CopyKind::HostToDevice, bytes), expected, expected * 1e-9);
    EXPECT_NEAR(copy_duration_ns(s, CopyKind::DeviceToHost, bytes), expected, expected * 1e-9);
  }
  // Sanity check of the units: 1 GiB over a 25 GB/s link takes about 43 ms.
  EXPECT_NEAR(copy_duration_ns(s, CopyKind::HostToDevice, kGiB) / 1e6, 42.95, 0.01);
}

TEST(Transfer, SameChipBeatsHostLinkForLargeCopies) {
  for (const InstanceSpec& s : instance_table()) {
    SCOPED_TRACE(s.name);
    EXPECT_LT(copy_duration_ns(s, CopyKind::DeviceToDeviceSameChip, 256 * kMiB),
              copy_duration_ns(s, CopyKind::HostToDevice, 256 * kMiB));
  }
}

TEST(Transfer, DeviceCopiesDependOnChip) {
  // The host link is the same PCIe class everywhere; the on-device paths are per generation.
  const InstanceSpec& trn1 = find_instance("trn1.32xlarge");
  const InstanceSpec& trn2 = find_instance("trn2.48xlarge");
  const uint64_t bytes = 64 * kMiB;
  EXPECT_NE(copy_duration_ns(trn1, CopyKind::DeviceToDeviceSameChip, bytes),
            copy_duration_ns(trn2, CopyKind::DeviceToDeviceSameChip, bytes));
  EXPECT_NE(copy_duration_ns(trn1, CopyKind::DeviceToDeviceCrossChip, bytes),
            copy_duration_ns(trn2, CopyKind::DeviceToDeviceCrossChip, bytes));
  EXPECT_EQ(copy_duration_ns(trn1, CopyKind::HostToDevice, bytes),
            copy_duration_ns(trn2, CopyKind::HostToDevice, bytes));
}

TEST(Transfer, SameChipIsBoundByHbmShare) {
  // Read + write both hit HBM, so one logical core copies at most half its HBM bandwidth.
  for (const InstanceSpec& s : instance_table()) {
    SCOPED_TRACE(s.name);
    const double ns = copy_duration_ns(s, CopyKind::DeviceToDeviceSameChip, kGiB) - kDmaSetupNs;
    EXPECT_GE(ns, static_cast<double>(kGiB) / (s.core_hbm_gbps() / 2) * (1 - 1e-9));
  }
}

TEST(Transfer, CrossChipIsNoFasterThanSameChip) {
  // Leaving the chip adds NeuronLink, shared by the chip's cores, to the HBM traffic.
  for (const InstanceSpec& s : instance_table()) {
    SCOPED_TRACE(s.name);
    EXPECT_GE(copy_duration_ns(s, CopyKind::DeviceToDeviceCrossChip, kGiB),
              copy_duration_ns(s, CopyKind::DeviceToDeviceSameChip, kGiB));
  }
}

}  // namespace
}  // namespace trnsim
