"""`@nki.jit` kernels and `nki.simulate`: running a kernel on the simulated NeuronCore.

As AWS's simulator does (aws-neuron-sdk `nki/guides/nki_simulator.rst`, "Execution"): array
arguments become HBM tensors (`nl.hbm`, or `nl.shared_hbm` with LNC=2), the kernel body runs as
Python with every `nki.isa`/`nki.language` call executed eagerly, HBM tensors the kernel returns
come back in the caller's format (NumPy arrays for NumPy inputs, torch tensors on the inputs'
device for torch inputs, neuron tensors included) and inputs the kernel wrote are updated in
place. `kernel[n](...)` launches n logical-core programs (`nl.program_id()` 0..n-1) one after the
other (AWS's simulator uses threads); on NeuronCore-v2 only n = 1 exists
(`nki/get-started/about/lnc.rst`).
"""

from __future__ import annotations

import functools
import inspect
import sys

import numpy as np

from torch_neuron.nki import blas, dtypes
from torch_neuron.nki.cores import Cores
from torch_neuron.nki.handles import apply_schedule
from torch_neuron.nki import target as targets
from torch_neuron.nki.errors import (CapacityError, MemorySpaceError, NkiValidationError,
                                     ShapeError, UninitializedReadError)
from torch_neuron.nki.language import _range_scope
from torch_neuron.nki.range_loops import with_scoped_range_loops
from torch_neuron.nki.tensor import (_RUNS, KernelRun, MemoryRegion, NkiTensor, pop_run,
                                     push_run, wrap_input)
from torch_neuron.nki.typing import TensorAnnotation

_UNINITIALIZED = ("error", "nan")


