// The C++ API of torch_neuron through libtorch: "neuron:0" parses, tensors round-trip, the
// caching allocator and the simulated clock behave.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch_neuron/torch_neuron.h>

namespace {

TEST(NeuronDevice, ParsesNeuronDeviceString) {
  torch_neuron::init();
  const torch::Device device("neuron:1");
  EXPECT_EQ(device.type(), c10::DeviceType::PrivateUse1);
  EXPECT_EQ(device.index(), 1);
  EXPECT_EQ(device.str(), "neuron:1");
}

TEST(NeuronDevice, DefaultInstanceHasFourCores) {
  EXPECT_EQ(torch_neuron::instance_name(), "trn2.3xlarge");
  EXPECT_EQ(torch_neuron::device_count(), 4);
}

TEST(NeuronDevice, RoundTripMatchesCpu) {
  auto cpu = torch::randn({64, 33});
  auto dev = cpu.to(torch::Device("neuron:0"));
  EXPECT_TRUE(dev.device().is_privateuseone());
  EXPECT_TRUE(torch::equal(dev.cpu(), cpu));
  // Non-contiguous and dtype-converting copies.
  auto t = dev.t().to(torch::kBFloat16).cpu();
  EXPECT_TRUE(torch::equal(t, cpu.t().to(torch::kBFloat16)));
}

TEST(NeuronDevice, CrossDeviceCopy) {
  auto cpu = torch::arange(100, torch::kFloat32);
  auto a = cpu.to(torch::Device("neuron:0"));
  auto b = a.to(torch::Device("neuron:3"));
  EXPECT_EQ(b.device().index(), 3);
  EXPECT_TRUE(torch::equal(b.cpu(), cpu));
}

TEST(NeuronDevice, DeviceOpMatchesCpuAndIsCounted) {
  torch_neuron::clear_op_tracking();
  auto a = torch::randn({8, 8});
  auto b = torch::randn({8, 8});
  auto c = torch::mm(a.to("neuron"), b.to("neuron")).cpu();
  // The same CPU kernel runs on device memory: bit-identical.
  EXPECT_TRUE(torch::equal(c, torch::mm(a, b)));
  EXPECT_EQ(torch_neuron::get_executed_ops().at("aten::mm"), 1);
  EXPECT_TRUE(torch_neuron::get_fallback_ops().empty());
}

TEST(NeuronDevice, PolicyFallbackOpIsCounted) {
  torch_neuron::clear_op_tracking();
  auto a = torch::randn({4, 4}) + 4 * torch::eye(4);
  auto inv = torch::linalg_inv(a.to("neuron"));
  EXPECT_TRUE(torch::allclose(inv.cpu(), torch::linalg_inv(a)));
  EXPECT_EQ(inv.device().type(), c10::DeviceType::PrivateUse1);
  EXPECT_EQ(torch_neuron::get_fallback_ops().count("aten::linalg_inv_ex"), 1u);
}

TEST(NeuronDevice, CopiesAdvanceTheSimulatedClock) {
  const double before = torch_neuron::synchronize(2);
  auto x = torch::ones({1 << 20}).to(torch::Device("neuron:2"));
  const double after = torch_neuron::synchronize(2);
  // 4 MiB over the host link takes well over 100 microseconds of simulated time.
  EXPECT_GT(after - before, 100e3);
}

TEST(NeuronDevice, InvalidDeviceIndexNamesTheRange) {
  try {
    torch::zeros({2}, torch::Device("neuron:99"));
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("neuron:0..neuron:3"), std::string::npos) << e.what();
  }
}

}  // namespace
