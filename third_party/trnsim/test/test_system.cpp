// The simulated machine as configured by a SystemConfig, the way the Neuron runtime reads
// NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES and NEURON_LOGICAL_NC_CONFIG.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trnsim/error.h"
#include "trnsim/system.h"

namespace trnsim {
namespace {

// Each test builds its machine from a SystemConfig: the Neuron runtime's settings in their own
// syntax (the framework on top reads them from wherever it keeps its settings).
class SystemConfigTest : public ::testing::Test {
 protected:
  SystemConfig config_;

  // The message of the trnsim::Error thrown by f, or "" with a test failure if none is thrown.
  template <typename F>
  static std::string error_of(F f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected trnsim::Error";
    return "";
  }
};

TEST_F(SystemConfigTest, DefaultsToTrn2Small) {
  auto sys = System::create(config_);
  EXPECT_EQ(sys->instance().name, "trn2.3xlarge");
  ASSERT_EQ(sys->device_count(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sys->device(i).index(), i);
    EXPECT_EQ(sys->device(i).core(), i);
  }
}

TEST_F(SystemConfigTest, EmptyInstanceMeansDefault) {
  config_.instance = "";
  EXPECT_EQ(System::create(config_)->instance().name, "trn2.3xlarge");
}

TEST_F(SystemConfigTest, InstanceFromConfig) {
  config_.instance = "trn1.32xlarge";
  auto sys = System::create(config_);
  EXPECT_EQ(sys->instance().name, "trn1.32xlarge");
  EXPECT_EQ(sys->device_count(), 32);
  EXPECT_EQ(sys->device(31).core(), 31);
}

TEST_F(SystemConfigTest, UnknownInstanceListsNames) {
  config_.instance = "p5.48xlarge";
  const std::string msg = error_of([&] { System::create(config_); });
  EXPECT_NE(msg.find("p5.48xlarge"), std::string::npos) << msg;
  EXPECT_NE(msg.find(instance_names()), std::string::npos) << msg;
}

TEST_F(SystemConfigTest, VisibleCoresSingle) {
  config_.visible_cores = "2";
  auto sys = System::create(config_);
  ASSERT_EQ(sys->device_count(), 1);
  // The one visible core becomes neuron:0.
  EXPECT_EQ(sys->device(0).index(), 0);
  EXPECT_EQ(sys->device(0).core(), 2);
}

TEST_F(SystemConfigTest, VisibleCoresRange) {
  config_.visible_cores = "0-3";
  auto sys = System::create(config_);
  ASSERT_EQ(sys->device_count(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sys->device(i).core(), i);
}

TEST_F(SystemConfigTest, VisibleCoresList) {
  config_.visible_cores = "0,2-3";
  auto sys = System::create(config_);
  ASSERT_EQ(sys->device_count(), 3);
  EXPECT_EQ(sys->device(0).core(), 0);
  EXPECT_EQ(sys->device(1).core(), 2);
  EXPECT_EQ(sys->device(2).core(), 3);
}

TEST_F(SystemConfigTest, VisibleCoresCheckedAgainstInstance) {
  // Core 20 exists on trn1.32xlarge but not on the default instance.
  config_.visible_cores = "20";
  EXPECT_THROW(System::create(config_), Error);
  config_.instance = "trn1.32xlarge";
  EXPECT_EQ(System::create(config_)->device(0).core(), 20);
}

TEST_F(SystemConfigTest, BadVisibleCoresFromEnvironmentThrow) {
  for (const char* value : {"a", "5", "3-1", "1,1", "-1", "0-", "1-2-3", "0,,1", "2x"}) {
    SCOPED_TRACE(value);
    config_.visible_cores = value;
    const std::string msg = error_of([&] { System::create(config_); });
    EXPECT_NE(msg.find(std::string("'") + value + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0..3"), std::string::npos) << msg;
  }
}

TEST_F(SystemConfigTest, NumCoresTakesTheFirstCores) {
  config_.num_cores = "2";
  auto sys = System::create(config_);
  ASSERT_EQ(sys->device_count(), 2);
  EXPECT_EQ(sys->device(1).core(), 1);
  config_.num_cores = "0";  // 0 means all, the runtime's default
  EXPECT_EQ(System::create(config_)->device_count(), 4);
}

TEST_F(SystemConfigTest, VisibleCoresWinOverNumCores) {
  config_.num_cores = "1";
  config_.visible_cores = "2-3";
  auto sys = System::create(config_);
  ASSERT_EQ(sys->device_count(), 2);
  EXPECT_EQ(sys->device(0).core(), 2);
}

TEST_F(SystemConfigTest, BadNumCoresNamesVariableAndRange) {
  for (const char* value : {"5", "-1", "two", "2x"}) {
    SCOPED_TRACE(value);
    config_.num_cores = value;
    const std::string msg = error_of([&] { System::create(config_); });
    EXPECT_NE(msg.find("NEURON_RT_NUM_CORES"), std::string::npos) << msg;
    EXPECT_NE(msg.find("from 1 to 4"), std::string::npos) << msg;
  }
}

TEST_F(SystemConfigTest, LogicalNcConfigOneSplitsTrn2Devices) {
  config_.logical_nc_config = "1";
  auto sys = System::create(config_);
  EXPECT_EQ(sys->device_count(), 8);
  EXPECT_EQ(sys->instance().physical_cores_per_logical(), 1);
  EXPECT_EQ(sys->instance().hbm_bytes_per_core(), 12 * kGiB);
  EXPECT_EQ(&sys->device(7).instance(), &sys->instance());
  config_.logical_nc_config = "2";  // the Trainium2 default
  EXPECT_EQ(System::create(config_)->device_count(), 4);
}

TEST_F(SystemConfigTest, BadLogicalNcConfigNamesVariable) {
  config_.logical_nc_config = "4";
  EXPECT_NE(error_of([&] { System::create(config_); }).find("use 1 or 2"), std::string::npos);
  config_.instance = "trn1.2xlarge";  // Trainium1 has no logical core grouping
  config_.logical_nc_config = "2";
  EXPECT_NE(error_of([&] { System::create(config_); }).find("use 1 or unset"),
            std::string::npos);
  config_.logical_nc_config = "1";
  EXPECT_EQ(System::create(config_)->device_count(), 2);
}

TEST(ParseVisibleCores, AcceptsIdsRangesAndLists) {
  EXPECT_EQ(parse_visible_cores("2", 4), (std::vector<int>{2}));
  EXPECT_EQ(parse_visible_cores("0-3", 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_visible_cores("0,2-3", 4), (std::vector<int>{0, 2, 3}));
  // Order is the user's: device i is the i-th listed core.
  EXPECT_EQ(parse_visible_cores("3,0", 4), (std::vector<int>{3, 0}));
  EXPECT_EQ(parse_visible_cores("30-31", 32), (std::vector<int>{30, 31}));
}

TEST(ParseVisibleCores, RejectsBadValuesNamingRange) {
  for (const char* value : {"", "a", "5", "3-1", "1,1", "0-2,1", "-1", "4-5", "99999999999"}) {
    SCOPED_TRACE(value);
    try {
      parse_visible_cores(value, 4);
      ADD_FAILURE() << "expected trnsim::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("0..3"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SystemConfigTest, DeviceOutOfRangeNamesValidRange) {
  auto sys = System::create(config_);
  for (int bad : {99, 4, -1}) {
    SCOPED_TRACE(bad);
    const std::string msg = error_of([&] { sys->device(bad); });
    EXPECT_NE(msg.find("neuron:" + std::to_string(bad)), std::string::npos) << msg;
    EXPECT_NE(msg.find("0..3"), std::string::npos) << msg;
  }
}

TEST_F(SystemConfigTest, DeviceOfFindsOwningDevice) {
  auto sys = System::create(config_);
  char* on1 = static_cast<char*>(sys->device(1).hbm().allocate(4096));
  char* on3 = static_cast<char*>(sys->device(3).hbm().allocate(1 * kMiB));
  EXPECT_EQ(sys->device_of(on1), 1);
  EXPECT_EQ(sys->device_of(on3), 3);
  EXPECT_EQ(sys->device_of(on3 + kMiB - 1), 3);  // any byte of the block, not just its start
  // Devices nobody touched have no HBM reserved and own nothing.
  EXPECT_FALSE(sys->device(0).hbm_reserved());

  int on_stack = 0;
  auto on_heap = std::make_unique<int>(0);
  EXPECT_EQ(sys->device_of(&on_stack), std::nullopt);
  EXPECT_EQ(sys->device_of(on_heap.get()), std::nullopt);
  EXPECT_EQ(sys->device_of(nullptr), std::nullopt);
  sys->device(1).hbm().release(on1);
  sys->device(3).hbm().release(on3);
}

TEST_F(SystemConfigTest, SameChipOnTrn1Large) {
  // Trainium1 has 2 cores per chip: cores 0,1 share chip 0; core 2 is on chip 1.
  config_.instance = "trn1.32xlarge";
  auto sys = System::create(config_);
  EXPECT_TRUE(sys->same_chip(0, 1));
  EXPECT_FALSE(sys->same_chip(1, 2));
  EXPECT_TRUE(sys->same_chip(30, 31));
  EXPECT_EQ(sys->device(2).chip(), 1);
}

TEST_F(SystemConfigTest, SameChipUsesCoreNotDeviceIndex) {
  // Devices 0 and 1 are cores 1 and 2, which sit on different chips.
  config_.instance = "trn1.32xlarge";
  config_.visible_cores = "1-2";
  auto sys = System::create(config_);
  EXPECT_FALSE(sys->same_chip(0, 1));
}

TEST_F(SystemConfigTest, Trn2SmallIsOneChip) {
  auto sys = System::create(config_);
  for (int i = 1; i < sys->device_count(); ++i) EXPECT_TRUE(sys->same_chip(0, i)) << i;
}

}  // namespace
}  // namespace trnsim
