#include "trnsim/streaming_engine.h"

namespace trnsim {

const char* engine_name(Engine engine) {
  static const char* names[] = {"TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA"};
  return names[static_cast<int>(engine)];
}

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

double streaming_engine_ns(const InstanceSpec& instance, Engine engine, uint64_t elements,
                           Pass pass, bool sixteen_bit) {
  if (elements == 0) return 0.0;
  // A logical core of several physical cores has that many copies of each engine and splits
  // the partitions' rows over them.
  const auto cores = static_cast<uint64_t>(instance.physical_cores_per_logical());
  const uint64_t per_lane = (elements + kEngineLanes * cores - 1) / (kEngineLanes * cores);
  double cycles_per_element = 1.0;
  if (engine == Engine::Vector) {
    if (pass == Pass::TwoInput) cycles_per_element = 2.0;
    if (sixteen_bit && instance.chip->vector_performance_mode) {
      cycles_per_element /= pass == Pass::TwoInput ? 2.0 : 4.0;
    }
  }
  const uint64_t instructions = (per_lane + kStreamTileElements - 1) / kStreamTileElements;
  const double cycles = static_cast<double>(per_lane) * cycles_per_element +
                        static_cast<double>(instructions) * kInstructionOverheadCycles;
  return cycles / engine_ghz(instance, engine);
}

}  // namespace trnsim
