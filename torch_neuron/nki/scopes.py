"""Tile lifetimes: the scopes of a kernel's loop iterations and which on-chip tiles outlive them.

Note [Tile lifetimes]
On hardware an on-chip tile does not live as long as the Python object naming it: the compiler
allocates SBUF/PSUM for the span of the kernel source in which the tile is used, and a tile
declared inside a loop body is one buffer reused by every iteration. AWS's sources: the
block-dimension migration guide (aws-neuron-sdk `nki/migration/index.rst`, "If blocks do not
need to be alive at the same time, remove the block dimension and hoist it down" into the loop,
versus a Python list of tiles when they must all be alive); the direct-allocation guide
(`general/nki/nki_direct_allocation_guide.rst`: a tile declared inside an `affine_range` body
has one physical tile, reused, "only one logical tile ... is alive at a time"); the dynamic-loop
deep dive (`nki/deep-dives/nki-dynamic-loops.rst`: "Tensors allocated inside the loop body are
allocated once and reused across iterations"); and the compile-configuration deep dive
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-compile-config.html:
with NKI's own allocation "the lifetime of each tensor then follows from the kernel source").

So every iteration of `nl.affine_range`/`sequential_range`/`static_range`, of the kernel
function's own `for ... in range(...)` loops (range_loops.py), and the kernel body, is a
scope. An SBUF/PSUM tile belongs to the scope that was innermost when it was allocated
(`nl.ndarray`/`zeros`/..., or the result tile of an `nl.*` function). When the scope ends its
tiles are released (their bytes are free for the next iteration's tiles) unless the tile is
still reachable from something that outlives the scope; then it moves to the enclosing scope and
is judged again when that one ends. What outlives an iteration of a loop in function F:
- a variable of F that was bound before the loop started (e.g. `prev = ...` above the loop and
  `prev = tile` in the body, or `acc = nl.maximum(acc, x)` carrying a value): the tile escapes;
- a list, tuple, dict or set (at any depth) held by such a variable, or by any variable of a
  function that called F (the migration guide's list of tiles `t_lst.append(...)`);
while a variable first bound inside the loop body is local to the body, even though Python
keeps it bound after the loop. Attributes of other objects, globals and closures do not count.
Writing into a tile (`acc[...] = x`, `dst=acc[...]`) is a write, not an allocation: a tile
allocated before the loop and written in the body lives in the outer scope. Tiles the Python
program drops earlier are still freed at once (weakref finalizer in tensor.Storage), as loops
that are not scopes (over other iterables, or `range` in a helper) rely on.

A released tile keeps its Python object; any instruction that reads or writes it raises
`ReleasedTileError` naming the instruction's kernel line and the loop whose iteration released
it: on hardware the next iteration's tiles already occupy its buffer, so it is a real bug.
Reads of a released tile by the kernel's return value are not checked (kernels return HBM).
The last iteration of a loop (or the one a `break` leaves) has no next one: Python keeps its
variables bound after the loop, and AWS's kernels use them there (nki-library rotational_topk
returns the last `nl.static_range` iteration's tiles), which the compiler, seeing the use,
keeps alive. Its released tiles are revivable: an instruction that uses one after the loop
takes its bytes back if no tile allocated since occupies them (KernelRun.revive), else raises
`ReleasedTileError` as before (the simulator's allocator gave them away, where the compiler
would not have: a false error, which the message says how to avoid).
"""

from __future__ import annotations

import sys
import weakref

_CONTAINERS = (list, tuple, dict, set, frozenset)
# Before Python 3.13 (PEP 667) `frame.f_locals` of a function frame is a snapshot dict cached
# on the frame, which would keep a rebound tile alive until the next snapshot; every reader
# refreshes it first, so emptying it after reading is safe.
_SNAPSHOT_LOCALS = sys.version_info < (3, 13)
_OPTIMIZED = 0x1  # CO_OPTIMIZED: a function frame, whose locals live outside the dict


def _locals(frame) -> dict:
    """A copy of the frame's local variables, leaving no reference to them behind."""
    cached = frame.f_locals
    values = dict(cached)
    if _SNAPSHOT_LOCALS and frame.f_code.co_flags & _OPTIMIZED:
        cached.clear()
    return values


class Scope:
    """One iteration of a scoped loop (or the kernel body, `loop` None): the on-chip storages
    it owns, by weak reference."""

    __slots__ = ("loop", "frame", "path", "storages", "closed", "parent")

    def __init__(self, parent, frame=None, path=(), loop=None):
        self.parent, self.frame, self.path, self.loop = parent, frame, path, loop
        self.storages: list = []
        self.closed = False


def _tiles_in(value, found: set, seen: set, live_only: bool = False) -> None:
    """Adds the ids of the storages of the NkiTensors reachable from value through
    containers (live_only: those not released)."""
    storage = getattr(value, "_storage", None)
    if storage is not None:
        if not (live_only and storage.released is not None):
            found.add(id(storage))
        return
    if isinstance(value, _CONTAINERS):
        if id(value) in seen:
            return
        seen.add(id(value))
        for item in (value.values() if isinstance(value, dict) else value):
            if isinstance(item, _CONTAINERS) or getattr(item, "_storage", None) is not None:
                _tiles_in(item, found, seen, live_only)


