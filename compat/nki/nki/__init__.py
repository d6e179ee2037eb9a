"""`nki`: the Neuron Kernel Interface's import name, provided by torch_neuron.nki.

`import nki`, `import nki.language as nl` and `import nki.isa as nisa` give torch_neuron's
modules themselves (not copies), so a kernel written against AWS's documented API runs
unchanged on the simulated NeuronCore. What is implemented: docs/nki.md.
"""

import sys

import torch_neuron.nki as _nki
from torch_neuron.nki import *  # noqa: F401,F403
from torch_neuron.nki import isa, language, typing  # noqa: F401

# The submodules are registered under the alias names so that `import nki.language` finds
# torch_neuron's module object instead of looking for a file in this package.
sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".isa.constants"] = isa.constants
sys.modules[__name__ + ".typing"] = typing

__all__ = list(_nki.__all__)
__version__ = "0.1.0"
