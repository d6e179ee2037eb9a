"""Neuron tensors through torch.multiprocessing (queues, pipes, Process arguments).

CUDA shares a tensor's device memory with the receiving process (CUDA IPC). Each process here
simulates its own device, so there is no memory to share: a neuron tensor is sent as a copy,
through the CPU's shared memory, and arrives on the same device index in the receiver, with
the sender's sizes and strides (a view's layout survives, as it does through CUDA IPC; the
copy holds the span of the storage the view reaches, so its storage offset starts at 0).
Without this, PyTorch's reducer raised inside the queue's feeder thread, where nobody sees the
error, and the consumer waited forever.
"""

from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler

import torch
from torch.multiprocessing import reductions as _torch_reductions


def _rebuild_neuron_tensor(span: torch.Tensor, size, stride, index: int, requires_grad: bool,
                           cls: type) -> torch.Tensor:
    tensor = span.to(torch.device("neuron", index)).as_strided(size, stride, 0)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _storage_span(tensor: torch.Tensor) -> torch.Tensor:
    """The elements of `tensor`'s storage from its first to its last one, as one dense CPU
    tensor: laid out with `tensor`'s strides from offset 0, it is `tensor` again."""
    if tensor.numel() == 0:
        return torch.empty(0, dtype=tensor.dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    return tensor.as_strided((span,), (1,), tensor.storage_offset()).cpu()


def _sent_copy(copy):
    """`copy` (a CPU tensor or storage made to be pickled) outlives the pickling while a process
    is being spawned: its shared-memory file descriptor is handed to the child only when the
    child is started, after pickling (multiprocessing's popen_spawn_posix keeps the descriptor
    number, not a duplicate), so the copy must not be freed before. It lives as long as the
    Process object's popen. Through a queue or pipe the descriptor is duplicated at once."""
    popen = get_spawning_popen()
    if popen is not None:
        kept = getattr(popen, "_torch_neuron_sent", None)
        if kept is None:
            kept = popen._torch_neuron_sent = []
        kept.append(copy)
    return copy


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
    data = tensor.detach().resolve_conj().resolve_neg()
    return (_rebuild_neuron_tensor,
            (_sent_copy(_storage_span(data)), tuple(data.shape), tuple(data.stride()),
             tensor.device.index, tensor.requires_grad, cls))


def _reduce_storage(storage):
    if storage.device.type != "neuron":
        return _torch_reductions.reduce_storage(storage)
    return (_rebuild_neuron_storage, (_sent_copy(storage.cpu()), storage.device.index))


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
