"""Neuron tensors through torch.multiprocessing (queues, pipes, Process arguments).

CUDA shares a tensor's device memory with the receiving process (CUDA IPC). Each process here
simulates its own device, so there is no memory to share: a neuron tensor is sent as a copy,
through the CPU's shared memory, and arrives on the same device index in the receiver. Without
this, PyTorch's reducer raised inside the queue's feeder thread, where nobody sees the error,
and the consumer waited forever.
"""

from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _torch_reductions


def _rebuild_neuron_tensor(cpu: torch.Tensor, index: int, requires_grad: bool,
                           cls: type) -> torch.Tensor:
    tensor = cpu.to(torch.device("neuron", index))
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != "neuron":
        return _torch_reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        # The same rule as PyTorch's reducer: autograd history cannot cross processes.
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., putting "
            "it on the queue).")
    cls = torch.nn.Parameter if isinstance(tensor, torch.nn.Parameter) else torch.Tensor
    return (_rebuild_neuron_tensor,
            (tensor.detach().cpu(), tensor.device.index, tensor.requires_grad, cls))


def _reduce_storage(storage):
    if storage.device.type != "neuron":
        return _torch_reductions.reduce_storage(storage)
    return (_rebuild_neuron_storage, (storage.cpu(), storage.device.index))


def _rebuild_neuron_storage(cpu_storage, index: int):
    return cpu_storage.to(device=torch.device("neuron", index))


def register_reducers() -> None:
    """Registers the neuron-aware reducers in place of PyTorch's, for the types PyTorch
    registers (tensor classes, Parameter, UntypedStorage); CPU and CUDA tensors still take
    PyTorch's path."""
    _torch_reductions.init_reductions()  # idempotent; makes sure ours come last
    for cls in (torch.Tensor, torch.nn.Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, _reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, _reduce_storage)
