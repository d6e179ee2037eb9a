#include "trnsim/work.h"

#include <algorithm>
#include <array>
#include <utility>

namespace trnsim {
namespace {

struct EnginePass {
  Engine engine;
  Pass pass;
};

struct PassPlan {
  EnginePass passes[4];
  int count;
};

constexpr EnginePass kVector1{Engine::Vector, Pass::OneInput};
constexpr EnginePass kVector2{Engine::Vector, Pass::TwoInput};
constexpr EnginePass kScalar1{Engine::Scalar, Pass::OneInput};

// The passes of each streaming kernel: how the NKI kernels compute them (NKI tutorials: softmax
// in fused attention, layernorm with bn_stats/bn_aggr, RMSNorm; the activation instruction
// applies a per-row scale and bias before its function and can accumulate along the row in the
// same pass).
PassPlan plan_of(const Streaming& s) {
  switch (s.kernel) {
    case StreamingKernel::Elementwise:
      if (s.engine == Engine::Scalar) {
        // An activation; a second streamed operand is combined by a VectorE tensor-tensor pass.
        if (s.two_inputs) return {{kScalar1, kVector2}, 2};
        return {{kScalar1}, 1};
      }
      if (s.engine == Engine::GpSimd) return {{{Engine::GpSimd, Pass::OneInput}}, 1};
      return {{s.two_inputs ? kVector2 : kVector1}, 1};
    case StreamingKernel::Softmax:
      // max (VectorE), exp(x - max) with the row sum (ScalarE), x * 1/sum (VectorE).
      return {{kVector1, kScalar1, kVector1}, 3};
    case StreamingKernel::LogSoftmax:
      // max, exp with the row sum, x - max - log(sum) (one tensor-scalar pass).
      return {{kVector1, kScalar1, kVector1}, 3};
    case StreamingKernel::SoftmaxBackward:
      // sum(g * y) along the row, then y * (g - sum): two tensor-tensor passes.
      return {{kVector2, kVector2}, 2};
    case StreamingKernel::LogSoftmaxBackward:
      // g - exp(y) * sum(g): exp on ScalarE, the rest on VectorE.
      return {{kVector1, kScalar1, kVector2}, 3};
    case StreamingKernel::LayerNorm:
      // bn_stats (VectorE), (x - mean) * rstd as an activation (ScalarE), * weight + bias
      // (VectorE, tensor-tensor: the weight varies along the row).
      return {{kVector1, kScalar1, kVector2}, 3};
    case StreamingKernel::LayerNormBackward:
      // x-hat again, sums of g * w and g * w * x-hat, the input gradient, and the weight and
      // bias gradients' products.
      return {{kScalar1, kVector2, kVector2, kVector2}, 4};
    case StreamingKernel::RmsNorm:
      // sum of squares (ScalarE square with accumulation), x * rstd * weight (VectorE).
      return {{kScalar1, kVector2}, 2};
    case StreamingKernel::BatchNorm:
      // statistics (VectorE), normalization as an activation (ScalarE).
      return {{kVector1, kScalar1}, 2};
    case StreamingKernel::BatchNormBackward:
      return {{kVector2, kVector2, kScalar1}, 3};
  }
  return {{kVector1}, 1};
}

void add_passes(const InstanceSpec& instance, const Streaming& s, OpCost& cost) {
  const PassPlan plan = plan_of(s);
  for (int i = 0; i < plan.count; ++i) {
    cost.add_pass(instance, plan.passes[i].engine, s.elements, plan.passes[i].pass,
                  s.sixteen_bit);
  }
}

WorkTime computed(OpCost cost) {
  const double duration = cost.duration_ns();
  return {std::move(cost), duration};
}

// DMA engines busy for `duration_ns` moving `bytes` (a transfer has no launch overhead).
WorkTime transfer(double duration_ns, uint64_t bytes) {
  OpCost cost;
  cost.bytes = bytes;
  cost.engine_ns[static_cast<int>(Engine::Dma)] = duration_ns;
  return {cost, duration_ns};
}

WorkTime time_streaming(const InstanceSpec& instance, const Streaming& s, uint64_t bytes) {
  OpCost cost;
  cost.flops = static_cast<double>(s.elements);
  cost.set_bytes(instance, bytes);
  add_passes(instance, s, cost);
  return computed(std::move(cost));
}

WorkTime time_gather(const InstanceSpec& instance, const Gather& g, uint64_t bytes) {
  // It reads as many elements as it writes, plus the indices (and, accumulating, the elements
  // it adds to).
  const uint64_t gathered = (g.accumulates ? 3 : 2) * g.output_bytes + g.index_bytes;
  const bool rows = gathered < bytes;
  Streaming pass{StreamingKernel::Elementwise, Engine::GpSimd,
                 rows ? g.gathered_elements : g.table_elements};
  return time_streaming(instance, pass, rows ? gathered : bytes);
}

// Note [Attention cost]: fused attention is flash attention: the scores stay in SBUF/PSUM, so
// HBM traffic is the operands and results only, and the work is the instructions of its inner
// loop (NKI fused-attention tutorial and performance guide, "Opt #6": attention is bound by
// VectorE and ScalarE as much as by TensorE). Per (batch, head), over the Lq x Lk scores:
//   forward:  TensorE  S = Q K^T, O = P V, and P transposed for the second matmul (a matmul
//                      with the identity: one 128-column instruction per 128 x 128 block);
//             VectorE  the row max of S, copying P^T out of PSUM, rescaling O per key tile;
//             ScalarE  P = exp(S - max) with the row sums accumulated in the same instruction.
//   backward: TensorE  S again, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q, and the
//                      transposes of P and dS;
//             VectorE  dS = P * (dP - delta) (a two-input pass) and copying both transposes
//                      out of PSUM;
//             ScalarE  P = exp(S - lse) again.
// A causal mask skips the score tiles (128 query rows x 512 keys) wholly above the diagonal.
double causal_tile_fraction(int64_t lq, int64_t lk) {
  const int64_t q_tiles = (lq + kTensorColumns - 1) / kTensorColumns;
  const int64_t k_tiles = (lk + kPsumBankColumns - 1) / kPsumBankColumns;
  if (q_tiles == 0 || k_tiles == 0) return 1.0;
  int64_t kept = 0;
  for (int64_t i = 0; i < q_tiles; ++i) {
    // Query rows up to `last` see keys [0, last] (top-left aligned, as PyTorch's is_causal).
    const int64_t last = std::min((i + 1) * kTensorColumns, lq) - 1;
    kept += std::min(last / kPsumBankColumns + 1, k_tiles);
  }
  return static_cast<double>(kept) / static_cast<double>(q_tiles * k_tiles);
}

WorkTime time_attention(const InstanceSpec& instance, const Attention& a, uint64_t bytes) {
  const int64_t batch = a.batch, lq = a.lq, lk = a.lk, d = a.d, dv = a.dv;
  const bool sixteen_bit = a.precision != Precision::FP32;
  // {m, k, n} of each matmul, per (batch, head); a transpose of the scores is [Lq, 128] @
  // [128, Lk] in instruction count.
  const std::array<int64_t, 3> transpose{lq, kTensorRows, lk};
  std::vector<std::array<int64_t, 3>> matmuls = {{lq, d, lk}, {lq, lk, dv}, transpose};
  if (a.backward) {
    matmuls = {{lq, d, lk}, {lq, dv, lk}, {lk, lq, dv}, {lq, lk, d}, {lk, lq, d},
               transpose,   transpose};
  }
  const double fraction = a.causal ? causal_tile_fraction(lq, lk) : 1.0;
  OpCost cost;
  constexpr int kTensor = static_cast<int>(Engine::Tensor);
  for (size_t i = 0; i < matmuls.size(); ++i) {
    const auto& [m, k, n] = matmuls[i];
    cost.engine_ns[kTensor] += fraction * tensor_engine_ns(instance, batch, m, k, n, a.precision);
    const bool is_transpose = (a.backward && i >= 5) || (!a.backward && i == 2);
    if (!is_transpose) cost.flops += fraction * 2.0 * batch * m * k * n;
  }
  const auto scores = static_cast<uint64_t>(fraction * batch * lq * lk);
  cost.add_pass(instance, Engine::Scalar, scores);  // the exponentials
  if (a.backward) {
    cost.add_pass(instance, Engine::Vector, scores, Pass::TwoInput, sixteen_bit);
    cost.add_pass(instance, Engine::Vector, 2 * scores, Pass::OneInput, sixteen_bit);
  } else {
    cost.add_pass(instance, Engine::Vector, scores);  // the row max, from PSUM
    cost.add_pass(instance, Engine::Vector, scores, Pass::OneInput, sixteen_bit);
    // O = O * alpha + P V: once per key tile, over the [Lq, Dv] accumulator.
    const int64_t key_tiles = (lk + kPsumBankColumns - 1) / kPsumBankColumns;
    cost.add_pass(instance, Engine::Vector,
                  static_cast<uint64_t>(fraction * batch * lq * dv * key_tiles), Pass::TwoInput);
  }
  cost.set_bytes(instance, bytes);
  return computed(std::move(cost));
}

// The engine passes of `loops` (each its pass plan), charged per kind of pass with the elements
// of all loops together (one instruction stream per engine).
OpCost fused_passes(const InstanceSpec& instance, const std::vector<Streaming>& loops) {
  // Elements per (engine, pass kind): VectorE one- and two-input, ScalarE, GpSimdE.
  std::array<uint64_t, 4> elements{};
  bool sixteen_bit = false;
  for (const Streaming& loop : loops) {
    const PassPlan plan = plan_of(loop);
    for (int i = 0; i < plan.count; ++i) {
      const EnginePass& p = plan.passes[i];
      const int slot = p.engine == Engine::Vector ? (p.pass == Pass::OneInput ? 0 : 1)
                       : p.engine == Engine::Scalar ? 2
                                                    : 3;
      elements[slot] += loop.elements;
    }
    sixteen_bit = sixteen_bit || loop.sixteen_bit;
  }
  OpCost cost;
  for (uint64_t n : elements) cost.flops += static_cast<double>(n);
  cost.add_pass(instance, Engine::Vector, elements[0], Pass::OneInput, sixteen_bit);
  cost.add_pass(instance, Engine::Vector, elements[1], Pass::TwoInput, sixteen_bit);
  cost.add_pass(instance, Engine::Scalar, elements[2]);
  cost.add_pass(instance, Engine::GpSimd, elements[3]);
  return cost;
}

double busiest_engine_ns(const OpCost& cost) {
  return *std::max_element(cost.engine_ns.begin(), cost.engine_ns.end());
}

// Note [Fused kernel bound]
// A compiler-fused kernel is one launch whose HBM traffic is its argument buffers only (the
// intermediates it fused away stay on chip). Its loops are charged the instructions their
// bodies compile to, as the framework's compiler (Inductor) wrote them, and it decomposes some
// ops that Trainium runs with fewer instructions: GELU into erf arithmetic where ScalarE has a
// GELU activation function (nki.language activation functions: gelu, gelu_apprx_tanh),
// LayerNorm into reductions and arithmetic where the NKI layernorm tutorial uses
// bn_stats/bn_aggr. A compiler for Trainium need not emit more instructions for an op than its
// kernel alone runs, so a fused kernel costs no more engine time than its ops would alone
// (their pass plans, plan_of) while fusion still saves their HBM traffic and launches: the
// kernel takes the lesser, by its busiest engine, of the two. (Whether neuronx-cc, which
// receives StableHLO, runs GELU and LayerNorm whole or decomposed, no Neuron document says:
// docs/fidelity.md.)
WorkTime time_fused(const InstanceSpec& instance, const FusedKernel& kernel, uint64_t bytes) {
  OpCost cost = fused_passes(instance, kernel.loops);
  if (!kernel.fused_ops.empty()) {
    OpCost alone = fused_passes(instance, kernel.fused_ops);
    if (busiest_engine_ns(alone) < busiest_engine_ns(cost)) cost = alone;
  }
  cost.set_bytes(instance, bytes);
  return computed(std::move(cost));
}

}  // namespace

WorkTime time_of(const InstanceSpec& instance, const Work& work) {
  const uint64_t bytes = work.hbm_bytes;
  if (const auto* s = std::get_if<Streaming>(&work.what)) return time_streaming(instance, *s, bytes);
  if (const auto* m = std::get_if<Matmul>(&work.what)) {
    return computed(matmul_cost(instance, m->batch, m->m, m->k, m->n, m->precision, bytes));
  }
  if (const auto* g = std::get_if<Gather>(&work.what)) return time_gather(instance, *g, bytes);
  if (const auto* a = std::get_if<Attention>(&work.what)) {
    return time_attention(instance, *a, bytes);
  }
  if (const auto* f = std::get_if<FusedKernel>(&work.what)) return time_fused(instance, *f, bytes);
  if (const auto* c = std::get_if<Copy>(&work.what)) {
    return transfer(copy_duration_ns(instance, c->kind, c->bytes), c->bytes);
  }
  if (const auto* r = std::get_if<HostRoundTrip>(&work.what)) {
    return transfer(copy_duration_ns(instance, CopyKind::DeviceToHost, r->bytes_out) +
                        copy_duration_ns(instance, CopyKind::HostToDevice, r->bytes_back),
                    r->bytes_out + r->bytes_back);
  }
  const auto& c = std::get<CollectiveOp>(work.what);
  // The collective cores drive the core's DMA engines; its compute engines stay free. The
  // collective holds the core's DMA queues (its HBM share) for its bytes' time at their full
  // rate (Note [Collective DMA share] in collective.h).
  const CollectiveCost cc = collective_cost(instance, c.op, c.bytes, c.ranks, c.algorithms);
  OpCost cost;
  cost.bytes = static_cast<uint64_t>(cc.dma_bytes);
  cost.hbm_ns = cc.dma_ns;
  return {cost, cc.duration_ns};
}

}  // namespace trnsim
