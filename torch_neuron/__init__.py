"""torch_neuron: the PyTorch device "neuron", running on a software model of AWS Trainium.

    import torch, torch_neuron
    x = torch.randn(4, 4).to("neuron")

Importing this package (or just `import torch`, through torch's backend autoloading) registers
the device, the `torch.neuron` module and the `.neuron()` methods of tensors and modules.
"""


def _autoload():
    """Entry point of torch's device-backend autoloading; importing the package is the work.

    Defined before `import torch` below: when a user imports torch_neuron first, torch's own
    import runs autoloading, which looks this function up on the half-imported package.
    """


import atexit as _atexit
import os as _os
import time as _time

import torch as _torch

from torch_neuron import _C
from torch_neuron import distributed
from torch_neuron import neuron
from torch_neuron import profiler
from torch_neuron._backend_meta import install as _install_fake_tensor_backend_meta
from torch_neuron._execution import get_execute, predict_only, set_execute
from torch_neuron._faults import device_failed, inject_fault
from torch_neuron._inductor.cache import apply_neff_cache_variables as _apply_neff_cache_variables
from torch_neuron._multiprocessing import register_reducers as _register_reducers
from torch_neuron._dtype_policy import (get_complex_decompose, get_float64_mode,
                                        set_complex_decompose, set_float64_mode)
from torch_neuron._op_tracking import (
    clear_op_tracking,
    get_executed_ops,
    get_fallback_ops,
    set_fallback_error,
)

_C._register_host_kernels()
_apply_neff_cache_variables()  # TorchNeuron's NEFF-cache variables steer Inductor's cache
_register_reducers()  # neuron tensors cross torch.multiprocessing as copies
_install_fake_tensor_backend_meta()  # backend metadata survives FakeTensor conversion
_torch.utils.rename_privateuse1_backend("neuron")
_torch._register_device_module("neuron", neuron)
_torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)
# torch.autocast("neuron") computes in bfloat16 unless told otherwise: Trainium's native
# low-precision type (TorchNeuron's default too).
_torch.set_autocast_dtype("neuron", _torch.bfloat16)
distributed._register()


def _let_autograd_threads_settle():
    # Autograd runs neuron backward passes on its device threads, which can still be releasing
    # the last Python objects of a backward pass when the interpreter shuts down; taking the GIL
    # then aborts the process ("terminate called without an active exception", a PyTorch race
    # that CUDA shares). Releasing the GIL briefly at exit lets them finish first.
    if neuron.is_initialized():
        _time.sleep(0.02)


_atexit.register(_let_autograd_threads_settle)

#: Directory to add to CMAKE_PREFIX_PATH for find_package(TorchNeuron) in C++ programs.
cmake_prefix_path = _os.path.join(_os.path.dirname(__file__), "share", "cmake")

__all__ = [
    "neuron",
    "distributed",
    "profiler",
    "get_executed_ops",
    "get_fallback_ops",
    "clear_op_tracking",
    "set_fallback_error",
    "set_float64_mode",
    "get_float64_mode",
    "set_complex_decompose",
    "get_complex_decompose",
    "cmake_prefix_path",
    "inject_fault",
    "device_failed",
    "set_execute",
    "get_execute",
    "predict_only",
]
