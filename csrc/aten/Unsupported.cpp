// Tensor kinds neuron does not have, refused with one clear error each.
//
// PyTorch's quantized tensors (qint8, quint8, qint32, quint4x2, quint2x4): refused.
// Trainium runs no PyTorch quantized kernels (TorchNeuron has none either), and a quantized
// tensor needs a quantizer that only quantized backends create; without this, moving one to
// neuron failed deep in the dispatcher, and quantizing a neuron tensor on the host made a
// tensor whose q_scale(), dequantize() and cpu() failed. Both now raise one error that says
// what to do instead. (fake_quantize_* ops stay: they compute in floating point.)
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "aten/Unsupported.h"

namespace torch_neuron {

void refuse_quantized(const std::string& op_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op_name, ": neuron has no quantized tensors (torch.qint8, torch.quint8, ",
      "torch.qint32, ...): Trainium runs no PyTorch quantized kernels. Keep quantized tensors ",
      "and quantized models on the CPU, or dequantize() them before moving them to neuron ",
      "(float8 and int8 tensors are supported on the device).");
}

// Sparse layouts (COO, CSR, CSC, BSR, BSC): refused the same way. Without this, moving a sparse
// tensor to neuron failed with dispatcher or layout errors that named no fix.
void refuse_sparse(const std::string& op_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op_name, ": neuron has no sparse tensors: Trainium runs no PyTorch sparse ",
      "kernels. Call .to_dense() before moving a sparse tensor to neuron, or keep it on the CPU ",
      "(nn.Embedding(sparse=True) needs sparse gradients: use sparse=False on neuron).");
}

// Nested tensors (torch.nested, strided layout): refused the same way. Without this, the ops
// that make one from dense neuron tensors (nn.TransformerEncoder's fast path in eval mode with
// a padding mask calls _nested_tensor_from_mask) failed with an internal error.
void refuse_nested(const std::string& op_name) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op_name, ": neuron has no nested tensors (torch.nested): Trainium runs no PyTorch ",
      "nested-tensor kernels. nn.TransformerEncoder makes one in eval mode when given a ",
      "src_key_padding_mask: build it with enable_nested_tensor=False (its layers then apply ",
      "the mask on neuron), or keep nested tensors on the CPU.");
}

namespace {

void refuse_quantized_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_quantized(op.schema().name());
}

void refuse_sparse_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_sparse(op.schema().name());
}

void refuse_nested_op(const c10::OperatorHandle& op, torch::jit::Stack*) {
  refuse_nested(op.schema().name());
}

}  // namespace

// Every op that would make or take a quantized or sparse neuron tensor dispatches here.
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized_op>());
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_sparse_op>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_nested_op>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_sparse_op>());
}
// A compressed sparse tensor (CSR, CSC, BSR, BSC) is assembled from dense neuron tensors by a
// composite op that calls no neuron kernel, so the fallback above would first be met at the
// tensor's first op: the constructor every path to one goes through (.to("neuron"),
// torch.sparse_csr_tensor(..., device="neuron")) is refused instead.
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("_sparse_compressed_tensor_unsafe",
         torch::CppFunction::makeFromBoxedFunction<&refuse_sparse_op>());
}

}  // namespace torch_neuron
