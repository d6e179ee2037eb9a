"""Shared by the training workers (ddp_worker.py, fsdp_worker.py, tensor_parallel_worker.py):
one script runs on neuron with the "neuron" backend and, unchanged, on the CPU with "gloo";
each rank writes what it computed to a file the pytest compares across the two runs.

    torchrun --nproc-per-node 2 ddp_worker.py --device neuron --out DIR
    torchrun --nproc-per-node 2 ddp_worker.py --device cpu --out DIR
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

BACKEND_OF = {"neuron": "neuron", "cpu": "gloo"}


def parse_args(extra=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=sorted(BACKEND_OF), required=True,
                        help="neuron (backend neuron) or cpu (backend gloo)")
    parser.add_argument("--out", required=True, help="directory for this rank's results")
    if extra:
        extra(parser)
    return parser.parse_args()


def setup(device_type):
    """Binds this rank to its device and joins the default group; returns (rank, world,
    device). Only the device type and backend name differ between the two runs."""
    if device_type == "neuron":
        import torch_neuron  # noqa: F401  (registers the device and the backend)

        local_rank = int(os.environ["LOCAL_RANK"])
        torch.neuron.set_device(local_rank)
        device = torch.device("neuron", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=BACKEND_OF[device_type])
    return dist.get_rank(), dist.get_world_size(), device


def clear_fallbacks(device_type):
    if device_type == "neuron":
        import torch_neuron

        torch_neuron.clear_op_tracking()


def fallbacks(device_type):
    """Ops that ran on the CPU instead of the device since clear_fallbacks() (neuron only)."""
    if device_type != "neuron":
        return {}
    import torch_neuron

    return torch_neuron.get_fallback_ops()


def to_cpu(obj):
    """Detached CPU copies of every tensor in a nested structure (workers save full tensors,
    not DTensors)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu").clone()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def save(out_dir, device_type, rank, results):
    os.makedirs(out_dir, exist_ok=True)
    torch.save(to_cpu(results), os.path.join(out_dir, f"{device_type}_rank{rank}.pt"))


def finish(out_dir, device_type, rank, results, name):
    save(out_dir, device_type, rank, results)
    dist.barrier()
    dist.destroy_process_group()
    print(f"{name} ok on rank {rank} ({device_type})", flush=True)
    if device_type == "cpu":
        # The CPU reference is stock PyTorch with Gloo, whose teardown at interpreter exit
        # sometimes aborts ("terminate called without an active exception",
        # pytorch/pytorch#190489; seen in this suite's CI, the DDP timing reference run on
        # 2026-12-06). Its results are saved and its output flushed: it leaves without that
        # teardown. The neuron runs exit normally, so a fault of ours at exit still shows.
        sys.stderr.flush()
        os._exit(0)
