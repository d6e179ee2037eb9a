// TensorE: the 128x128 systolic array, costed instruction by instruction.
//
// A matmul runs as nc_matmul instructions (NKI architecture guide, "Tensor Engine"): a
// *stationary* tile of up to 128 (contraction, partitions) x 128 (output rows) is loaded into the
// array (LoadStationary), then a *moving* tile of up to 128 x 512 (output columns) streams
// through it (MultiplyMoving), accumulating fp32 results in a PSUM bank of 512 columns.
// The guide's cost model, per instruction:
//   - MultiplyMoving's initiation interval is max(N, MM_INIT_LATENCY = 64) TensorE cycles for a
//     moving tile of N columns, at BF16/FP16/FP8; FP32 costs about 4x.
//   - LoadStationary runs in the background of the previous MultiplyMoving and is up to 4x
//     faster than a MultiplyMoving of the same free size ("fast LoadStationary"), so a pair
//     costs max(LS, MM).
//   - NeuronCore-v3 FP8 "double row" contracts 256 rows per instruction (2x the BF16 rate).
// The kernel may compute C or C^T = B^T A^T; it picks the cheaper (the short operand moving).
// Results leave PSUM through VectorE/ScalarE copies ("PSUM evacuation"), charged by cost.cpp.
#pragma once

#include <cstdint>

#include "trnsim/instance.h"

namespace trnsim {

// Matmul input precision: picks the TensorE rate.
enum class Precision { FP8, BF16, FP32 };

// TensorE geometry (NKI architecture guide): 128 contraction rows (SBUF partitions) x 128
// stationary columns; one PSUM bank holds 512 fp32 accumulators per partition; a core has 8
// banks, so up to 8 x 512 output columns accumulate while one stationary tile is reused.
constexpr int64_t kTensorRows = 128, kTensorColumns = 128, kPsumBankColumns = 512,
                  kPsumBanks = 8;
// MM_INIT_LATENCY: the shortest initiation interval of a MultiplyMoving, cycles (NKI
// performance guide, "Opt #7", measured on NeuronCore-v2; assumed the same on v3).
constexpr int64_t kMatmulMinCycles = 64;
// FP32 matmul instructions cost about 4x the BF16 ones (architecture guide).
constexpr int64_t kFp32CostFactor = 4;
// LoadStationary is up to 4x faster than a MultiplyMoving of the same free size.
constexpr int64_t kFastLoadStationary = 4;
// Assumption: cycles to fill and drain the array once per op (a tile crossing 128 rows and
// 128 columns), exposed once since later instructions pipeline behind it.
constexpr int64_t kArrayFillCycles = kTensorRows + kTensorColumns;

// Busy time of one logical core's TensorE(s) for batch x [m, k] @ [k, n], ns. A logical core of
// several physical cores (Trn2 LNC=2) splits the work evenly over their TensorEs.
double tensor_engine_ns(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k,
                        int64_t n, Precision precision);

// Peak dense FLOP/ns of one logical core: 128 x 128 multiply-adds per TensorE cycle per
// physical core, at the precision's rate. Derived from the clock, not taken from a table.
double peak_flops_per_ns(const InstanceSpec& instance, Precision precision);

}  // namespace trnsim
