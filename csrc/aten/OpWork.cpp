#include "aten/OpWork.h"

#include <ATen/core/function_schema.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

namespace torch_neuron {
namespace {

using trnsim::StreamingKernel;

// The ops that NKI kernels run as a sequence of passes (trnsim's StreamingKernel), by base name.
const std::pair<std::string_view, StreamingKernel> kStreamingKernels[] = {
    {"softmax", StreamingKernel::Softmax},
    {"log_softmax", StreamingKernel::LogSoftmax},
    {"softmax_backward_data", StreamingKernel::SoftmaxBackward},
    {"log_softmax_backward_data", StreamingKernel::LogSoftmaxBackward},
    {"native_layer_norm", StreamingKernel::LayerNorm},
    {"native_layer_norm_backward", StreamingKernel::LayerNormBackward},
    {"fused_rms_norm", StreamingKernel::RmsNorm},
    {"native_batch_norm", StreamingKernel::BatchNorm},
    {"native_batch_norm_backward", StreamingKernel::BatchNormBackward},
};

StreamingKernel streaming_kernel(std::string_view base) {
  for (const auto& [op, kernel] : kStreamingKernels) {
    if (op == base) return kernel;
  }
  return StreamingKernel::Elementwise;
}

trnsim::Engine engine_of(OpClass op_class) {
  switch (op_class) {
    case OpClass::Scalar:
      return trnsim::Engine::Scalar;
    case OpClass::GpSimd:
      return trnsim::Engine::GpSimd;
    default:
      return trnsim::Engine::Vector;
  }
}

// The streaming passes of an op of class `op_class` (a streaming class) and base name `base`:
// the eager charge of a streaming op and a fused kernel's bound (eager_streaming) alike.
trnsim::Streaming op_passes(OpClass op_class, std::string_view base, uint64_t elements,
                            bool two_inputs, bool sixteen_bit) {
  return {streaming_kernel(base), engine_of(op_class), elements, two_inputs, sixteen_bit};
}

trnsim::Work streaming(trnsim::Engine engine, int64_t elements, uint64_t bytes) {
  return {trnsim::Streaming{StreamingKernel::Elementwise, engine,
                            static_cast<uint64_t>(elements)},
          bytes};
}

// The largest tensor among the outputs, the tensor that sizes most ops' work; nullptr when there
// is none. Points into `outputs` (no reference counting: this runs for every op).
const at::Tensor* largest_output(c10::ArrayRef<c10::IValue> outputs) {
  const at::Tensor* best = nullptr;
  auto consider = [&best](const c10::IValue& v) {
    const at::Tensor& t = v.toTensor();
    if (t.defined() && (best == nullptr || t.numel() > best->numel())) best = &t;
  };
  for (const auto& v : outputs) {
    if (v.isTensor()) {
      consider(v);
    } else if (v.isTensorList()) {
      for (const auto& element : v.toListRef()) consider(element);
    }
  }
  return best;
}

int64_t max_numel(c10::ArrayRef<at::Tensor> tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n = std::max<int64_t>(n, t.numel());
  return n;
}

// Matmul-like ops: output [..., M, N]; K is the contracted size of the first matrix operand,
// which is input 0 for mm/bmm/mv/dot and input 1 (after the bias) for the add* forms.
trnsim::Work matmul(const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                    const at::Tensor& out, uint64_t bytes) {
  const bool has_bias = name.find("::add") != std::string::npos ||
                        name.find("::_addmm") != std::string::npos;
  const size_t lhs_index = has_bias && inputs.size() >= 3 ? 1 : 0;
  if (inputs.size() <= lhs_index || !out.defined()) {
    return streaming(trnsim::Engine::Vector, max_numel(inputs), bytes);
  }
  const at::Tensor& lhs = inputs[lhs_index];
  // An outer product (addr, outer, ger) contracts over nothing: K = 1.
  const bool outer = name.find("::addr") != std::string::npos ||
                     name.find("::outer") != std::string::npos ||
                     name.find("::ger") != std::string::npos;
  const int64_t k = outer ? 1 : lhs.dim() >= 1 ? lhs.size(-1) : 1;
  const int64_t n = out.dim() >= 2 ? out.size(-1) : 1;
  const int64_t m = out.dim() >= 2 ? out.size(-2) : std::max<int64_t>(out.numel(), 1);
  int64_t batch = out.dim() >= 2 ? out.numel() / std::max<int64_t>(m * n, 1) : 1;
  // addbmm sums its batch of products into one [m, n] result: the batch is the operand's.
  if (lhs.dim() >= 3) {
    batch = std::max<int64_t>(batch, lhs.numel() / std::max<int64_t>(lhs.size(-1) *
                                                                       lhs.size(-2), 1));
  }
  // A decomposed complex matmul is four real ones (re*re, im*im, re*im, im*re).
  if (out.is_complex()) batch *= 4;
  return {trnsim::Matmul{batch, m, k, n, matmul_precision(lhs.scalar_type())}, bytes};
}

// Convolution as the matmul the hardware runs (im2col): output positions x output channels,
// contracted over input channels per group x kernel size. Backward (grad input and grad weight)
// does about twice the forward work, sized by the incoming gradient.
trnsim::Work convolution(const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                         const at::Tensor& out, uint64_t bytes) {
  const bool backward = name.find("backward") != std::string::npos;
  // The weight comes after the activation in every convolution signature; a bias is 1-D.
  const at::Tensor* weight = nullptr;
  for (const auto& t : inputs) {
    if (t.defined() && t.dim() >= 3) weight = &t;
  }
  if (weight == &inputs.front() && inputs.size() > 1) weight = nullptr;
  const at::Tensor& activation = backward && !inputs.empty() ? inputs.front() : out;
  if (weight == nullptr || !activation.defined() || activation.dim() < 3) {
    return streaming(trnsim::Engine::Vector, max_numel(inputs), bytes);
  }
  const int64_t channels_out = weight->size(0);
  const int64_t k = weight->numel() / std::max<int64_t>(channels_out, 1);
  const int64_t positions = activation.numel() / std::max<int64_t>(activation.size(1), 1);
  return {trnsim::Matmul{backward ? 2 : 1, positions, k, channels_out,
                         matmul_precision(weight->scalar_type())},
          bytes};
}

bool is_gather(std::string_view base) {
  return base == "index_select" || base == "embedding" || base == "gather" || base == "take" ||
         base == "index";
}

// Note [Indexed writes]
// An in-place indexed write reads its index and source and writes the entries they name: a
// KV-cache update (Hugging Face's StaticCache runs index_copy_ at one position) writes that
// position, not the cache. Sized as other ops are, by the largest operand and every operand's
// bytes, each decode step's cache update cost a pass over the whole cache. The entries written:
// the index's elements for the scatters (a larger source is read only where the index is), the
// source's for index_copy_, index_add_ and index_reduce_, the largest of the indices and the
// values for index_put_ (the values broadcast over the indexed positions). index_add_,
// index_reduce_, scatter_add_, scatter_reduce_ and scatter_'s reduce overloads combine with
// what they overwrite, so they read those entries too; index_put_'s accumulate flag is not
// seen here, so it is charged as a write. A compiled kernel's indirect writes follow the same
// rule (Note [Fused kernel cost] in torch_neuron/compile/scheduling.py). Out-of-place forms
// write a whole new tensor: unchanged.
struct IndexedWrite {
  uint64_t written = 0;  // elements
  uint64_t index_bytes = 0;
  bool accumulates = false;
};

// The write of an in-place indexed update `name` ("aten::index_copy_", base name `base`) of
// `inputs` (self first, then its tensors in schema order); nullopt for any other op.
std::optional<IndexedWrite> indexed_write(std::string_view name, std::string_view base,
                                          c10::ArrayRef<at::Tensor> inputs) {
  if (base.empty() || base.back() != '_' || inputs.size() < 2 || !inputs[0].defined()) {
    return std::nullopt;
  }
  const bool scatter = base.rfind("scatter", 0) == 0;
  const bool by_source =
      base == "index_copy_" || base == "index_add_" || base == "index_reduce_";
  const bool put = base == "index_put_" || base == "index_put_impl_";
  if (!scatter && !by_source && !put) return std::nullopt;
  IndexedWrite w;
  // scatter_'s .reduce and .value_reduce overloads combine too.
  w.accumulates = combines_by_name(base) || name.find("reduce") != std::string_view::npos;
  if (scatter) {
    w.written = static_cast<uint64_t>(inputs[1].numel());
    w.index_bytes = inputs[1].nbytes();
  } else if (by_source) {
    if (inputs.size() < 3) return std::nullopt;
    w.written = static_cast<uint64_t>(inputs[2].numel());
    w.index_bytes = inputs[1].nbytes();
  } else {
    // index_put_(self, indices, values): the indices are the tensors between self and values.
    for (size_t i = 1; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) continue;
      w.written = std::max<uint64_t>(w.written, static_cast<uint64_t>(inputs[i].numel()));
      if (i + 1 < inputs.size()) w.index_bytes += inputs[i].nbytes();
    }
  }
  return w;
}

// The bytes of a gather's integer operands (its indices).
uint64_t index_bytes(c10::ArrayRef<at::Tensor> inputs) {
  uint64_t bytes = 0;
  for (const auto& t : inputs) {
    if (t.defined() && !c10::isFloatingType(t.scalar_type()) &&
        !c10::isComplexType(t.scalar_type())) {
      bytes += t.nbytes();
    }
  }
  return bytes;
}

// Pairwise distances (cdist, pdist and their backward): every output element, or every element
// of the input gradient, combines two rows of D features, D element operations, where any
// other streaming op does one per element. (torch.cdist takes the matmul form for p = 2 on
// large inputs; these are the other cases.)
bool is_pairwise_distance(std::string_view base) {
  return base == "cdist_forward" || base == "cdist_backward" || base == "pdist_forward" ||
         base == "pdist_backward";
}

// The element operations of a pairwise-distance op: pairs x features.
int64_t pairwise_distance_elements(std::string_view base, c10::ArrayRef<at::Tensor> inputs,
                                   const at::Tensor& out) {
  // The features are the last dimension of the first point set: the first argument of the
  // forward, the second of the backward (after the incoming gradient); the pairs are the
  // distance matrix (the forward's output, the backward's distances).
  const bool backward = base.find("backward") != std::string_view::npos;
  const size_t points = backward ? 1 : 0;
  int64_t pairs = 0;
  const int64_t features =
      inputs.size() > points && inputs[points].defined() && inputs[points].dim() >= 2
          ? inputs[points].size(-1)
          : 1;
  if (!backward) {
    pairs = out.defined() ? out.numel() : 0;
  } else {
    // cdist_backward(grad, x1, x2, p, cdist) and pdist_backward(grad, self, p, pdist): the
    // distances are the last tensor argument.
    for (const auto& t : inputs) {
      if (t.defined()) pairs = t.numel();
    }
  }
  return pairs * features;
}

}  // namespace

