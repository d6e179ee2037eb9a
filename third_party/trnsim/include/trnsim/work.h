// Note [Work descriptions]
// The vocabulary in which a framework tells trnsim what a NeuronCore is asked to do: a small set
// of work descriptions in the hardware's own terms (TensorE matmul tiles, streaming passes on a
// named engine, gathers, fused attention, the passes of a compiler-fused kernel, DMA copies,
// host round trips, collectives). time_of() turns one into engine occupancy and a duration;
// every cost formula of the simulator lives behind it, so a framework only translates its own
// operations into these descriptions and never computes a cost itself.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "trnsim/collective.h"
#include "trnsim/cost.h"
#include "trnsim/instance.h"
#include "trnsim/streaming_engine.h"
#include "trnsim/tensor_engine.h"
#include "trnsim/transfer.h"

namespace trnsim {

// The instruction sequences of streaming ops that NKI kernels run as several passes (NKI
// tutorials: softmax in fused attention, layernorm with bn_stats/bn_aggr, RMSNorm).
enum class StreamingKernel : uint8_t {
  Elementwise,  // one pass on the op's engine (see Streaming)
  Softmax,
  LogSoftmax,
  SoftmaxBackward,
  LogSoftmaxBackward,
  LayerNorm,
  LayerNormBackward,
  RmsNorm,
  BatchNorm,
  BatchNormBackward,
};

// Elementwise arithmetic, reductions and the composite kernels above, over `elements`.
struct Streaming {
  StreamingKernel kernel = StreamingKernel::Elementwise;
  // The engine of an Elementwise kernel: VectorE (arithmetic), ScalarE (activation functions:
  // with a second streamed operand, a VectorE tensor-tensor pass follows) or GpSimdE.
  Engine engine = Engine::Vector;
  uint64_t elements = 0;
  bool two_inputs = false;   // two operands streamed element by element (tensor-tensor)
  bool sixteen_bit = false;  // BF16/FP16 operands (VectorE performance mode on NeuronCore-v3)
};

// batch x [m, k] @ [k, n] on TensorE; the results leave PSUM through VectorE/ScalarE copies.
struct Matmul {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  Precision precision = Precision::FP32;
};

// A gather (index_select, embedding, take, ...) on GpSimdE: it moves the rows it touches, not
// the table it picks them from, unless the table is the smaller (rows picked many times). An
// in-place indexed write (index_copy_, scatter_, ...) is the same movement the other way: it
// reads the source rows and writes them where the index says.
struct Gather {
  uint64_t gathered_elements = 0;  // elements it writes
  uint64_t table_elements = 0;     // elements of its largest operand
  uint64_t output_bytes = 0;       // bytes of the elements it writes
  uint64_t index_bytes = 0;
  bool accumulates = false;  // reads the elements it overwrites too (index_add_, scatter_add_)
};

// Fused (flash) attention over `batch` (batch x heads) of [lq, d] queries and [lk, d] keys and
// [lk, dv] values (Note [Attention cost] in work.cpp).
struct Attention {
  int64_t batch = 0, lq = 0, lk = 0, d = 0, dv = 0;
  Precision precision = Precision::FP32;
  bool causal = false;
  bool backward = false;
};

// A compiler-fused kernel: one streaming loop per loop nest, all in one launch. `fused_ops`,
// when not empty, are the ops fused into it as each would run alone (their own pass plans):
// the kernel takes no more engine time than they would (Note [Fused kernel bound] in work.cpp).
struct FusedKernel {
  std::vector<Streaming> loops;
  std::vector<Streaming> fused_ops;
};

// A DMA copy over the host link, HBM or NeuronLink.
struct Copy {
  CopyKind kind = CopyKind::HostToDevice;
  uint64_t bytes = 0;
};

// An op the host runs for the device: its inputs out to the host, its results back.
struct HostRoundTrip {
  uint64_t bytes_out = 0, bytes_back = 0;
};

// A collective (or point-to-point transfer) of `bytes` among `ranks`, timed from the last
// rank's arrival.
struct CollectiveOp {
  Collective op = Collective::AllReduce;
  uint64_t bytes = 0;
  std::vector<RankPlace> ranks;
  CollectiveAlgorithms algorithms = CollectiveAlgorithms::Current;
};

struct Work {
  std::variant<Streaming, Matmul, Gather, Attention, FusedKernel, Copy, HostRoundTrip,
               CollectiveOp>
      what;
  // HBM traffic of compute work (reads + writes); transfers and collectives carry their own.
  uint64_t hbm_bytes = 0;
};

// What a piece of work occupies and for how long on one logical core.
struct WorkTime {
  OpCost cost;             // busy time per engine, FLOPs, HBM bytes
  double duration_ns = 0;  // from its start to its end on its queue
};

WorkTime time_of(const InstanceSpec& instance, const Work& work);

}  // namespace trnsim
