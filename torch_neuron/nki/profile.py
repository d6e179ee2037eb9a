"""`nki.profile(kernel, *args)`: a kernel's predicted time and engine utilization, line by line.

Runs the kernel (as calling it does), schedules its executed instructions with trnsim (Note
[Kernel schedule]) and returns a `KernelProfile`. Utilization is busy time over the makespan:
for "DMA", the time at least one DMA queue is busy. With LNC=2 the engines of both physical
cores count, busy time over twice the makespan.
"""

from __future__ import annotations

import dataclasses
import json

from torch_neuron.nki.timing import ENGINES, schedule


@dataclasses.dataclass(frozen=True)
class TimedInstruction:
    index: int        # position in the kernel's program order (records[index])
    engine: str
    name: str
    source: str       # the kernel's file:line
    start_us: float
    end_us: float
    dma_queue: int | None = None


class KernelProfile:
    """The timing of one kernel run (see the module docstring)."""

    def __init__(self, run, timing: dict):
        self.run = run
        self.records = run.records
        self.programs = timing["programs"]
        self.time_us = timing["makespan_ns"] / 1e3
        span = timing["makespan_ns"] * self.programs
        self.busy = {e: (b / span if span > 0 else 0.0)
                     for e, b in zip(ENGINES, timing["busy_ns"])}
        self.dma_queue_busy = {q: (b / span if span > 0 else 0.0)
                               for q, b in enumerate(timing["dma_queue_busy_ns"])}
        self.instructions = dict(zip(ENGINES, (int(n) for n in timing["instructions"])))
        # Repeats of earlier instructions, not scheduled (Note [Redundant instructions]).
        self.dropped = int(timing.get("dropped", 0))
        self.hbm_bytes = timing["hbm_bytes"]
        self.flops = timing["flops"]
        self._start, self._end = timing["start_ns"], timing["end_ns"]
        # Where each instruction ran: the compiler places a tensor_copy given no engine (Note
        # [Engine choice] in trnsim/kernel_schedule.h).
        self.engines = timing["engines"]
        self._makespan_ns, self._busy_ns = timing["makespan_ns"], list(timing["busy_ns"])
        self.critical_path = [self.instruction(i) for i in timing["critical_path"]]

    def instruction(self, index: int) -> TimedInstruction:
        r = self.records[index]
        return TimedInstruction(index, self.engines[index], r.name, r.source,
                                float(self._start[index]) / 1e3, float(self._end[index]) / 1e3,
                                r.dma_queue)

    @property
    def bound(self) -> str:
        """The busiest engine ("DMA" included): what bounds the kernel."""
        return max(self.busy, key=self.busy.get)

    def by_line(self) -> dict:
        """Busy microseconds per (source line, engine), the engine time each line costs."""
        out: dict = {}
        for i, r in enumerate(self.records):
            key = (r.source, self.engines[i])
            out[key] = out.get(key, 0.0) + float(self._end[i] - self._start[i]) / 1e3
        return out

    def save_trace(self, path: str) -> None:
        """A Chrome/Perfetto trace (open in https://ui.perfetto.dev): one process per logical
        core program, one track per engine and per DMA queue, each instruction an event named
        after it whose args carry its kernel source line."""
        events = []
        tracks: dict = {}

        def track(core, name):
            key = (core, name)
            if key not in tracks:
                tid = len([k for k in tracks if k[0] == core])
                tracks[key] = tid
                events.append({"ph": "M", "name": "thread_name", "pid": core, "tid": tid,
                               "args": {"name": name}})
                events.append({"ph": "M", "name": "thread_sort_index", "pid": core,
                               "tid": tid, "args": {"sort_index": tid}})
            return tracks[key]

        for core in range(self.programs):
            events.append({"ph": "M", "name": "process_name", "pid": core,
                           "args": {"name": f"NKI kernel, program {core}"}})
            for e in ENGINES[:4]:
                track(core, e)
        for i, r in enumerate(self.records):
            name = self.engines[i] if r.engine != "DMA" else f"DMA queue {r.dma_queue}"
            start = float(self._start[i]) / 1e3
            events.append({"ph": "X", "name": r.name, "pid": r.core, "tid": track(r.core, name),
                           "ts": start, "dur": float(self._end[i]) / 1e3 - start,
                           "args": {"source": r.source, "index": i,
                                    "operands": [f"{o.role}: {o.dtype}{list(o.shape)} "
                                                 f"({o.space})" for o in r.operands]}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)

    def summary(self) -> str:
        lines = [f"{self.time_us:.3f} us, bound by {self.bound}"
                 + (f" ({self.dropped} repeated instruction{'s' * (self.dropped != 1)} "
                    f"dropped)" if self.dropped else "")]
        for e in ENGINES:
            lines.append(f"  {e:8s} {self.busy[e] * 100:6.1f}% busy, "
                         f"{self.instructions[e]} instructions")
        return "\n".join(lines)

    def __repr__(self):
        busy = ", ".join(f"{e}={v:.2f}" for e, v in self.busy.items())
        return f"KernelProfile(time_us={self.time_us:.3f}, busy={{{busy}}})"


def timed(run) -> KernelProfile:
    """The profile of a finished KernelRun (scheduled once: a run charged to a neuron stream
    already has its schedule)."""
    return KernelProfile(run, run.timing if run.timing is not None else schedule(run))


def profile(kernel, *args, **kwargs) -> KernelProfile:
    """Runs `kernel(*args, **kwargs)` and returns its KernelProfile (its result in
    `.run.result`). A plain function is wrapped as by @nki.jit."""
    from torch_neuron.nki.kernel import jit

    return timed(jit(kernel).run(*args, **kwargs))
