// Uses the neuron device through libtorch alone (no torch_neuron:: call), as a program ported
// from CUDA would: see CMakeLists.txt.
#include <cstdio>

#include <torch/torch.h>

int main() {
  const torch::Device neuron("neuron:0");
  const torch::Tensor x = torch::arange(6, torch::kFloat).reshape({2, 3});
  const torch::Tensor y = (x.to(neuron) * 2).sum();
  std::printf("device: %s\n", y.device().str().c_str());
  std::printf("sum: %g\n", y.item<float>());
  return y.item<float>() == 30.0f ? 0 : 1;
}