std::string describe_tensors(c10::ArrayRef<at::Tensor> tensors) {
  std::string out;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    if (!out.empty()) out += ", ";
    out += c10::toString(t.scalar_type());
    out += "[";
    for (int64_t d = 0; d < t.dim(); ++d) out += (d ? "," : "") + std::to_string(t.size(d));
    out += "]";
  }
  return out;
}

trnsim::Precision matmul_precision(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat8_e4m3fn:
    case c10::kFloat8_e5m2:
    case c10::kFloat8_e4m3fnuz:
    case c10::kFloat8_e5m2fnuz:
      return trnsim::Precision::FP8;
    case c10::kBFloat16:
    case c10::kHalf:
      return trnsim::Precision::BF16;
    default:
      return trnsim::Precision::FP32;
  }
}

trnsim::Work describe_op(OpClass op_class, const std::string& name,
                         c10::ArrayRef<at::Tensor> inputs, c10::ArrayRef<c10::IValue> outputs,
                         uint64_t bytes, int64_t pool_window) {
  static const at::Tensor none;
  const at::Tensor* largest = largest_output(outputs);
  return describe_op(op_class, name, inputs, largest != nullptr ? *largest : none, bytes,
                     name.compare(0, 15, "aten::_foreach_") == 0, pool_window);
}

