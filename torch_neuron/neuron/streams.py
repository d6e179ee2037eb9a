"""Streams and events of torch.neuron, over PyTorch's device-generic torch.Stream/torch.Event.

Event.elapsed_time() returns simulated milliseconds: how long the work between the two events
would take on Trainium (see Note [Simulated time] in trnsim/queue.h).
"""

from typing import Any, Optional

import torch

from torch_neuron.neuron.device import _index, _lazy_init


class Stream(torch.Stream):
    """A neuron stream (a simulated queue). Work on one stream is ordered; streams overlap.

    `priority` is accepted as torch.cuda.Stream takes it and mapped into priority_range(),
    which is (0, 0): the simulated NeuronCore's streams take its engines in the order the host
    issues their work (Note [Shared engines] in trnsim/queue.h), so no stream's work goes
    ahead of another's, as on a GPU whose range is one priority."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuilding a stream torch already has
            return super().__new__(cls, **kwargs)
        if not isinstance(priority, int):
            raise TypeError(f"torch.neuron.Stream: priority must be an int, got "
                            f"{type(priority).__name__}")
        _lazy_init()  # as torch.cuda.Stream: refused in a child forked after initialization
        with torch.neuron.device(device):
            return super().__new__(cls, device=torch.device("neuron", _index(device)),
                                   priority=0)

    @property
    def priority(self) -> int:
        return 0

    @staticmethod
    def priority_range() -> tuple:
        """(lowest, highest) priority, as torch.cuda.Stream.priority_range: one priority."""
        return (0, 0)


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
    """A torch.Event on neuron; with enable_timing=True, elapsed_time() gives simulated
    milliseconds. (A factory rather than a subclass: torch.Event.elapsed_time only accepts
    torch.Event itself.)"""
    return torch.Event(device="neuron", enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    index = _index(device)
    # Borrow the device type from the current stream: constructing torch.Stream(device=...)
    # would take a stream from the pool and shift the ids later Stream()s get.
    current = torch.accelerator.current_stream(index)
    return torch.Stream(stream_id=0, device_index=index, device_type=current.device_type)


def is_current_stream_capturing() -> bool:
    """False: neuron has no graph capture (torch.cuda.graph's), so no stream is capturing.
    Libraries ask before work that capture forbids (a synchronization, a host read)."""
    return False


def set_stream(stream: torch.Stream) -> None:
    if stream is None:
        return
    if stream.device.type != "neuron":
        raise ValueError(f"set_stream: expected a neuron stream, got a stream of "
                         f"{stream.device}; use torch.neuron.Stream() or torch.neuron.current_stream()")
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes `stream` current on its device (and the device current)."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev_stream = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return
        self.prev_device = torch.neuron.current_device()
        self.prev_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.neuron.set_device(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *args):
        if self.stream is None:
            return False
        torch.accelerator.set_stream(self.prev_stream)
        torch.neuron.set_device(self.prev_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    return StreamContext(stream)
