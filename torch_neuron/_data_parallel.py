"""nn.DataParallel on neuron cores.

DataParallel (torch/nn/parallel) is written for any accelerator (torch.accelerator) except for
four functions of torch.nn.parallel.comm, which call C++ helpers that PyTorch builds for CUDA
only (torch._C._broadcast_coalesced, _broadcast, _scatter, _gather): with neuron tensors it
failed at its first forward. install() wraps those four so that neuron tensors move with
ordinary copies between cores (each a neuron copy on the simulated clocks, Note [Copies between
devices]) with the results CUDA's helpers give; every other tensor still takes PyTorch's path.
"""

import functools
import warnings

import torch
from torch._utils import _get_device_index
from torch.nn.parallel import comm

INSTALLED = "_torch_neuron_data_parallel"


def _neuron(tensors) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in tensors)


def _device(index) -> torch.device:
    return torch.device("neuron", _get_device_index(index, True))


def _copy_to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """On its own device the tensor itself (as CUDA's helpers return it there), else a copy."""
    return tensor if tensor.device == device else tensor.to(device, non_blocking=True)


def _broadcast_coalesced(original):
    @functools.wraps(original)
    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        if not _neuron(tensors):
            return original(tensors, devices, buffer_size)
        return [[_copy_to(t, _device(d)) for t in tensors] for d in devices]

    return broadcast_coalesced


def _broadcast(original):
    @functools.wraps(original)
    def broadcast(tensor, devices=None, *, out=None):
        if not _neuron([tensor]):
            return original(tensor, devices, out=out)
        if (devices is None) == (out is None):
            raise RuntimeError("Exactly one of 'devices' and 'out' must be specified, but got "
                               f"devices={devices} and out={out}")
        if out is not None:
            for o in out:
                o.copy_(tensor, non_blocking=True)
            return tuple(out)
        return tuple(_copy_to(tensor, _device(d)) for d in devices)

    return broadcast


def _scatter(original):
    @functools.wraps(original)
    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        if not _neuron([tensor]):
            return original(tensor, devices, chunk_sizes, dim, streams, out=out)
        if out is not None:
            chunks = tensor.split([o.size(dim) for o in out], dim)
            for o, chunk in zip(out, chunks):
                o.copy_(chunk, non_blocking=True)
            return tuple(out)
        chunks = (tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None
                  else tensor.chunk(len(devices), dim))
        outputs = []
        for i, (device, chunk) in enumerate(zip(devices, chunks)):
            device = _device(device)
            stream = streams[i] if streams is not None and streams[i] is not None else None
            if stream is None:
                outputs.append(_copy_to(chunk, device))
                continue
            with torch.neuron.stream(stream):  # the copy on the caller's copy stream
                outputs.append(_copy_to(chunk, device))
        return tuple(outputs)

    return scatter


def _gather(original):
    @functools.wraps(original)
    def gather(tensors, dim=0, destination=None, *, out=None):
        if not _neuron(tensors):
            return original(tensors, dim, destination, out=out)
        if out is not None:
            torch.cat([t.to(out.device) for t in tensors], dim, out=out)
            return out
        if destination == "cpu" or destination == -1:
            target = torch.device("cpu")
        elif destination is None:
            target = torch.device("neuron", torch.neuron.current_device())
        else:
            target = _device(destination)
        return torch.cat([t.to(target, non_blocking=True) for t in tensors], dim)

    return gather


def _reduce_add(original):
    """reduce_add is plain PyTorch; it asks torch.cuda.nccl whether NCCL can sum the inputs,
    which warns "PyTorch is not compiled with NCCL support" on builds without CUDA."""

    @functools.wraps(original)
    def reduce_add(inputs, destination=None):
        if not _neuron(inputs):
            return original(inputs, destination)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "PyTorch is not compiled with NCCL support")
            return original(inputs, destination)

    return reduce_add


def install() -> None:
    """Wraps the four CUDA-only helpers of torch.nn.parallel.comm, and reduce_add's NCCL
    probe (once)."""
    if getattr(comm.scatter, INSTALLED, False):
        return
    for name, wrap in (("broadcast_coalesced", _broadcast_coalesced), ("broadcast", _broadcast),
                       ("scatter", _scatter), ("gather", _gather), ("reduce_add", _reduce_add)):
        wrapped = wrap(getattr(comm, name))
        setattr(wrapped, INSTALLED, True)
        setattr(comm, name, wrapped)
