"""Memory of torch.neuron: statistics of the caching HBM allocator, like torch.cuda's.

The numbers come from the allocator through torch.accelerator, so torch.accelerator.memory_*
and these functions always agree.
"""

import warnings
from typing import Any, Optional

import torch

from torch_neuron import _C
from torch_neuron.neuron.device import _index


def memory_stats(device: Any = None) -> dict[str, Any]:
    """Allocator statistics with torch.cuda.memory_stats()'s keys
    ("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms", ...)."""
    return dict(torch.accelerator.memory_stats(_index(device)))


def memory_allocated(device: Any = None) -> int:
    """Bytes of HBM held by live tensors on the device."""
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    """Bytes of HBM held by the allocator: live tensors plus its cache."""
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Limits what this process's caching allocator may reserve on the device to `fraction`
    (0 to 1) of its HBM, as torch.cuda.set_per_process_memory_fraction does; an allocation
    beyond it raises torch.OutOfMemoryError. As with CUDA, mem_get_info() still reports the
    whole device, so pass `max_memory` to device_map="auto" if it should plan for the limit."""
    from torch_neuron.neuron.device import _lazy_init

    if not isinstance(fraction, float):
        raise TypeError(f"fraction must be a float from 0 to 1, got {type(fraction).__name__}")
    _lazy_init()
    _C._set_memory_fraction(fraction, _index(device))


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by set_per_process_memory_fraction (1.0 if none was set)."""
    return _C._get_memory_fraction(_index(device))


def empty_cache() -> None:
    """Returns the allocator's cached, unused HBM blocks to the device."""
    torch.accelerator.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device's HBM; memory cached by the allocator counts as used."""
    return torch.accelerator.get_memory_info(_index(device))


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """memory_stats() nested at its dots: {"allocated_bytes": {"all": {"current": ...}}}."""
    nested: dict[str, Any] = {}
    for key, value in memory_stats(device).items():
        *path, last = key.split(".")
        level = nested
        for part in path:
            level = level.setdefault(part, {})
        level[last] = value
    return nested


def memory_snapshot() -> list[dict[str, Any]]:
    """The segments the caching allocator has reserved from HBM on every device, each with its
    blocks, in torch.cuda.memory_snapshot()'s format: a block is "active_allocated" (a live
    tensor's) or "inactive" (cached); a segment is "small" or "large" by its pool (Note [Split
    blocks]). Neuron records no stack frames ("frames" is empty)."""
    from torch_neuron.neuron.device import device_count, is_initialized

    segments = []
    for index in range(device_count() if is_initialized() else 0):
        for address, size, small_pool, blocks in _C._memory_snapshot(index):
            entries = [{"address": a, "size": n, "requested_size": requested,
                        "state": "active_allocated" if allocated else "inactive", "frames": []}
                       for a, n, requested, allocated in blocks]
            allocated = sum(b["size"] for b in entries if b["state"] == "active_allocated")
            segments.append({
                "device": index, "address": address, "total_size": size,
                "allocated_size": allocated, "active_size": allocated,
                "requested_size": sum(b["requested_size"] for b in entries),
                "stream": 0, "segment_type": "small" if small_pool else "large",
                "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                "blocks": entries})
    return segments


# caching_allocator_alloc's allocations, by address, until caching_allocator_delete.
_raw_allocations: dict[int, torch.Tensor] = {}


def caching_allocator_alloc(size: int, device: Any = None,
                            stream: Optional[torch.Stream] = None) -> int:
    """Allocates `size` bytes from the caching allocator on `stream` (default: the device's
    current stream) and returns the address; free it with caching_allocator_delete()."""
    from torch_neuron.neuron.streams import stream as stream_context

    index = _index(device)
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"caching_allocator_alloc: size must be a non-negative int of bytes, "
                         f"got {size!r}")
    with stream_context(stream):
        block = torch.empty(size, dtype=torch.uint8, device=f"neuron:{index}")
    _raw_allocations[block.data_ptr()] = block
    return block.data_ptr()


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees an address caching_allocator_alloc() returned."""
    if _raw_allocations.pop(mem_ptr, None) is None:
        raise ValueError(f"caching_allocator_delete: {mem_ptr:#x} is not an address "
                         "caching_allocator_alloc returned (or it was deleted already)")


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"torch.neuron.{old} has been renamed to torch.neuron.{new}",
                  FutureWarning, stacklevel=3)


def memory_cached(device: Any = None) -> int:
    """Deprecated; see memory_reserved() (as torch.cuda.memory_cached)."""
    _deprecated("memory_cached", "memory_reserved")
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated; see max_memory_reserved()."""
    _deprecated("max_memory_cached", "max_memory_reserved")
    return max_memory_reserved(device)


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated: resets every peak statistic, as reset_peak_memory_stats() does."""
    _deprecated("reset_max_memory_allocated", "reset_peak_memory_stats")
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated: resets every peak statistic, as reset_peak_memory_stats() does."""
    _deprecated("reset_max_memory_cached", "reset_peak_memory_stats")
    reset_peak_memory_stats(device)


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics of one device."""
    index = _index(device)
    stats = memory_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ("Allocated memory", "allocated_bytes", _fmt),
        ("Active memory", "active_bytes", _fmt),
        ("Requested memory", "requested_bytes", _fmt),
        ("Reserved memory", "reserved_bytes", _fmt),
        ("Non-releasable", "inactive_split_bytes", _fmt),
        ("Allocations", "allocation", str),
        ("Segments", "segment", str),
    ]
    lines = [
        f"neuron:{index} memory summary (HBM {_fmt(total)}, free {_fmt(free)})",
        f"{'Metric':<20}{'Current':>14}{'Peak':>14}{'Total alloc':>14}{'Total freed':>14}",
    ]
    for label, key, fmt in rows:
        values = [stats.get(f"{key}.all.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
        lines.append(f"{label:<20}" + "".join(f"{fmt(v):>14}" for v in values))
    if not abbreviated:
        lines.append(f"{'Allocation retries':<20}{stats.get('num_alloc_retries', 0):>14}")
        lines.append(f"{'OOMs':<20}{stats.get('num_ooms', 0):>14}")
    return "\n".join(lines)
