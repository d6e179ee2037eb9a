"""`nki.isa.NkiInstruction`: what an `nki.isa` call returns, and `depends_on`.

"Returned by nki.isa operations during tracing. Use .depends_on(*producers) to add scheduling
dependencies (this instruction runs after every listed producer completes)" (the release's
stub); "it lowers to a hardware semaphore wait". Here a dependency is a one-byte token the
producer's records write and the consumer's read, so the kernel schedule orders them as any
read after a write (Note [Kernel schedule]); the semaphore itself takes no time.
"""

from __future__ import annotations

import functools

from torch_neuron.nki.errors import NkiValidationError
from torch_neuron.nki.records import Region
from torch_neuron.nki.tensor import _RUNS


class NkiInstruction:
    """The records one `nki.isa` call appended to its kernel run."""

    def __init__(self, run, indices):
        self._run, self._indices = run, tuple(indices)

    def depends_on(self, *producers: "NkiInstruction") -> "NkiInstruction":
        records = self._run.records
        for producer in producers:
            if not isinstance(producer, NkiInstruction) or producer._run is not self._run:
                raise NkiValidationError(f"depends_on({producer!r}): producers are instructions "
                                         f"of the same kernel run")
            if not producer._indices or not self._indices:
                continue
            if max(producer._indices) >= min(self._indices):
                raise NkiValidationError("depends_on: the producer was issued after its "
                                         "consumer; an instruction can only wait for earlier ones")
            token = Region("hbm", self._run.new_buffer_id(), None, (0, 1))
            for i in producer._indices:
                records[i] = records[i]._replace(writes=records[i].writes + (token,))
            for i in self._indices:
                records[i] = records[i]._replace(reads=records[i].reads + (token,))
        return self

    def __repr__(self):
        return f"NkiInstruction(records {list(self._indices)})"


def returning_handles(fn):
    """`fn` (an nki.isa instruction) returning the NkiInstruction of the records it appended."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        run = _RUNS[-1] if _RUNS else None
        first = len(run.records) if run is not None else 0
        fn(*args, **kwargs)
        if run is None:
            return None
        handle = NkiInstruction(run, range(first, len(run.records)))
        if kwargs.get("name"):   # for Kernel.with_schedule's edges
            run.__dict__.setdefault("named", {}).setdefault(kwargs["name"], []).append(handle)
        return handle
    return call


def apply_schedule(run, edges) -> None:
    """Kernel.with_schedule's edges, `[(name, name | [names]), ...]`: each instruction named
    by the first waits for those named by the second ("'plus1' depends on 'recip', and so will
    execute second", nki/guides/how-to-scheduling-apis.rst), within each program."""
    named = run.__dict__.get("named", {})
    for edge in edges:
        dependent, prerequisites = edge
        prerequisites = [prerequisites] if isinstance(prerequisites, str) else prerequisites
        for name in [dependent, *prerequisites]:
            if name not in named:
                raise NkiValidationError(f"with_schedule: no instruction is named {name!r} "
                                         f"(name= of an nki.isa call)")
        for consumer in named[dependent]:
            for name in prerequisites:
                for producer in named[name]:
                    if _program(run, producer) == _program(run, consumer):
                        consumer.depends_on(producer)


def _program(run, handle: NkiInstruction):
    return run.records[handle._indices[0]].core if handle._indices else None
