"""Simulated device faults: make a NeuronCore fail, to test what a training program does when
Trainium hardware fails (checkpointing on the other devices, exiting cleanly, restarting under
torchrun --max-restarts).

The Nth launch on the device from now (an op, a copy or a fill) raises a RuntimeError whose
message starts like the Neuron runtime's ("NRT Error NRT_EXEC_HW_ERR_HBM_UE(1201): ..."); from
then on every op, allocation and synchronization on that device raises it too, until the
process exits. Other devices keep working. The environment variable
TORCH_NEURON_INJECT_FAULT=<kind>:<device>:<launch> arms the same fault at startup.
"""

from typing import Any

from torch_neuron import _C
from torch_neuron.neuron.device import _index

FAULT_KINDS = {
    "hbm_ue": "an uncorrectable HBM error (NRT_EXEC_HW_ERR_HBM_UE)",
    "timeout": "an execution that never completes, reported as a timeout (NRT_TIMEOUT)",
    "lost": "the NeuronCore stops responding (NRT_HW_ERROR)",
}


def inject_fault(kind: str, device: Any = None, after_launches: int = 1) -> None:
    """Arms fault `kind` ("hbm_ue", "timeout" or "lost") on `device` (default: the current
    device) for its `after_launches`-th launch from now (1 = the next one)."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}: use one of {', '.join(FAULT_KINDS)}")
    if isinstance(after_launches, bool) or not isinstance(after_launches, int):
        raise TypeError(f"after_launches must be an int, got {type(after_launches).__name__}")
    _C._inject_fault(kind, _index(device), after_launches)


def device_failed(device: Any = None) -> bool:
    """Whether the device has hit a simulated fault (and is unusable until the process exits)."""
    return _C._device_failed(_index(device))
