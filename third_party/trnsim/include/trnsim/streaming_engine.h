// VectorE, ScalarE and GpSimdE: 128 lanes, one per SBUF partition, streaming a tile's free
// dimension (NKI architecture guide, "Vector Engine" / "Scalar Engine" cost models):
//   - an instruction with one input tile of N elements per partition takes about N cycles;
//   - a VectorE instruction with two input tiles (tensor_tensor) takes about 2N cycles;
//   - on NeuronCore-v3, VectorE's performance mode runs BF16/FP16 copies and tensor-scalar
//     ops at 4x and tensor-tensor ops at 2x the NeuronCore-v2 rate (Trainium2 guide);
//   - every instruction pays a static overhead of about 100 engine cycles, hidden only behind
//     long instructions (NKI performance guide, "Opt #5").
#pragma once

#include <cstdint>

#include "trnsim/instance.h"

namespace trnsim {

enum class Engine { Tensor = 0, Vector, Scalar, GpSimd, Dma };
constexpr int kEngineCount = 5;
const char* engine_name(Engine engine);

// Lanes (partitions) of VectorE, ScalarE and GpSimdE.
constexpr int64_t kEngineLanes = 128;
// Static overhead of one engine instruction, cycles (NKI performance guide: "in the order of
// ~100 cycles").
constexpr int64_t kInstructionOverheadCycles = 100;
// Assumption: the free size of one streaming instruction's tile, elements per partition. An
// eager op streams its tensors through SBUF in tiles of this size (8 KiB of fp32 per
// partition, so that several double-buffered tiles fit the 192 KiB of a partition).
constexpr int64_t kStreamTileElements = 2048;

// What one pass of a streaming engine over a tensor reads.
enum class Pass {
  OneInput,  // copies, casts, tensor-scalar arithmetic, activations, reductions
  TwoInput,  // tensor-tensor arithmetic
};

// Busy time of `engine` (Vector, Scalar or GpSimd) for one pass over `elements`, ns.
// `sixteen_bit`: the operands are BF16/FP16 (VectorE performance mode on NeuronCore-v3).
double streaming_engine_ns(const InstanceSpec& instance, Engine engine, uint64_t elements,
                           Pass pass = Pass::OneInput, bool sixteen_bit = false);

// The engine's clock, GHz.
double engine_ghz(const InstanceSpec& instance, Engine engine);

}  // namespace trnsim
