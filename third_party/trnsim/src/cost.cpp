#include "trnsim/cost.h"

#include <algorithm>

namespace trnsim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double engine_ghz(const InstanceSpec& instance, Engine engine) {
  switch (engine) {
    case Engine::Tensor: return instance.chip->tensor_ghz;
    case Engine::Vector: return instance.chip->vector_ghz;
    case Engine::Scalar: return instance.chip->scalar_ghz;
    case Engine::GpSimd: return instance.chip->gpsimd_ghz;
    case Engine::Dma: break;
  }
  return instance.chip->vector_ghz;
}

}  // namespace

const char* engine_name(Engine engine) {
  static const char* names[] = {"TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA"};
  return names[static_cast<int>(engine)];
}

double OpCost::duration_ns() const {
  double busiest = hbm_ns;
  for (double ns : engine_ns) busiest = std::max(busiest, ns);
  return kLaunchOverheadNs + busiest;
}

double peak_flops_per_ns(const InstanceSpec& instance, Precision precision) {
  const auto& chip = *instance.chip;
  double tflops = chip.bf16_tflops;
  if (precision == Precision::FP32) tflops = chip.fp32_tflops;
  if (precision == Precision::FP8) tflops = chip.fp8_tflops;
  return tflops * 1e3 / instance.logical_cores_per_chip;  // TFLOP/s = 1e3 FLOP/ns
}

OpCost matmul_cost(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k, int64_t n,
                   Precision precision, uint64_t bytes) {
  OpCost cost;
  cost.flops = 2.0 * batch * m * k * n;
  cost.bytes = bytes;
  cost.hbm_ns = static_cast<double>(bytes) / instance.core_hbm_gbps();
  if (cost.flops == 0) return cost;
  // Every tile is a full 128x128x512 pass through the array, padded or not.
  const double tiles = static_cast<double>(batch) * ceil_div(m, kTensorTileM) *
                       ceil_div(k, kTensorTileK) * ceil_div(n, kTensorTileN);
  const double tile_flops = 2.0 * kTensorTileM * kTensorTileK * kTensorTileN;
  // Filling the systolic array costs one column pass per output tile.
  const double output_tiles =
      static_cast<double>(batch) * ceil_div(m, kTensorTileM) * ceil_div(n, kTensorTileN);
  const double fill_ns = output_tiles * kTensorTileM / instance.chip->tensor_ghz /
                         instance.physical_cores_per_logical();
  cost.engine_ns[static_cast<int>(Engine::Tensor)] =
      tiles * tile_flops / peak_flops_per_ns(instance, precision) + fill_ns;
  return cost;
}

OpCost streaming_cost(const InstanceSpec& instance, Engine engine, uint64_t elements,
                      uint64_t bytes) {
  OpCost cost;
  cost.flops = static_cast<double>(elements);
  cost.bytes = bytes;
  cost.hbm_ns = static_cast<double>(bytes) / instance.core_hbm_gbps();
  // A logical core of several physical cores has that many copies of each engine.
  const double lanes_per_ns =
      kEngineLanes * engine_ghz(instance, engine) * instance.physical_cores_per_logical();
  cost.engine_ns[static_cast<int>(engine)] = static_cast<double>(elements) / lanes_per_ns;
  return cost;
}

double streaming_duration_ns(const InstanceSpec& instance, uint64_t bytes) {
  return kLaunchOverheadNs + static_cast<double>(bytes) / instance.core_hbm_gbps();
}

}  // namespace trnsim
