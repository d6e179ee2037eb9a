// The C++ version of
//
//   x = torch.randn(1024, 1024).to("neuron")
//   y = (x @ x).relu().sum()
//   print(y.item(), torch.neuron.device_count())
//
// Build and run: see CMakeLists.txt.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <torch/torch.h>
#include <torch_neuron/torch_neuron.h>

int main() {
  const int devices = torch_neuron::init();  // checks the environment, counts devices
  const torch::Device neuron("neuron:0");

  torch::Tensor x_cpu = torch::randn({1024, 1024});
  torch::Tensor x = x_cpu.to(neuron);  // now lives in the simulated HBM of neuron:0
  const double y = x.matmul(x).relu().sum().item<double>();
  const double expected = x_cpu.matmul(x_cpu).relu().sum().item<double>();

  // Waits for neuron:0; returns when its queued work would have finished on Trainium (ns).
  const double device_ns = torch_neuron::synchronize(0);

  std::printf("result: %.6g (CPU: %.6g)\n", y, expected);
  std::printf("devices: %d on %s\n", devices, torch_neuron::instance_name().c_str());
  std::printf("simulated device time: %.1f us\n", device_ns / 1e3);

  const double rel_err = std::abs(y - expected) / std::max(std::abs(expected), 1e-12);
  if (!(rel_err <= 1e-4)) {
    std::fprintf(stderr, "MISMATCH: relative error %.3g\n", rel_err);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
