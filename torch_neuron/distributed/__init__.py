"""torch.distributed on neuron: the c10d backend "neuron" (Note [Neuron process group]).

    torchrun --nproc-per-node 4 train.py        # in train.py:
    dist.init_process_group(backend="neuron")    # or no backend: neuron is the default

Each rank is one process that starts on NeuronCore `neuron:LOCAL_RANK` of its simulated instance
(torchrun's GROUP_RANK numbers the instances). The backend takes neuron and CPU tensors, as
TorchNeuron's does; Gloo moves the bytes and the simulator times them on NeuronLink/EFA.
"""

import contextvars
import functools

import torch
import torch.distributed as dist

from torch_neuron import _C

BACKEND_NAME = "neuron"


def _rank_device() -> int:
    """The NeuronCore of this rank: LOCAL_RANK under torchrun, else the current device."""
    local_rank = _C._setting("LOCAL_RANK")
    return local_rank if local_rank is not None else torch.neuron.current_device()


def _node() -> int:
    """Which simulated instance this process sits on: torchrun's node rank."""
    return _C._setting("GROUP_RANK") or 0


# Whether the group being created gives CPU tensors to another backend ("cpu:gloo,neuron:neuron"):
# set by _new_process_group_helper's wrapper below around the creator's call.
_cpu_taken_elsewhere = contextvars.ContextVar("torch_neuron_cpu_taken_elsewhere", default=False)


def _gloo_group(store, options, rank, size, global_ranks):
    gloo = dist.ProcessGroupGloo(store, rank, size, options.timeout)
    # As c10d does for the Gloo groups it makes, but never empty: ProcessGroupGloo.split maps
    # ranks through this list, and an empty one is only read as "the world" for the process's
    # first Gloo group (a second one, the CPU group, would crash on split).
    gloo.options.global_ranks_in_group = global_ranks
    gloo.options.group_name = options.group_id
    return gloo


def _create_backend(options, pg_options):
    """c10d's creator (extended API): a ProcessGroupNeuron over a Gloo group of the same ranks,
    with a second Gloo group for calls on CPU tensors (Note [CPU tensors in a group of their
    own]) unless the group gives CPU tensors to another backend. In a virtual world (Note
    [Virtual world]) the Gloo groups hold only the group's ranks that run as processes."""
    # torchrun keeps its store across restarts (--max-restarts), so a restarted job would find
    # the dead attempt's Gloo addresses under the same keys and fail to connect: key by attempt.
    attempt = _C._setting("TORCHELASTIC_RESTART_COUNT") or 0
    store = dist.PrefixStore(f"neuron_attempt_{attempt}", options.store)
    global_ranks = list(options.global_ranks_in_group) or list(range(options.group_size))
    members, rank = global_ranks, options.group_rank
    running = _C._virtual_running_ranks()
    if running is not None:
        members = [r for r in global_ranks if r in set(running)]
        rank = members.index(global_ranks[options.group_rank])
    gloo = _gloo_group(store, options, rank, len(members), members)
    cpu = None if _cpu_taken_elsewhere.get() else _gloo_group(dist.PrefixStore("cpu", store),
                                                              options, rank, len(members),
                                                              members)
    return _C._ProcessGroupNeuron(gloo, cpu, options.group_rank, options.group_size,
                                  options.timeout, options.group_id, _rank_device(), _node(),
                                  global_ranks)


def _neuron_is_the_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "neuron"


def _default_to_neuron(new_process_group_helper):
    """PyTorch 2.13 gives init_process_group() without a backend a Gloo default for custom
    accelerators (pytorch/pytorch#179901; `dist.get_backend()` then says "undefined"): on
    neuron, the undefined backend means "neuron", as it means "nccl" on CUDA. Also tells the
    creator whether another backend takes the group's CPU tensors."""

    @functools.wraps(new_process_group_helper)
    def helper(group_size, group_rank, global_ranks_in_group, backend, *args, **kwargs):
        if backend == dist.Backend.UNDEFINED and _neuron_is_the_accelerator():
            backend = dist.Backend(BACKEND_NAME)
        try:
            cpu_backend = dist.distributed_c10d.BackendConfig(backend).get_device_backend_map()\
                .get("cpu")
        except ValueError:  # c10d raises its own error for this backend string just after
            cpu_backend = None
        token = _cpu_taken_elsewhere.set(cpu_backend not in (None, BACKEND_NAME))
        try:
            return new_process_group_helper(group_size, group_rank, global_ranks_in_group,
                                            backend, *args, **kwargs)
        finally:
            _cpu_taken_elsewhere.reset(token)

    helper._torch_neuron_default_backend = True
    return helper