def _prefix(owner: tuple, path: tuple) -> bool:
    return len(owner) <= len(path) and path[:len(owner)] == owner


class LoopScopes:
    """The scope machinery of one KernelRun: the stack of open scopes, and, per function (code
    object), the loop path each local variable name belongs to (the loops it was first bound
    in, as their line numbers)."""

    def __init__(self, stop_frame=None):
        self.stop_frame = stop_frame  # Kernel.run's frame: frames from it up are not the kernel's
        self.top: Scope | None = None
        self.owners: dict = {}       # code -> {name: loop path}

    # -- the kernel body -----------------------------------------------------------------------
    def open_body(self) -> None:
        self.top = Scope(None)

    def close_body(self, release) -> None:
        while self.top is not None:
            scope, self.top = self.top, self.top.parent
            scope.closed = True
            for ref in scope.storages:
                storage = ref()
                if storage is not None:
                    release(storage, "the kernel's end")

    def adopt(self, storage) -> None:
        if self.top is not None:
            self.top.storages.append(weakref.ref(storage))

    def keep_to_end(self, storage) -> None:
        """Gives `storage` to the kernel body's scope: it lives until the kernel ends (a
        constant of the kernel, whatever loop first needed it)."""
        body = self.top
        while body is not None and body.parent is not None:
            body = body.parent
        if body is not None:
            body.storages.append(weakref.ref(storage))

    # -- loops ---------------------------------------------------------------------------------
    def loop_start(self, frame, line: int) -> tuple:
        """The path of a loop starting in `frame` at `line`; names bound now belong outside it
        (unless this loop bound them in an earlier run)."""
        parent = self.top
        base = parent.path if parent is not None and parent.frame is frame else ()
        path = base + (line,)
        owners = self.owners.setdefault(frame.f_code, {})
        for name, value in _locals(frame).items():
            owner = owners.get(name)
            if owner is None:
                owners[name] = base
            elif not (_prefix(owner, base) or owner[:len(path)] == path):
                # First bound in another loop: outer to this one only if it now holds a live
                # tile (rebound since, e.g. `t = nl.zeros(...)` before a loop that carries it).
                found, seen = set(), set()
                _tiles_in(value, found, seen, live_only=True)
                if found:
                    owners[name] = base
        return path

    def open(self, frame, path: tuple, loop: str) -> Scope:
        scope = self.top = Scope(self.top, frame, path, loop)
        return scope

    def close(self, scope: Scope, release, last: bool = False) -> None:
        """Ends `scope` (and any scope left open inside it): its tiles that nothing outliving
        it reaches are released (revivable when `last`: the loop's final iteration), the
        others move to the enclosing scope."""
        if scope.closed:
            return
        while self.top is not None and self.top is not scope:
            self.close(self.top, release)
        scope.closed = True
        self.top = scope.parent
        live = [s for s in (ref() for ref in scope.storages) if s is not None and
                not s.released]
        if not live:
            return
        kept = self._outliving(scope)
        parent = scope.parent
        for storage in live:
            if id(storage) in kept and parent is not None:
                parent.storages.append(weakref.ref(storage))
            else:
                release(storage, scope.loop, revivable=last)

    def _outliving(self, scope: Scope) -> set:
        """Ids of the storages reachable from what outlives `scope` (Note [Tile lifetimes])."""
        found, seen = set(), set()
        frame = scope.frame
        owners = self.owners.setdefault(frame.f_code, {})
        path = scope.path
        for name, value in _locals(frame).items():
            owner = owners.get(name)
            if owner is None:
                owners[name] = owner = path
            if len(owner) < len(path) and _prefix(owner, path):
                _tiles_in(value, found, seen)
        caller = frame.f_back
        while caller is not None and caller is not self.stop_frame:
            for value in _locals(caller).values():
                if isinstance(value, _CONTAINERS):
                    _tiles_in(value, found, seen)
            caller = caller.f_back
        return found


def scoped(iterable, current):
    """Yields from `iterable`, each iteration a scope of the running kernel (if any)."""
    scopes = current()
    if scopes is None:
        yield from iterable
        return
    scopes, release = scopes
    frame = sys._getframe(1)
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
    path = scopes.loop_start(frame, frame.f_lineno)
    loop = f"the loop at {where}"
    items = iter(iterable)
    done = object()
    following = next(items, done)
    while following is not done:
        i, following = following, next(items, done)
        scope = scopes.open(frame, path, loop)
        try:
            yield i
        except GeneratorExit:   # a `break`: this was the last iteration
            scopes.close(scope, release, last=True)
            raise
        finally:
            scopes.close(scope, release, last=following is done)
