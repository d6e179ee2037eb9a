"""Virtual registers and the loops they bound: `nisa.register_alloc`, `register_move`,
`register_load`, `register_store`, `nl.dynamic_range`, `nl.fori_loop`, `nl.while_loop`.

Signatures from the current release's stubs (aws-neuron-sdk `nki/api/nki/isa/__init__.py`,
`nki/api/nki/language/__init__.py`). Each engine sequencer keeps "64x 32-bit registers" and
runs a dynamic loop as branches (register_alloc's docstring). Here a register holds a Python
int; a dynamic loop runs its body once per iteration, as the sequencer would, so the records
hold every iteration's instructions. A register loaded from memory remembers the tensor it came
from: an access addressed through it (`.ap(scalar_offset=reg)`) also reads that tensor, so the
schedule orders it after whatever wrote the value. The sequencer's own work (moves, loads,
branches) takes no engine time here: no document gives its cost.

Predict-only mode computes no values, so a register loaded from memory has none: a loop bounded
by one cannot run and says so.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from torch_neuron.nki.errors import NkiValidationError, ShapeError, UnsupportedError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.scopes import scoped
from torch_neuron.nki.tensor import NkiTensor, current_run
from torch_neuron.nki.virtual_register import VirtualRegister

# A while_loop stops with an error after this many iterations instead of hanging the process
# (a body that never clears its condition register).
WHILE_LOOP_LIMIT = 1 << 20


def _value(x, what: str) -> int:
    return x.value(what) if isinstance(x, VirtualRegister) else int(x)


def register_alloc(x: Optional[int] = None) -> VirtualRegister:
    return VirtualRegister(x)


def register_move(dst: VirtualRegister, src) -> None:
    if not isinstance(dst, VirtualRegister):
        raise ShapeError(f"register_move: dst {dst!r} must be a VirtualRegister")
    if isinstance(src, VirtualRegister):
        dst._value, dst._source, dst._known = src._value, src._source, src._known
    else:
        dst._value, dst._source, dst._known = int(np.int32(src)), None, True


def _single_element(ins: _Instruction, t, role: str) -> NkiTensor:
    ins.tile(t, role, on_chip=False, spaces=("sbuf", "private_hbm", "shared_hbm"),
             read=role == "src")
    if t.size != 1:
        raise ins.error(ShapeError, f"{role} {t!r} must hold exactly one element")
    return t


def register_load(dst: VirtualRegister, src: NkiTensor) -> None:
    ins = _Instruction("register_load")
    if not isinstance(dst, VirtualRegister):
        raise ins.error(ShapeError, f"dst {dst!r} must be a VirtualRegister")
    _single_element(ins, src, "src")
    value = ins.values(src, "src")
    if ins.compute:
        dst._value, dst._known = int(np.int32(np.asarray(value).reshape(-1)[0])), True
    else:
        dst._value, dst._known = None, False
    dst._source = src


def register_store(dst: NkiTensor, src: VirtualRegister) -> None:
    ins = _Instruction("register_store")
    _single_element(ins, dst, "dst")
    if not isinstance(src, VirtualRegister):
        raise ins.error(ShapeError, f"src {src!r} must be a VirtualRegister")
    if ins.compute:
        ins.write(dst, np.full(dst.shape, src.value("register_store")))
    else:
        ins.write(dst, None)


def _not_in_no_reorder(what: str) -> None:
    """Dynamic loops cannot start inside nl.no_reorder: "This is NOT supported and will error"
    (nki/deep-dives/nki-dynamic-loops.rst); a no_reorder inside the loop's body is fine."""
    if getattr(current_run(what), "no_reorder_depth", 0):
        raise NkiValidationError(f"{what} inside nl.no_reorder(): a dynamic loop cannot be "
                                 f"reordered as a block; put the no_reorder inside its body")


def dynamic_range(start, stop=None, step=1):
    """range(start, stop, step) with register bounds read when the loop starts. The loop's
    instructions wait for the memory its bounds were loaded from (the sequencer branches on
    them)."""
    _not_in_no_reorder("nl.dynamic_range")
    if isinstance(step, VirtualRegister) or int(step) <= 0:
        raise ShapeError(f"dynamic_range: step={step!r} must be a positive compile-time integer")
    if stop is None:
        start, stop = 0, start
    iterations = _scoped_range(_value(start, "dynamic_range"), _value(stop, "dynamic_range"),
                               int(step))
    sources = [r._source for r in (start, stop)
               if isinstance(r, VirtualRegister) and r._source is not None]
    return _controlled(iterations, sources) if sources else iterations


def _scoped_range(start: int, stop: int, step: int):
    """range(start, stop, step), each iteration a tile scope, as nl.affine_range's (Note [Tile
    lifetimes] in scopes.py)."""
    def scopes():
        run = current_run("a dynamic loop")
        return run.scopes, run.release

    return scoped(range(start, stop, step), scopes)


def _controlled(iterations, sources):
    run = current_run("nl.dynamic_range")
    run.control_sources.extend(sources)
    try:
        yield from iterations
    finally:
        del run.control_sources[-len(sources):]


def fori_loop(lower, upper, body_fun, step=1) -> None:
    """body_fun(i) for i in range(lower, upper, step), i a VirtualRegister holding the value."""
    for i in dynamic_range(lower, upper, step):
        body_fun(VirtualRegister(i))


def while_loop(init: VirtualRegister, body_fun) -> None:
    """r = init; while r != 0: r = body_fun(r)."""
    _not_in_no_reorder("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise ShapeError(f"while_loop: init {init!r} must be a VirtualRegister")
    r = init
    for n in _scoped_range(0, WHILE_LOOP_LIMIT + 1, 1):
        if r.value("while_loop") == 0:
            return
        if n == WHILE_LOOP_LIMIT:
            raise UnsupportedError(f"while_loop ran {WHILE_LOOP_LIMIT} iterations without its "
                                   f"condition register reaching 0; its body must update it")
        current = VirtualRegister()
        register_move(current, r)
        run = current_run("nl.while_loop")
        run.control_sources.extend([r._source] if r._source is not None else [])
        try:
            nxt = body_fun(current)
        finally:
            if r._source is not None:
                run.control_sources.pop()
        r = nxt
        if not isinstance(r, VirtualRegister):
            raise ShapeError(f"while_loop: the body returned {r!r}; it must return the next "
                             f"condition register")
