// The formulas of Note [ISA instruction costs] (isa_cost.h), each quoted from the ISA stub of
// aws-neuron-sdk commit 1db4d74e (nki/api/nki/isa/__init__.py) unless marked an assumption.
#include "trnsim/isa_cost.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>

#include "trnsim/error.h"
#include "trnsim/tensor_engine.h"

namespace trnsim {
namespace {

double at_least_min_ii(double cycles) { return std::max<double>(kIsaMinII, cycles); }

bool is_bf16(IsaDtype d) { return d == IsaDtype::Bf16; }

void require(const IsaInstruction& ins, bool ok) {
  if (!ok) {
    throw Error(std::string("nki.isa.") + isa_kind_name(ins.kind) + " cannot run on " +
                engine_name(ins.engine));
  }
}

}  // namespace

const char* isa_kind_name(IsaKind kind) {
  static const char* const names[kIsaKindCount] = {
      "dma_copy",      "nc_matmul",       "nc_transpose",   "tensor_copy",
      "tensor_tensor", "tensor_scalar",   "tensor_reduce",  "tensor_partition_reduce",
      "activation",    "activation_reduce", "memset",       "iota",
      "affine_select", "bn_stats",        "bn_aggr",        "select_reduce",
      "tensor_tensor_scan", "dropout",    "reciprocal",     "core_barrier"};
  const auto i = static_cast<int>(kind);
  return i >= 0 && i < kIsaKindCount ? names[i] : "unknown";
}

double isa_cycles(const IsaInstruction& ins) {
  const double n = static_cast<double>(ins.elements);
  switch (ins.kind) {
    case IsaKind::DmaCopy:
      throw Error("dma_copy has no engine cycles: its time follows from its bytes");
    case IsaKind::NcMatmul: {
      require(ins, ins.engine == Engine::Tensor);
      // max(min(64, N_stationary), N_moving); 4x for float32 inputs. kMatmulMinCycles is the
      // same 64 (MM_INIT_LATENCY, tensor_engine.h).
      double cycles = std::max<double>(
          std::min<double>(kMatmulMinCycles, static_cast<double>(ins.stationary_elements)), n);
      if (ins.in_dtype == IsaDtype::Fp32) cycles *= kFp32CostFactor;
      if (ins.double_row) cycles /= 2;  // "2x matmul throughput" (matmul_perf_mode.double_row)
      return cycles;
    }
    case IsaKind::NcTranspose:
      if (ins.engine == Engine::Tensor) {
        // max(P, min(64, F)), back-to-back transposes of one shape on TensorE.
        return std::max<double>(static_cast<double>(ins.partitions),
                                std::min<double>(kMatmulMinCycles, n));
      }
      require(ins, ins.engine == Engine::Vector);
      return at_least_min_ii(n);
    case IsaKind::TensorTensor:
      require(ins, ins.engine != Engine::Tensor);
      if (ins.psum_and_sbuf) return at_least_min_ii(n);
      if (is_bf16(ins.in_dtype) && is_bf16(ins.out_dtype) &&
          (ins.op == IsaOp::Add || ins.op == IsaOp::Multiply || ins.op == IsaOp::Subtract)) {
        return at_least_min_ii(n);
      }
      return at_least_min_ii(2 * n);
    case IsaKind::TensorReduce:
      require(ins, ins.engine == Engine::Vector);
      // N/2 for bf16 in and out with add or maximum; N otherwise (no MIN_II in the table).
      if (is_bf16(ins.in_dtype) && is_bf16(ins.out_dtype) &&
          (ins.op == IsaOp::Add || ins.op == IsaOp::Maximum)) {
        return n / 2;
      }
      return n;
    case IsaKind::TensorPartitionReduce:
      // Assumption: the stub gives no cost; GpSimd's start-up plus one pass over the input.
      require(ins, ins.engine == Engine::GpSimd);
      return kGpSimdStartCycles + n;
    case IsaKind::Activation:
      require(ins, ins.engine == Engine::Scalar);
      return at_least_min_ii(n);
    case IsaKind::ActivationReduce:
      require(ins, ins.engine == Engine::Scalar);
      return at_least_min_ii(n) + kIsaMinII;
    case IsaKind::Memset:
      require(ins, ins.engine != Engine::Tensor);
      if (ins.zero_fill &&
          (ins.out_dtype == IsaDtype::Bf16 || ins.out_dtype == IsaDtype::Fp16)) {
        return at_least_min_ii(n / 2);
      }
      return at_least_min_ii(n);
    case IsaKind::Iota:
    case IsaKind::AffineSelect:
      require(ins, ins.engine == Engine::GpSimd);
      return kGpSimdStartCycles + n;
    case IsaKind::BnAggr:
      require(ins, ins.engine == Engine::Vector);
      return at_least_min_ii(13 * (n / 3));
    case IsaKind::Reciprocal:
      require(ins, ins.engine == Engine::Vector);
      return at_least_min_ii(8 * n);
    case IsaKind::TensorTensorScan:
      require(ins, ins.engine == Engine::Vector);
      return at_least_min_ii(2 * n);
    case IsaKind::SelectReduce:
      // Assumption: no formula in the stub; two input tiles take about 2N cycles (NKI
      // architecture guide, "Vector Engine").
      require(ins, ins.engine == Engine::Vector);
      return at_least_min_ii(2 * n);
    case IsaKind::TensorCopy:
    case IsaKind::TensorScalar:
    case IsaKind::BnStats:
    case IsaKind::Dropout:
      require(ins, ins.engine != Engine::Tensor && ins.engine != Engine::Dma);
      return at_least_min_ii(n);
    case IsaKind::CoreBarrier:
      throw Error("core_barrier has no engine cycles: the kernel schedule joins the programs "
                  "there");
  }
  throw Error("unknown nki.isa instruction kind " +
              std::to_string(static_cast<int>(ins.kind)));
}

double isa_duration_ns(const InstanceSpec& instance, const IsaInstruction& ins) {
  if (ins.engine == Engine::Dma) throw Error("a dma_copy's duration follows from its bytes");
  const double factor = ins.strided && instance.chip->strided_access_half_rate ? 2.0 : 1.0;
  return factor * isa_cycles(ins) / engine_ghz(instance, ins.engine);
}

double dma_payload_efficiency(double descriptor_bytes) {
  if (!(descriptor_bytes > 0)) throw Error("a DMA descriptor moves at least one byte");
  const auto& curve = kDmaPayloadCurve;
  const size_t n = std::size(curve);
  if (descriptor_bytes <= curve[0].bytes) {
    return curve[0].fraction * descriptor_bytes / curve[0].bytes;  // a fixed time per descriptor
  }
  if (descriptor_bytes >= curve[n - 1].bytes) return curve[n - 1].fraction;
  size_t i = 1;
  while (curve[i].bytes < descriptor_bytes) ++i;
  const double t = std::log2(descriptor_bytes / curve[i - 1].bytes) /
                   std::log2(curve[i].bytes / curve[i - 1].bytes);
  return curve[i - 1].fraction + t * (curve[i].fraction - curve[i - 1].fraction);
}

uint64_t isa_dma_bytes(const IsaInstruction& ins) {
  if (ins.bytes == 0 || ins.descriptors == 0) return ins.bytes;
  const double bytes = static_cast<double>(ins.bytes);
  const double per_descriptor = bytes / static_cast<double>(ins.descriptors);
  return static_cast<uint64_t>(std::llround(bytes / dma_payload_efficiency(per_descriptor)));
}

}  // namespace trnsim
