"""Distributed code that reads tensor values, made to work in predict-only mode.

Note [Distributed predict-only]: in predict-only mode (and so in a virtual world) neuron
tensors hold no values and collectives on them move none. PyTorch's distributed wrappers
mostly only move tensors; the exceptions read what a collective brought back, and are
redirected here to do the same check on values that exist:
  - DDP's (and FSDP1's) check that every rank has parameters of the same shapes and strides
    (`_verify_param_shape_across_processes`) copies the shapes to the device, all-gathers
    them and reads them back; in predict-only mode the shapes go through the group's CPU
    path instead (Gloo between processes, the SPMD rule for virtual ranks), with the same
    verdict and an error that names the differing rank.
"""

import functools

import torch
import torch.distributed as dist

from torch_neuron import _C


def _predicting(tensors) -> bool:
    return (not _C._execute_enabled()
            and any(t.device.type == "neuron" for t in tensors))


def _check_shapes_on_cpu(process_group, tensors) -> None:
    mine = [(tuple(t.shape), tuple(t.stride())) for t in tensors]
    theirs = [None] * dist.get_world_size(process_group)
    dist.all_gather_object(theirs, mine, group=process_group)
    for rank, other in enumerate(theirs):
        if other == mine:
            continue
        if len(other) != len(mine):
            raise RuntimeError(f"DDP expects the same number of parameters on every rank: this "
                               f"rank has {len(mine)}, rank {rank} of the group has {len(other)}")
        i = next(i for i, (a, b) in enumerate(zip(mine, other)) if a != b)
        raise RuntimeError(f"DDP expects same model across all ranks, but parameter {i} has "
                           f"shape/stride {mine[i]} on this rank and {other[i]} on rank {rank} "
                           "of the group")


def _verify_shapes(verify):
    @functools.wraps(verify)
    def verify_param_shapes(process_group, tensors, logger=None):
        if _predicting(tensors):
            return _check_shapes_on_cpu(process_group, tensors)
        return verify(process_group, tensors, logger)

    verify_param_shapes._torch_neuron_predict_only = True
    return verify_param_shapes


def install() -> None:
    """Redirects the value-reading checks above (idempotent)."""
    import torch.distributed.utils as utils
    import torch.nn.parallel.distributed as ddp

    for module in (utils, ddp):
        current = module._verify_param_shape_across_processes
        if not getattr(current, "_torch_neuron_predict_only", False):
            module._verify_param_shape_across_processes = _verify_shapes(current)
