// Simulated device faults (fault.h): the armed launch fails with the Neuron runtime's status,
// the device stays failed, other devices and an unarmed device are unaffected, and the
// environment variable's syntax is checked.
#include <gtest/gtest.h>

#include <string>

#include "trnsim/device.h"
#include "trnsim/fault.h"
#include "trnsim/instance.h"
#include "trnsim/system.h"

namespace trnsim {
namespace {

TEST(Fault, TheArmedLaunchFailsAndTheDeviceStaysFailed) {
  System system(find_instance("trn2.3xlarge"), {0, 1});
  Device& d = system.device(1);
  d.health().arm(FaultKind::HbmUncorrectable, 3);
  d.queue(0).launch("op", 100);
  d.queue(5).launch("op", 100);  // launches on every queue of the device count
  EXPECT_FALSE(d.health().failed());
  try {
    d.queue(0).launch("op", 100);
    FAIL() << "the third launch should fail";
  } catch (const DeviceFault& e) {
    EXPECT_EQ(e.status(), 1201);
    EXPECT_EQ(std::string(e.what()).rfind("NRT Error NRT_EXEC_HW_ERR_HBM_UE(1201): neuron:1", 0),
              0u);
  }
  EXPECT_TRUE(d.health().failed());
  EXPECT_THROW(d.queue(1).launch("op", 1), DeviceFault);
  EXPECT_THROW(d.health().check(1), DeviceFault);
  // The failed launch did not advance the clock; the other device is untouched.
  EXPECT_DOUBLE_EQ(d.queue(0).now_ns(), 100);
  EXPECT_NO_THROW(system.device(0).queue(0).launch("op", 100));
  EXPECT_FALSE(system.device(0).health().failed());
}

TEST(Fault, KindsReportTheirRuntimeStatus) {
  EXPECT_EQ(DeviceFault(FaultKind::HbmUncorrectable, 0, 1).status(), 1201);
  EXPECT_EQ(DeviceFault(FaultKind::ExecTimeout, 0, 1).status(), 5);
  EXPECT_EQ(DeviceFault(FaultKind::DeviceLost, 0, 1).status(), 6);
  EXPECT_EQ(parse_fault_kind("timeout"), FaultKind::ExecTimeout);
  EXPECT_STREQ(fault_kind_name(parse_fault_kind("lost")), "lost");
  EXPECT_THROW(parse_fault_kind("melted"), Error);
}

TEST(Fault, SpecSyntax) {
  System system(find_instance("trn2.3xlarge"), {0, 1, 2, 3});
  system.arm_fault("timeout:2:1");
  EXPECT_THROW(system.device(2).queue(0).launch("op", 1), DeviceFault);
  for (const char* bad : {"hbm_ue", "hbm_ue:1", "melted:1:5", "hbm_ue:9:5", "hbm_ue:1:0",
                          "hbm_ue:x:5", "hbm_ue:1:5x"}) {
    try {
      system.arm_fault(bad);
      FAIL() << bad << " was accepted";
    } catch (const Error& e) {
      // The message quotes the spec and the syntax it expects.
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("<kind>:<device>:<launch>"), std::string::npos);
    }
  }
  EXPECT_THROW(Health().arm(FaultKind::DeviceLost, 0), Error);
}

}  // namespace
}  // namespace trnsim
