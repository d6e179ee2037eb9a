"""Random number generation of torch.neuron: one default generator per device."""

from typing import Any

import torch

from torch_neuron import _C
from torch_neuron.neuron.device import _index, device_count


def _generator(device: Any = None) -> torch.Generator:
    return _C._default_generator(_index(device))



def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seeds every device's generator (torch.manual_seed calls this)."""
    for i in range(device_count()):
        _generator(i).manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic random number."""
    _generator().seed()


def seed_all() -> None:
    s = _generator(0).seed()
    for i in range(1, device_count()):
        _generator(i).manual_seed(s)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: Any = "neuron") -> torch.Tensor:
    """The generator state of a device as a uint8 CPU tensor."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "neuron") -> None:
    _generator(device).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
