"""`torch_neuronx`: TorchNeuron's import name, provided by torch_neuron (simulated Trainium).

accelerate and transformers select the "neuron" device only when this module exists, and
TorchNeuron scripts import it; both work unchanged with this alias. Its public functions are
torch_neuron's: get_fallback_ops, get_executed_ops, clear_op_tracking, set_fallback_error, ...
"""

import torch_neuron
from torch_neuron import *  # noqa: F401,F403
from torch_neuron import (  # noqa: F401  (explicit, for readers and linters)
    clear_op_tracking,
    get_executed_ops,
    get_fallback_ops,
    neuron,
    profiler,
    set_fallback_error,
)

__version__ = "0.1.0"
__all__ = list(torch_neuron.__all__)
