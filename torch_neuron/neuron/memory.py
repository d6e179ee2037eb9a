"""Memory of torch.neuron: statistics of the caching HBM allocator, like torch.cuda's.

The numbers come from the allocator through torch.accelerator, so torch.accelerator.memory_*
and these functions always agree.
"""

from typing import Any

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
