"""Devices of torch.neuron: count, selection, synchronization, properties."""

import dataclasses
from typing import Any

import torch

from torch_neuron import _C

_initialized = False


def _index(device: Any = None, negative_means_none: bool = False) -> int:
    """Device index of an int, "neuron:1", torch.device or None (the current device), checked
    against the visible devices. With `negative_means_none` a negative int is returned as it is
    (torch.cuda.set_device(-1) and torch.cuda.device(-1) change nothing)."""
    if device is None:
        return current_device()
    if isinstance(device, str) or isinstance(device, torch.device):
        device = torch.device(device)
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        index = current_device() if device.index is None else device.index
    elif isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        raise TypeError(f"expected a neuron device (an int, 'neuron:N' or a torch.device), got "
                        f"{type(device).__name__}")
    if negative_means_none and index < 0:
        return index
    count = device_count()
    if not 0 <= index < count:
        raise RuntimeError(
            f"invalid device neuron:{index}: the simulated {_C._instance_info()['name']} has "
            f"{count} visible NeuronCore(s), so valid devices are neuron:0..neuron:{count - 1} "
            "(set TORCH_NEURON_INSTANCE or NEURON_RT_VISIBLE_CORES to change them)")
    return index


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """Whether `device` can copy to and from `peer_device` directly: every pair of different
    NeuronCores of the simulated instance can (on-chip DMA, NeuronLink between chips); a device
    is not its own peer, as with CUDA."""
    return _index(device) != _index(peer_device)


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def _lazy_init() -> None:
    """Called by PyTorch before the first neuron tensor is created from Python."""
    global _initialized
    # The bad-fork check comes first: a child forked after initialization inherits
    # `_initialized`, and must still be told (as torch.cuda tells it) to use spawn. The text
    # is CUDA's word for word (tools match it), as is device()'s in csrc/runtime/Runtime.cpp.
    if _C._is_in_bad_fork():
        raise RuntimeError(
            "Cannot re-initialize neuron in forked subprocess. To use neuron with "
            "multiprocessing, you must use the 'spawn' start method")
    if _initialized:
        return
    _C._init_device(-1)
    _initialized = True


def init() -> None:
    """Initializes the device runtime now rather than on first use."""
    _lazy_init()


def is_initialized() -> bool:
    return _initialized and not _C._is_in_bad_fork()


def is_available() -> bool:
    """True when at least one simulated NeuronCore is visible (always, unless the environment
    selects none)."""
    try:
        return _C._device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    """Number of visible NeuronCores: those of TORCH_NEURON_INSTANCE, narrowed by
    NEURON_RT_VISIBLE_CORES."""
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: Any) -> None:
    """Makes `device` current; like torch.cuda.set_device, it initializes the device runtime
    (DeviceMesh reads is_initialized() to tell whether the program chose its device)."""
    index = _index(device, negative_means_none=True)
    if index >= 0:
        _lazy_init()
        _C._set_device(index)


class device:
    """Context manager that makes `device` current, like torch.cuda.device."""

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _index(device, negative_means_none=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *args):
        _C._exchange_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of tensor `obj` current (no-op for CPU tensors)."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


def synchronize(device: Any = None) -> None:
    """Waits for all work on the device. Work runs on the host as it is launched, so this
    returns at once; the simulated clock is what records when the work would finish."""
    _C._synchronize(_index(device))


def simulated_time_ns(device: Any = None) -> float:
    """The device's simulated clock in nanoseconds: when all work queued on it so far would
    have finished on Trainium."""
    return _C._synchronize(_index(device))


@dataclasses.dataclass(frozen=True)
class NeuronDeviceProperties:
    """What torch.neuron.get_device_properties() returns (cf. torch.cuda's properties)."""

    name: str
    instance_type: str
    chip: str
    core_version: str
    index: int
    core: int
    chip_index: int
    total_memory: int
    core_count: int
    chips: int
    physical_cores_per_logical: int
    sbuf_bytes: int
    psum_bytes: int
    hbm_gbps_per_chip: float
    bf16_tflops_per_chip: float
    fp32_tflops_per_chip: float


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    info = _C._device_info(_index(device))
    return NeuronDeviceProperties(
        name=f"{info['core_version']} ({info['chip']}, {info['name']})",
        instance_type=info["name"],
        chip=info["chip"],
        core_version=info["core_version"],
        index=info["index"],
        core=info["core"],
        chip_index=info["chip_index"],
        total_memory=info["hbm_bytes_per_core"],
        core_count=info["cores"],
        chips=info["chips"],
        physical_cores_per_logical=info["physical_cores_per_logical"],
        sbuf_bytes=info["sbuf_bytes_per_core"],
        psum_bytes=info["psum_bytes_per_core"],
        hbm_gbps_per_chip=info["hbm_gbps_per_chip"],
        bf16_tflops_per_chip=info["bf16_tflops_per_chip"],
        fp32_tflops_per_chip=info["fp32_tflops_per_chip"],
    )


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """The NeuronCore version as (major, minor), as torch.cuda.get_device_capability gives the
    compute capability: (2, 0) for NeuronCore-v2 (Trainium1), (3, 0) for NeuronCore-v3
    (Trainium2). The dtypes a device supports: torch.accelerator.get_device_capability()."""
    version = _C._device_info(_index(device))["core_version"]  # "NeuronCore-v3"
    return int(version.rsplit("-v", 1)[1]), 0


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Low-precision dtypes for torch.autocast("neuron"): Trainium computes BF16 and FP16."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True
