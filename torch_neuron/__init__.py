"""torch_neuron: the PyTorch device "neuron", running on a software model of AWS Trainium.

    import torch, torch_neuron
    x = torch.randn(4, 4).to("neuron")

Importing this package (or just `import torch`, through torch's backend autoloading) registers
the device, the `torch.neuron` module and the `.neuron()` methods of tensors and modules. This
module is also the process-wide API of the simulated device: predict-only execution, op
tracking, the dtype policy, simulated faults and the settings table.
"""


def _autoload():
    """Entry point of torch's device-backend autoloading; importing the package is the work.

    Defined before `import torch` below: when a user imports torch_neuron first, torch's own
    import runs autoloading, which looks this function up on the half-imported package.
    """


import atexit as _atexit
import contextlib as _contextlib
import os as _os
import time as _time
from typing import Any as _Any

import torch as _torch

from torch_neuron import _C
from torch_neuron import distributed
from torch_neuron import neuron
from torch_neuron import profiler
from torch_neuron._backend_meta import install as _install_fake_tensor_backend_meta
from torch_neuron._data_parallel import install as _install_data_parallel
from torch_neuron._multiprocessing import register_reducers as _register_reducers
from torch_neuron._printing import install as _install_printing
from torch_neuron.compile.cache import configure as _configure_compile_caches
from torch_neuron.compile.rng_state import install as _install_compiled_rng_replay
from torch_neuron.neuron.device import _index as _device_index

# -- Settings (Note [Settings table] in csrc/runtime/Settings.h) ---------------------------------


def settings() -> dict:
    """Every setting torch_neuron reads (environment variables included): name -> (value,
    source), where source is "default", "environment" or "api" (set by a call such as
    set_execute). `python -m torch_neuron env` prints the same table with each one's doc."""
    return {name: (value, source) for name, value, source, _doc in _C._settings()}


# -- Predict-only execution (Note [Predict-only execution] in csrc/aten/PredictOnly.h) ----------
# With execution off, every op on neuron tensors is charged on the simulated clock and allocates
# simulated HBM as usual, but computes nothing: results have the right shapes, dtypes and
# strides and undefined values. What needs values raises NotImplementedError naming this mode;
# .item() of a floating-point tensor (a loss to print) is NaN.


def set_execute(enabled: bool) -> None:
    """Whether neuron ops compute their results (True, the default) or are only charged
    (False, predict-only). TORCH_NEURON_EXECUTE=0 turns execution off at startup."""
    _C._set_execute(bool(enabled))


def get_execute() -> bool:
    return _C._execute_enabled()


@_contextlib.contextmanager
def predict_only():
    """A block whose neuron ops are charged but not computed."""
    before = get_execute()
    set_execute(False)
    try:
        yield
    finally:
        set_execute(before)


# -- Which ops ran on neuron and which fell back to the CPU (TorchNeuron's tracking API) --------


def get_executed_ops() -> dict[str, int]:
    """Operator name ("aten::add.Tensor") -> times it ran with neuron tensors, on the device or
    through CPU fallback, since the last clear_op_tracking()."""
    return dict(_C._executed_ops())


def get_fallback_ops() -> dict[str, int]:
    """Operator name -> times it had no neuron kernel and ran on the CPU instead."""
    return dict(_C._fallback_ops())


def clear_op_tracking() -> None:
    """Resets the counts of get_executed_ops() and get_fallback_ops()."""
    _C._clear_op_tracking()


def set_fallback_error(enabled: bool) -> None:
    """When enabled, an op that would fall back to the CPU raises RuntimeError naming the op.
    TORCH_NEURON_FALLBACK=error enables it at startup."""
    _C._set_fallback_error(bool(enabled))


# -- Dtypes Trainium does not compute natively (docs/design.md) --------------------------------


def set_float64_mode(mode: str) -> None:
    """"narrow" (default): device ops compute float64 in float32 and cast back, as Trainium
    and TorchNeuron do. "exact": compute float64 exactly on the host.
    TORCH_NEURON_FLOAT64=exact selects "exact" at startup."""
    if mode not in ("narrow", "exact"):
        raise ValueError(f"float64 mode must be 'narrow' or 'exact', got {mode!r}")
    _C._set_float64_exact(mode == "exact")


def get_float64_mode() -> str:
    return "exact" if _C._float64_is_exact() else "narrow"


def set_complex_decompose(on: bool) -> None:
    """True (default, as TorchNeuron on PyTorch >= 2.13): ops on complex64 tensors run on the
    device, decomposed into real arithmetic. False: every op on complex tensors falls back to
    the CPU. TORCH_NEURONX_COMPLEX_DECOMPOSE=0 selects False at startup."""
    _C._set_complex_decompose(bool(on))


def get_complex_decompose() -> bool:
    return _C._complex_decompose()


# -- Simulated device faults --------------------------------------------------------------------
# Make a NeuronCore fail, to test what a training program does when Trainium hardware fails. The
# Nth launch on the device from now (an op, a copy or a fill) raises a RuntimeError whose message
# starts like the Neuron runtime's ("NRT Error NRT_EXEC_HW_ERR_HBM_UE(1201): ..."); from then on
# every op, allocation and synchronization on that device raises it too, until the process
# exits. Other devices keep working. TORCH_NEURON_INJECT_FAULT=<kind>:<device>:<launch> arms
# the same fault at startup.

FAULT_KINDS = {
    "hbm_ue": "an uncorrectable HBM error (NRT_EXEC_HW_ERR_HBM_UE)",
    "timeout": "an execution that never completes, reported as a timeout (NRT_TIMEOUT)",
    "lost": "the NeuronCore stops responding (NRT_HW_ERROR)",
}


def inject_fault(kind: str, device: _Any = None, after_launches: int = 1) -> None:
    """Arms fault `kind` ("hbm_ue", "timeout" or "lost") on `device` (default: the current
    device) for its `after_launches`-th launch from now (1 = the next one)."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}: use one of {', '.join(FAULT_KINDS)}")
    if isinstance(after_launches, bool) or not isinstance(after_launches, int):
        raise TypeError(f"after_launches must be an int, got {type(after_launches).__name__}")
    _C._inject_fault(kind, _device_index(device), after_launches)


def device_failed(device: _Any = None) -> bool:
    """Whether the device has hit a simulated fault (and is unusable until the process exits)."""
    return _C._device_failed(_device_index(device))


# -- Registration -------------------------------------------------------------------------------

_C._register_host_kernels()
_configure_compile_caches()  # keyed on this build; TorchNeuron's NEFF-cache variables apply
_register_reducers()  # neuron tensors cross torch.multiprocessing as copies
_install_data_parallel()  # nn.DataParallel's CUDA-only copy helpers, for neuron tensors
_install_fake_tensor_backend_meta()  # backend metadata survives FakeTensor conversion
_install_printing()  # print(tensor) formats a CPU copy: no device ops, no float64 warning
_install_compiled_rng_replay()  # compiled checkpointed layers replay random ops on neuron
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
    "settings",
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