def _is_torch(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


class _Input:
    """A NumPy or torch argument, its HBM tensor, and how to write it back."""

    def __init__(self, value, buffer: MemoryRegion, name: str, placeholder: bool = False):
        self.value = value
        self.placeholder = placeholder
        if placeholder:
            # Predict-only (Note [NKI kernels on the stream]): the kernel's instructions do not
            # depend on the values, so zeros of the right shape and dtype stand in for them.
            dt = dtypes.resolve(value.dtype)
            array = np.zeros(tuple(value.shape), dtype=dt.storage)
        elif _is_torch(value):
            import torch

            dt = dtypes.resolve(value.dtype)
            host = value.detach().cpu()
            if dt.narrow or dt.kind == "bool":
                host = host.to(torch.float32 if dt.narrow else torch.uint8)
            elif dt.kind == "mx":   # float8_e8m0fnu: its bits (Note [MX data types])
                host = host.view(torch.uint8)
            array = host.contiguous().numpy().astype(dt.storage, copy=True)
        else:
            dt = dtypes.resolve(value.dtype)
            array = np.array(value, dtype=dt.storage, copy=True)
        self.tensor = wrap_input(array, dt, buffer, name)

    def write_back(self):
        storage = self.tensor._storage
        if not storage.modified or self.placeholder:
            return
        storage.sync()   # Note [Dtype views]
        if _is_torch(self.value):
            import torch

            with torch.no_grad():
                self.value.copy_(torch.from_numpy(storage.data).to(self.value.dtype))
        else:
            self.value[...] = storage.data.astype(self.value.dtype)


def _output(t: NkiTensor, like_torch, device, run: KernelRun):
    if t.buffer.on_chip:
        # NKI known issues, "Top-level tensors must be on HBM": a kernel's outputs are HBM
        # tensors, stored from SBUF (nki/about/nki_known_issues).
        raise MemorySpaceError(
            f"the kernel returned {t!r}, a tile in {t.buffer.space.upper()}: a kernel's outputs "
            f"must be in HBM. Allocate the output with nl.ndarray(shape, dtype, "
            f"buffer=nl.shared_hbm) and store the tile into it (nl.store or nisa.dma_copy)")
    t._storage.sync()   # Note [Dtype views]
    if not t._written.all() and run.uninitialized == "error":
        missing = int(t._written.size - np.count_nonzero(t._written))
        raise UninitializedReadError(f"the kernel returned {t!r} with {missing} of {t.size} "
                                     f"elements never written (or computed from memory never "
                                     f"written: Note [Results of unwritten memory])")
    if run.predict_only:
        import torch

        return torch.empty(t.shape, dtype=dtypes.torch_dtype(t.dtype), device=device)
    values = np.array(t._data, copy=True)
    if not like_torch:
        return values
    import torch

    if t.dt.kind == "mx":   # float8_e8m0fnu: its bits (Note [MX data types])
        return torch.from_numpy(values).view(dtypes.torch_dtype(t.dtype)).to(device)
    return torch.from_numpy(values).to(dtypes.torch_dtype(t.dtype)).to(device)


def _convert_result(result, like_torch, device, run):
    if isinstance(result, NkiTensor):
        return _output(result, like_torch, device, run)
    if isinstance(result, (tuple, list)):
        return type(result)(_convert_result(r, like_torch, device, run) for r in result)
    if isinstance(result, dict):
        return {k: _convert_result(v, like_torch, device, run) for k, v in result.items()}
    return result


class Kernel:
    """A kernel function decorated with `@nki.jit`. Calling it runs it on the simulated
    NeuronCore (there is no hardware to compile for); `kernel[n]` sets the LNC degree."""

    def __init__(self, fn, platform_target=None, lnc: int = 1, uninitialized: str = "error",
                 **options):
        if uninitialized not in _UNINITIALIZED:
            raise ValueError(f"uninitialized={uninitialized!r}: use 'error' (reads of memory "
                             f"never written raise) or 'nan' (they read NaN, as AWS's "
                             f"simulator)")
        self.fn, self.platform_target, self.lnc = fn, platform_target, lnc
        self.uninitialized, self.options = uninitialized, options
        self.last_run: KernelRun | None = None
        functools.update_wrapper(self, fn)

    def _with(self, **changes) -> "Kernel":
        kwargs = dict(platform_target=self.platform_target, lnc=self.lnc,
                      uninitialized=self.uninitialized, **self.options)
        kwargs.update(changes)
        return Kernel(self.fn, **kwargs)

    def with_schedule(self, edges) -> "Kernel":
        """This kernel with extra dependency edges between named instructions,
        `[(name, name | [names]), ...]`: the first waits for the second
        (nki/guides/how-to-scheduling-apis.rst)."""
        return self._with(schedule=[tuple(e) for e in edges])

    def __getitem__(self, lnc) -> "Kernel":
        if isinstance(lnc, tuple):
            if len(lnc) != 1:
                raise NkiValidationError(f"kernel[{lnc}]: the launch takes one number, the LNC "
                                         f"degree (nki/get-started/about/lnc.rst)")
            lnc = lnc[0]
        return self._with(lnc=int(lnc))

    def __call__(self, *args, **kwargs):
        if _RUNS:
            # Called from inside a running kernel: NKI traces it into the caller's program
            # (AWS's nki-library test wrappers call @nki.jit kernels so), not a launch of its own.
            return with_scoped_range_loops(self.fn, _range_scope)(*args, **kwargs)
        return self.run(*args, **kwargs).result

    def run(self, *args, **kwargs) -> KernelRun:
        """Runs the kernel; returns the KernelRun (its `result` and `records`)."""
        target = targets.resolve(self.platform_target)
        if not 1 <= self.lnc <= target.max_lnc:
            raise NkiValidationError(f"kernel[{self.lnc}]: {target.core} supports LNC degrees "
                                     f"1..{target.max_lnc}")
        try:
            run = self._launch(target, args, kwargs)
        except CapacityError as full:
            # Note [Tiles freed at their last use] (tensor.py): learn each tile's last use
            # with room for every tile, then run again freeing tiles there, as the compiler
            # would have allocated them.
            try:
                probe = self._launch(target, args, kwargs, probe=True)
            except NkiValidationError:
                raise full from None
            run = self._launch(target, args, kwargs, last_uses=probe.last_use)
        self.last_run = run
        return run

    def _launch(self, target, args, kwargs, probe=False, last_uses=None) -> KernelRun:
        run = KernelRun(target, self.lnc, self.uninitialized, probe=probe, dies=last_uses)
        # The kernel's scopes look at the frames below this one (Note [Tile lifetimes]).
        run.entry_frame = run.scopes.stop_frame = sys._getframe()
        buffer = MemoryRegion.shared_hbm if self.lnc > 1 else MemoryRegion.private_hbm
        tensors = [a for a in list(args) + list(kwargs.values())
                   if isinstance(a, np.ndarray) or _is_torch(a)]
        like_torch = bool(tensors) and _is_torch(tensors[0])
        device = tensors[0].device if like_torch else None
        on_neuron = device is not None and device.type == "neuron"
        run.predict_only = on_neuron and not _execute_enabled()
        if on_neuron:
            from torch_neuron import _C

            _C._pause_clocks()  # the host copies are the simulator's, not the kernel's
        push_run(run)
        try:
            inputs = {}

            def wrap(i, a):
                if isinstance(a, np.ndarray) or _is_torch(a):
                    inputs[i] = _Input(a, buffer, str(i), placeholder=run.predict_only)
                    return inputs[i].tensor
                return a

            wrapped_args = [wrap(i, a) for i, a in enumerate(args)]
            wrapped_kwargs = {k: wrap(k, a) for k, a in kwargs.items()}
            self._check_annotations(wrapped_args, wrapped_kwargs)
            result = None
            # `range` loops are scopes too (Note [Tile lifetimes], range_loops.py).
            fn = with_scoped_range_loops(self.fn, _range_scope)
            def program_body(program):
                with np.errstate(all="ignore") if run.predict_only else _no_context():
                    return fn(*wrapped_args, **wrapped_kwargs)

            with blas.single_threaded():
                if self.lnc == 1:
                    result = program_body(0)
                    run.end_program()
                else:   # Note [Programs that wait for each other] (cores.py)
                    run.cores = Cores(run, self.lnc)
                    result = run.cores.run_all(program_body)[0]
            if probe:
                return run
            if self.options.get("schedule"):
                apply_schedule(run, self.options["schedule"])
            run.result = _convert_result(result, like_torch, device, run)
            for inp in inputs.values():
                inp.write_back()
        finally:
            pop_run()
            if on_neuron:
                _C._resume_clocks()
        if on_neuron:
            _charge(run, device, self.fn.__name__)
        return run

    def _check_annotations(self, args, kwargs):
        """Arguments annotated `nt.tensor[shape]` (nki.typing) must have that shape."""
        annotations = getattr(self.fn, "__annotations__", {})
        if not any(isinstance(a, TensorAnnotation) for a in annotations.values()):
            return
        bound = inspect.signature(self.fn).bind_partial(*args, **kwargs).arguments
        for name, value in bound.items():
            want = annotations.get(name)
            if isinstance(want, TensorAnnotation) and want.shape is not None and \
                    isinstance(value, NkiTensor) and value.shape != want.shape:
                raise ShapeError(f"argument {name} has shape {value.shape} but the kernel "
                                 f"declares {want!r}")


def _execute_enabled() -> bool:
    from torch_neuron import _C

    return _C._execute_enabled()


class _no_context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _charge(run: KernelRun, device, name: str) -> None:
    """Note [NKI kernels on the stream]
    A kernel called with neuron tensors is one launch on the device's current stream, as a
    compiled NKI kernel is on Trainium: trnsim's schedule of its instructions (Note [Kernel
    schedule]) plus the launch overhead, through the one charge path (_C._charge_nki_kernel ->
    charge(), Note [One charge path]). It appears in traces and `python -m torch_neuron run`
    reports as `nki.<kernel name>`; inside a compiled graph's region it joins the graph as one
    op that orders against everything. The simulator's own host copies of the operands are not
    charged (the clocks are paused around them). In predict-only mode the kernel body runs on
    zeros standing in for the inputs (NKI control flow does not depend on tensor values: loops
    and indices are static), so the instructions and their schedule are those of a real run;
    the outputs are left unspecified and the inputs unchanged, as every predict-only op does.
    The instructions check everything and record themselves but compute nothing (Note
    [Predict-only instructions] in instruction.py)."""
    from torch_neuron import _C
    from torch_neuron.nki.timing import schedule

    run.timing = timing = schedule(run)
    detail = (f"{len(run.records)} instructions, makespan {timing['makespan_ns'] / 1e3:.3f} us"
              f" ({run.target.core}, LNC={run.lnc})")
    if device.index is None:
        import torch

        device = torch.device("neuron", torch.neuron.current_device())
    index = device.index
    _C._charge_nki_kernel(index, f"nki.{name}", timing["makespan_ns"],
                          list(timing["busy_ns"]), timing["hbm_bytes"], timing["flops"], detail)


def jit(fn=None, **kwargs):
    """`@nki.jit` or `@nki.jit(platform_target="trn2", ...)`. Options: platform_target
    ("trn1"/"trn2"/"trn3"; default: the simulated instance's NeuronCore), uninitialized
    ("error" or "nan")."""
    if fn is None:
        return lambda f: jit(f, **kwargs)
    if isinstance(fn, Kernel):
        return fn._with(**kwargs) if kwargs else fn
    return Kernel(fn, **kwargs)


def simulate(kernel, **options):
    """`nki.simulate(kernel)(*args)`: runs the kernel functionally on the CPU, as AWS's entry
    point does. A plain function is wrapped as by @nki.jit; options as for jit."""
    return jit(kernel, **options)


def run(kernel, *args, **kwargs) -> KernelRun:
    """Runs `kernel` and returns its KernelRun: `.result` and `.records` (one
    InstructionRecord per executed instruction, Note [Instruction records])."""
    return jit(kernel).run(*args, **kwargs)
