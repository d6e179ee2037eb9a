#include "trnsim/tensor_engine.h"

#include <algorithm>

namespace trnsim {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Contraction rows one instruction takes at a precision.
int64_t rows_per_instruction(const InstanceSpec& instance, Precision precision) {
  return precision == Precision::FP8 ? instance.chip->fp8_rows : kTensorRows;
}

// Cycles of MultiplyMoving over `n` moving columns, split into PSUM-bank tiles.
double moving_cycles(int64_t n) {
  const int64_t full = n / kPsumBankColumns, rest = n % kPsumBankColumns;
  double cycles = static_cast<double>(full) * std::max(kPsumBankColumns, kMatmulMinCycles);
  if (rest > 0) cycles += static_cast<double>(std::max(rest, kMatmulMinCycles));
  return cycles;
}

// Cycles of [m, k] @ [k, n] with A^T stationary (m output rows per stationary tile) and B
// moving. The loop nest: for each 128-row stationary block of m, for each group of up to 8 PSUM
// banks of n, for each contraction tile: load the stationary tile (in the background of the
// previous multiplies), then multiply every moving tile of the group.
double layout_cycles(int64_t m, int64_t k, int64_t n, int64_t rows, double cost_factor) {
  const int64_t m_tiles = ceil_div(m, kTensorColumns), k_tiles = ceil_div(k, rows);
  const int64_t group_columns = kPsumBanks * kPsumBankColumns;
  const int64_t full_groups = n / group_columns, rest = n % group_columns;
  const double load_stationary =
      static_cast<double>(std::min(m, kTensorColumns)) / kFastLoadStationary;
  auto group_cycles = [&](int64_t columns) {
    return std::max(load_stationary, moving_cycles(columns)) * cost_factor;
  };
  double per_k = static_cast<double>(full_groups) * group_cycles(group_columns);
  if (rest > 0) per_k += group_cycles(rest);
  return static_cast<double>(m_tiles) * static_cast<double>(k_tiles) * per_k;
}

}  // namespace

double tensor_engine_ns(const InstanceSpec& instance, int64_t batch, int64_t m, int64_t k,
                        int64_t n, Precision precision) {
  if (batch <= 0 || m <= 0 || k <= 0 || n <= 0) return 0.0;
  const double factor = precision == Precision::FP32 ? kFp32CostFactor : 1.0;
  const int64_t rows = rows_per_instruction(instance, precision);
  const double cycles = std::min(layout_cycles(m, k, n, rows, factor),
                                 layout_cycles(n, k, m, rows, factor)) *
                            static_cast<double>(batch) +
                        kArrayFillCycles;
  return cycles / instance.chip->tensor_ghz / instance.physical_cores_per_logical();
}

double peak_flops_per_ns(const InstanceSpec& instance, Precision precision) {
  // One multiply-add (2 FLOPs) per PE per cycle; FP8 double row contracts twice the rows.
  double per_cycle = 2.0 * kTensorColumns * rows_per_instruction(instance, precision);
  if (precision == Precision::FP32) per_cycle /= kFp32CostFactor;
  return per_cycle * instance.chip->tensor_ghz * instance.physical_cores_per_logical();
}

}  // namespace trnsim
