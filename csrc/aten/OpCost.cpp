#include "aten/OpCost.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "aten/StreamingPasses.h"

namespace torch_neuron {
namespace {

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
trnsim::OpCost matmul(const trnsim::InstanceSpec& instance, const std::string& name,
                      c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out,
                      uint64_t bytes) {
  const bool has_bias = name.find("::add") != std::string::npos ||
                        name.find("::_addmm") != std::string::npos;
  const size_t lhs_index = has_bias && inputs.size() >= 3 ? 1 : 0;
  if (inputs.size() <= lhs_index || !out.defined()) {
    return trnsim::streaming_cost(instance, trnsim::Engine::Vector, max_numel(inputs), bytes);
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
  // A decomposed complex matmul is four real ones (re*re, im*im, re*im, im*re).
  if (out.is_complex()) batch *= 4;
  return trnsim::matmul_cost(instance, batch, m, k, n, matmul_precision(lhs.scalar_type()),
                             bytes);
}

// Convolution as the matmul the hardware runs (im2col): output positions x output channels,
// contracted over input channels per group x kernel size. Backward (grad input and grad weight)
// does about twice the forward work, sized by the incoming gradient.
trnsim::OpCost convolution(const trnsim::InstanceSpec& instance, const std::string& name,
                           c10::ArrayRef<at::Tensor> inputs, const at::Tensor& out,
                           uint64_t bytes) {
  const bool backward = name.find("backward") != std::string::npos;
  // The weight comes after the activation in every convolution signature; a bias is 1-D.
  const at::Tensor* weight = nullptr;
  for (const auto& t : inputs) {
    if (t.defined() && t.dim() >= 3) weight = &t;
  }
  if (weight == &inputs.front() && inputs.size() > 1) weight = nullptr;
  const at::Tensor& activation = backward && !inputs.empty() ? inputs.front() : out;
  if (weight == nullptr || !activation.defined() || activation.dim() < 3) {
    return trnsim::streaming_cost(instance, trnsim::Engine::Vector, max_numel(inputs), bytes);
  }
  const int64_t channels_out = weight->size(0);
  const int64_t k = weight->numel() / std::max<int64_t>(channels_out, 1);
  const int64_t positions = activation.numel() / std::max<int64_t>(activation.size(1), 1);
  return trnsim::matmul_cost(instance, backward ? 2 : 1, positions, k, channels_out,
                             matmul_precision(weight->scalar_type()), bytes);
}

// HBM traffic of a gather (index_select, embedding, gather, take, index): the rows it touches,
// not the whole table it picks them from. It reads as many elements as it writes, plus the
// indices; an upper bound for the ops that are not gathers (the caller takes the minimum).
uint64_t gather_bytes(std::string_view base, c10::ArrayRef<at::Tensor> inputs,
                      const at::Tensor& out) {
  const bool gather = base == "index_select" || base == "embedding" || base == "gather" ||
                      base == "take" || base == "index";
  if (!gather || !out.defined()) return UINT64_MAX;
  uint64_t bytes = 2 * out.nbytes();
  for (const auto& t : inputs) {
    if (t.defined() && !c10::isFloatingType(t.scalar_type()) &&
        !c10::isComplexType(t.scalar_type())) {
      bytes += t.nbytes();
    }
  }
  return bytes;
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

trnsim::OpCost transfer_cost(double duration_ns, uint64_t bytes) {
  trnsim::OpCost cost;
  cost.bytes = bytes;
  cost.engine_ns[static_cast<int>(trnsim::Engine::Dma)] = duration_ns;
  return cost;
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

trnsim::OpCost estimate_cost(const trnsim::InstanceSpec& instance, OpClass op_class,
                             const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                             c10::ArrayRef<c10::IValue> outputs, uint64_t bytes) {
  static const at::Tensor none;
  const at::Tensor* largest = largest_output(outputs);
  return estimate_cost(instance, op_class, name, inputs, largest != nullptr ? *largest : none,
                       bytes, name.compare(0, 15, "aten::_foreach_") == 0);
}

trnsim::OpCost estimate_cost(const trnsim::InstanceSpec& instance, OpClass op_class,
                             const std::string& name, c10::ArrayRef<at::Tensor> inputs,
                             const at::Tensor& out, uint64_t bytes, bool foreach) {
  int64_t elements = std::max<int64_t>(out.defined() ? out.numel() : 0, max_numel(inputs));
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
      return matmul(instance, name, inputs, out, bytes);
    case OpClass::Convolution:
      return convolution(instance, name, inputs, out, bytes);
    case OpClass::Scalar:
    case OpClass::GpSimd:
    case OpClass::Vector:
    case OpClass::Fallback:
      break;
  }
  const std::string_view base = base_op_name(name);
  if (op_class == OpClass::GpSimd) {
    const uint64_t gathered = gather_bytes(base, inputs, out);
    if (gathered < bytes) {
      // A gather's work is its output rows, not the table it picks them from.
      bytes = gathered;
      elements = out.numel() * (complex ? 2 : 1);
    }
  }
  trnsim::OpCost cost;
  cost.flops = static_cast<double>(elements);
  cost.set_bytes(instance, bytes);
  const auto count = static_cast<uint64_t>(elements);
  const bool sixteen_bit = out.defined() && (out.scalar_type() == c10::kBFloat16 ||
                                             out.scalar_type() == c10::kHalf);
  // Two operands streamed element by element make a tensor-tensor instruction; a second
  // operand of one element is an immediate (tensor-scalar). A list op cannot tell from its
  // flattened lists: it is costed as one input per element.
  int streamed = 0;
  for (const auto& t : inputs) streamed += t.defined() && t.numel() > 1 ? 1 : 0;
  const PassPlan plan = plan_passes(base, op_class, !foreach && streamed >= 2);
  for (int i = 0; i < plan.count; ++i) {
    cost.add_pass(instance, plan.passes[i].engine, count, plan.passes[i].pass, sixteen_bit);
  }
  return cost;
}

}  // namespace torch_neuron
