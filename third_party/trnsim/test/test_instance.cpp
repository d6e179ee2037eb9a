// The instance table must match the numbers in the Neuron architecture docs, since every memory
// limit and device count the user sees comes from it.
#include <gtest/gtest.h>

#include <string>

#include "trnsim/error.h"
#include "trnsim/instance.h"

namespace trnsim {
namespace {

TEST(Instance, Trn1Small) {
  const InstanceSpec& s = find_instance("trn1.2xlarge");
  EXPECT_EQ(s.name, "trn1.2xlarge");
  EXPECT_EQ(s.chip->name, "Trainium1");
  EXPECT_EQ(s.core_count(), 2);
  EXPECT_EQ(s.hbm_bytes_per_core(), 16 * kGiB);
  // NeuronCore-v2 has no logical grouping: one physical core per device.
  EXPECT_EQ(s.physical_cores_per_logical(), 1);
}

TEST(Instance, Trn1Large) {
  const InstanceSpec& s = find_instance("trn1.32xlarge");
  EXPECT_EQ(s.chips, 16);
  EXPECT_EQ(s.core_count(), 32);
  EXPECT_EQ(s.hbm_bytes_per_core(), 16 * kGiB);
}

TEST(Instance, Trn2Small) {
  const InstanceSpec& s = find_instance("trn2.3xlarge");
  EXPECT_EQ(s.chip->name, "Trainium2");
  EXPECT_EQ(s.chips, 1);
  // LNC=2: 8 physical cores appear as 4 logical devices.
  EXPECT_EQ(s.core_count(), 4);
  EXPECT_EQ(s.physical_cores_per_logical(), 2);
  EXPECT_EQ(s.hbm_bytes_per_core(), 24 * kGiB);
}

TEST(Instance, Trn2Large) {
  const InstanceSpec& s = find_instance("trn2.48xlarge");
  EXPECT_EQ(s.core_count(), 64);
  const uint64_t total = s.hbm_bytes_per_core() * static_cast<uint64_t>(s.core_count());
  EXPECT_EQ(total, 1536 * kGiB);  // 1.5 TiB
  EXPECT_EQ(s.chip->hbm_bytes * static_cast<uint64_t>(s.chips), total);
}

TEST(Instance, PerCoreRatesSplitTheChip) {
  // Each logical core gets an even share, so the shares add back up to the chip's rate.
  for (const InstanceSpec& s : instance_table()) {
    SCOPED_TRACE(s.name);
    EXPECT_DOUBLE_EQ(s.core_hbm_gbps() * s.logical_cores_per_chip, s.chip->hbm_gbps);
    EXPECT_DOUBLE_EQ(s.core_bf16_tflops() * s.logical_cores_per_chip, s.chip->bf16_tflops);
    EXPECT_EQ(s.physical_cores_per_logical() * s.logical_cores_per_chip, s.chip->physical_cores);
  }
}

TEST(Instance, ChipTableHasEveryGenerationAndTrainium3sDocumentedRates) {
  // Trainium3 has no instance type in the table, but its NKI kernels are timed on its chip.
  const ChipSpec& t3 = find_chip("NeuronCore-v4");
  EXPECT_EQ(t3.name, "Trainium3");
  EXPECT_EQ(t3.physical_cores, 8);
  EXPECT_DOUBLE_EQ(t3.tensor_ghz, 2.4);
  EXPECT_DOUBLE_EQ(t3.vector_ghz, 1.2);
  EXPECT_EQ(t3.sbuf_bytes_per_core, 32 * kMiB);
  EXPECT_EQ(t3.hbm_bytes, 144 * kGiB);
  // The tables' 16 engines x 33 B/ns per core stay under the page's 4.9 TB/s per chip.
  EXPECT_LE(t3.dma_engines_per_core * t3.dma_engine_gbps * t3.physical_cores, t3.dma_gbps);
  for (const InstanceSpec& s : instance_table()) {
    EXPECT_EQ(&find_chip(s.chip->core_version), s.chip) << s.name;
  }
  EXPECT_THROW(find_chip("NeuronCore-v9"), Error);
}

TEST(Instance, DefaultIsInTable) {
  EXPECT_EQ(find_instance(kDefaultInstance).name, std::string(kDefaultInstance));
}

TEST(Instance, NamesListEveryEntry) {
  EXPECT_EQ(instance_names(),
            "trn1.2xlarge, trn1.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge");
}

TEST(Instance, UnknownNameThrowsListingValidNames) {
  try {
    find_instance("trn3.huge");
    FAIL() << "expected trnsim::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("trn3.huge"), std::string::npos) << msg;
    for (const InstanceSpec& s : instance_table()) {
      EXPECT_NE(msg.find(s.name), std::string::npos) << s.name << " missing from: " << msg;
    }
  }
  // Lookup is exact: no case folding or prefix matching.
  EXPECT_THROW(find_instance("TRN1.2XLARGE"), Error);
  EXPECT_THROW(find_instance("trn1"), Error);
  EXPECT_THROW(find_instance(""), Error);
}

}  // namespace
}  // namespace trnsim