# DDP's bf16 gradient-compression comm hooks (torch.distributed.algorithms.ddp_comm_hooks).
_BF16_HOOKS = ("bf16_compress_hook", "bf16_compress_wrapper_hook")


def _allow_bf16_hooks(check_comm_hook):
    """DDP.register_comm_hook refuses the bf16 compression hooks unless CUDA with NCCL 2.10+ (the
    first NCCL that reduces bfloat16) or XPU with XCCL is available, even on CPU with Gloo. The
    "neuron" backend reduces bfloat16 (docs/distributed.md), so a DDP module on neuron takes
    them: PyTorch's other checks of the hook (callable, signature) still run, on a stand-in
    with the hook's signature and another name."""

    @functools.wraps(check_comm_hook)
    def _check_comm_hook(self, hook):
        if getattr(self, "device_type", None) == "neuron" and \
                getattr(hook, "__name__", None) in _BF16_HOOKS:

            @functools.wraps(hook)  # inspect.signature follows __wrapped__ to the hook
            def stand_in(*args, **kwargs):
                return hook(*args, **kwargs)

            stand_in.__name__ = f"{hook.__name__}_on_neuron"
            return check_comm_hook(self, stand_in)
        return check_comm_hook(self, hook)

    _check_comm_hook._torch_neuron_bf16_hooks = True
    return _check_comm_hook


def _register() -> None:
    if not dist.is_available() or BACKEND_NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                  devices=["neuron", "cpu"])
    c10d = dist.distributed_c10d
    if not getattr(c10d._new_process_group_helper, "_torch_neuron_default_backend", False):
        c10d._new_process_group_helper = _default_to_neuron(c10d._new_process_group_helper)
    ddp = torch.nn.parallel.DistributedDataParallel
    if not getattr(ddp._check_comm_hook, "_torch_neuron_bf16_hooks", False):
        ddp._check_comm_hook = _allow_bf16_hooks(ddp._check_comm_hook)
    from torch_neuron.distributed import predict_only

    predict_only.install()


def collective_cost(op: str, nbytes: int, group=None) -> dict:
    """What the simulator charges for collective `op` ("all_reduce", "all_gather",
    "reduce_scatter", "broadcast", "reduce", "all_to_all", "gather", "scatter", "send_recv",
    "barrier") of nccl-tests size `nbytes` over the NeuronCores of `group` (default: the world):
    duration_ns, algorithm, link, link_gbps, algbw_gbps and busbw_gbps."""
    backend = (group or dist.group.WORLD)._get_backend(torch.device("neuron"))
    return _C._collective_cost(op, nbytes, backend.places, _C._instance_info()["name"])


def predict_collective(op: str, nbytes: int, ranks: int, instance: str,
                       ranks_per_node: int | None = None) -> dict:
    """What the simulator would charge for collective `op` of nccl-tests size `nbytes` among
    `ranks` ranks on `instance`, without starting them: ranks are placed as torchrun places
    them, `ranks_per_node` per instance (default: every NeuronCore of one instance), rank r on
    device r % ranks_per_node of instance r // ranks_per_node. The dict has collective_cost's
    keys plus latency_ns (fixed and per-step latency), steps, dma_bytes and dma_ns (how long the
    collective holds the core's DMA queues). Use it to compare with nccom-test rows."""
    places = _C._collective_places(instance, ranks, ranks_per_node or 0)
    return _C._collective_cost(op, nbytes, places, instance)