trnsim::Work describe_op(OpClass op_class, const std::string& name,
                         c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out, uint64_t bytes,
                         bool foreach, int64_t pool_window) {
  int64_t elements = std::max<int64_t>(out.defined() ? out.numel() : 0, max_numel(inputs));
  if (pool_window > 1) {
    // Note [Pooling windows]: every pooled element reads its window: the output of a forward,
    // the incoming gradient (the first argument) of a backward.
    const bool backward = name.find("backward") != std::string::npos;
    const at::Tensor* pooled = backward ? (inputs.empty() ? nullptr : &inputs.front()) : &out;
    if (pooled != nullptr && pooled->defined()) {
      elements = std::max(elements, pooled->numel() * pool_window);
    }
  }
  if (foreach) {
    // One launch over whole tensor lists: the engines process every element of every list.
    elements = 0;
    for (const auto& t : inputs) elements += t.numel();
  }
  // Decomposed complex values are (real, imaginary) pairs of float32: twice the elements.
  bool complex = out.defined() && out.is_complex();
  for (const auto& t : inputs) complex = complex || (t.defined() && t.is_complex());
  if (complex) elements *= 2;
  switch (op_class) {
    case OpClass::Matmul:
      return matmul(name, inputs, out, bytes);
    case OpClass::Convolution:
      return convolution(name, inputs, out, bytes);
    case OpClass::Scalar:
    case OpClass::GpSimd:
    case OpClass::Vector:
    case OpClass::Fallback:
      break;
  }
  const std::string_view base = base_op_name(name);
  if (is_pairwise_distance(base)) {
    elements = std::max(elements, pairwise_distance_elements(base, inputs, out));
  }
  if (op_class == OpClass::GpSimd) {
    if (const auto write = indexed_write(name, base, inputs)) {
      const at::Tensor& self = inputs[0];
      const uint64_t scale = complex ? 2 : 1;
      return {trnsim::Gather{write->written * scale, static_cast<uint64_t>(elements),
                             write->written * self.element_size(), write->index_bytes,
                             write->accumulates},
              bytes};
    }
  }
  if (op_class == OpClass::GpSimd && is_gather(base) && out.defined()) {
    return {trnsim::Gather{static_cast<uint64_t>(out.numel() * (complex ? 2 : 1)),
                           static_cast<uint64_t>(elements), out.nbytes(), index_bytes(inputs)},
            bytes};
  }
  const bool sixteen_bit = out.defined() && (out.scalar_type() == c10::kBFloat16 ||
                                             out.scalar_type() == c10::kHalf);
  // Two operands streamed element by element make a tensor-tensor instruction; a second
  // operand of one element is an immediate (tensor-scalar). A list op cannot tell from its
  // flattened lists: it is costed as one input per element.
  int streamed = 0;
  for (const auto& t : inputs) streamed += t.defined() && t.numel() > 1 ? 1 : 0;
  return {op_passes(op_class, base, static_cast<uint64_t>(elements), !foreach && streamed >= 2,
                    sixteen_bit),
          bytes};
}

std::optional<trnsim::Streaming> eager_streaming(const std::string& name, uint64_t elements,
                                                 bool two_inputs, bool sixteen_bit) {
  const OpClass op_class = classify_op(name);
  if (op_class != OpClass::Vector && op_class != OpClass::Scalar &&
      op_class != OpClass::GpSimd) {
    return std::nullopt;
  }
  return op_passes(op_class, base_op_name(name), elements, two_inputs, sixteen_bit);
}

trnsim::Work describe_kernel(OpClass op_class, const std::string& name,
                             const std::vector<at::Tensor>& inputs,
                             const std::vector<at::Tensor>& outputs) {
  uint64_t bytes = 0;
  std::vector<c10::IValue> values;
  for (const auto& t : inputs) bytes += t.defined() ? t.nbytes() : 0;
  for (const auto& t : outputs) {
    bytes += t.defined() ? t.nbytes() : 0;
    values.emplace_back(t);
  }
  return describe_op(op_class, name, inputs, values, bytes);
}

trnsim::Work vector_pass(const at::Tensor& t, uint64_t bytes) {
  return streaming(trnsim::Engine::Vector, t.numel(), bytes);
}

// Note [Pooling windows]
// A pooling op is one engine pass per element of its window: NKI pools with tensor_reduce over
// a window access pattern, so VectorE (GpSimdE for max pooling, OpPolicy) reads every element
// of every window. Sized by its tensors alone, a 31x31 stride-1 max pool would cost a 1x1's;
// a pool whose windows tile the input (kernel = stride, the default) reads each input element
// once, so the window changes nothing there. The window comes from the op's `kernel_size`
// argument, found once per operator. Max pooling's backward sends each incoming gradient to
// the one input its index names (one pass, as before); avg pooling's spreads it over the
// window. Adaptive pools have no kernel_size: their windows tile the input.
int pool_window_argument(std::string_view base, const c10::FunctionSchema& schema) {
  if (base.find("pool") == std::string_view::npos) return -1;
  if (base.find("max") != std::string_view::npos &&
      base.find("backward") != std::string_view::npos) {
    return -1;
  }
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name() == "kernel_size") return static_cast<int>(i);
  }
  return -1;
}

int64_t pool_window(std::string_view base, const c10::IValue& kernel_size) {
  if (!kernel_size.isIntList()) return 1;
  const auto sizes = kernel_size.toDimVector();
  if (sizes.empty()) return 1;
  // The spatial dimensions: the digit of "...pool2d...".
  const size_t pool = base.find("pool");
  int dims = 1;
  if (pool != std::string_view::npos && pool + 4 < base.size() && base[pool + 4] >= '1' &&
      base[pool + 4] <= '3') {
    dims = base[pool + 4] - '0';
  }
  int64_t window = 1;
  if (sizes.size() == 1) {
    for (int d = 0; d < dims; ++d) window *= std::max<int64_t>(sizes[0], 1);
  } else {
    for (const int64_t size : sizes) window *= std::max<int64_t>(size, 1);
  }
  return window;
}

std::string_view base_op_name(std::string_view base) {
  if (base.rfind("aten::", 0) == 0) base.remove_prefix(6);
  while (!base.empty() && base.front() == '_') base.remove_prefix(1);
  const size_t dot = base.find('.');
  return dot == std::string_view::npos ? base : base.substr(0, dot);
}

}  // namespace torch_neuron
