"""The programs of a kernel launched with `kernel[n]` (LNC=n), run so they can wait for each
other: `nisa.core_barrier` and `nisa.sendrecv`.

Note [Programs that wait for each other]
Each program is a thread, but only one runs at a time: program 0 runs until it finishes or
reaches a point where it waits for another program (a core_barrier or a sendrecv whose partner
has not arrived yet), then the lowest-numbered program that can go on runs, and so on. So a run
is deterministic, and a kernel that never waits runs its programs one after the other, as
before. When the last participant of a barrier or exchange arrives, the exchange happens (a
sendrecv's destinations get their partners' sources) and the programs go on from the lowest
number. The records follow that order: what a program did before a barrier precedes, in the
record list, what any participant does after it, so the schedule's dependencies by region (a
read after the other core's write to shared HBM) order them as the hardware's semaphores do.
A program that waits for one that has already ended, or programs that all wait, are an error
naming the instruction, not a hang.
"""

from __future__ import annotations

import sys
import threading

from torch_neuron.nki.errors import NkiValidationError


class _Abort(BaseException):
    """Unwinds a waiting program after another program failed."""


# The per-program attributes of a KernelRun (KernelRun.start_program).
_PROGRAM_STATE = ("program_id", "_shared_seen", "constants", "allocators", "scopes",
                  "control_sources")


class Cores:
    def __init__(self, run, programs: int):
        self.run, self.programs = run, programs
        self.lock = threading.Condition()
        self.turn = 0                       # the program allowed to run
        self.finished: set[int] = set()
        self.waiting: dict[int, tuple] = {}  # program -> the key it waits at
        self.arrived: dict[tuple, dict] = {}  # key -> {program: payload}
        self.states: dict[int, dict] = {}
        self.error: BaseException | None = None
        self.arrivals: dict[tuple, int] = {}  # (program, kind) -> how many it reached

    # -- running ---------------------------------------------------------------------------------
    def run_all(self, body) -> list:
        """body(program) in each program's thread; returns their results by program."""
        results = [None] * self.programs
        threads = [threading.Thread(target=self._thread, args=(p, body, results), daemon=True,
                                    name=f"nki-program-{p}") for p in range(self.programs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        return results

    def _thread(self, program: int, body, results) -> None:
        try:
            with self.lock:
                self.lock.wait_for(lambda: self.turn == program or self.error is not None)
                if self.error is not None:
                    return
                if program:
                    self.run.start_program(program)
                # Scopes look no further up than this frame (Note [Tile lifetimes]).
                self.run.scopes.stop_frame = sys._getframe()
            results[program] = body(program)
            self.run.end_program()
        except _Abort:
            return
        except BaseException as e:   # noqa: BLE001 (re-raised by run_all)
            with self.lock:
                if self.error is None:
                    self.error = e
                self.lock.notify_all()
            return
        with self.lock:
            self.finished.add(program)
            self._pass_turn(program)

    def _save(self, program: int) -> None:
        self.states[program] = {a: getattr(self.run, a) for a in _PROGRAM_STATE}

    def _restore(self, program: int) -> None:
        for name, value in self.states.pop(program).items():
            setattr(self.run, name, value)

    def _pass_turn(self, program: int) -> None:
        """The running `program` stops (finished or waiting): the lowest-numbered program that
        can go on runs next. Called with the lock held."""
        if program not in self.finished:
            self._save(program)
        for q in range(self.programs):
            if q in self.finished or q == program and program in self.waiting:
                continue
            if q in self.waiting:
                continue
            if q in self.states:
                self._restore(q)
            self.turn = q
            self.lock.notify_all()
            return
        if self.waiting:   # every program left waits: nobody can arrive
            self.error = self._deadlock()
        self.turn = -1
        self.lock.notify_all()

    def _deadlock(self) -> NkiValidationError:
        lines = []
        for p, (kind, n, source) in sorted(self.waiting.items()):
            lines.append(f"program {p} waits at its {_ordinal(n)} {kind} ({source})")
        ended = sorted(self.finished)
        return NkiValidationError(
            "the kernel's programs wait for each other forever: " + "; ".join(lines)
            + (f"; program(s) {ended} ended without reaching it" if ended else "")
            + ": every program of the launch must reach each core_barrier and sendrecv")

    # -- waiting ---------------------------------------------------------------------------------
    def meet(self, kind: str, participants: tuple, payload, source: str, complete) -> None:
        """The running program arrives at its next `kind` with `participants` (program ids);
        returns once all have arrived, after the last arrival called complete({program:
        payload})."""
        program = self.run.program_id
        n = self.arrivals.get((program, kind), 0) + 1
        self.arrivals[(program, kind)] = n
        key = (kind, n, participants)
        with self.lock:
            if self.error is not None:
                raise _Abort()
            group = self.arrived.setdefault(key, {})
            group[program] = payload
            if len(group) < len(participants):
                self.waiting[program] = (kind, n, source)
                self._pass_turn(program)
                self.lock.wait_for(lambda: self.turn == program or self.error is not None)
                if self.error is not None:
                    raise _Abort()
                return
            # The last arrival: the exchange happens, then the lowest-numbered program goes on.
            del self.arrived[key]
            for p in participants:
                self.waiting.pop(p, None)
            complete(group)
            first = min(participants)
            if first != program:
                self._save(program)
                self._restore(first)
                self.turn = first
                self.lock.notify_all()
                self.lock.wait_for(lambda: self.turn == program or self.error is not None)
                if self.error is not None:
                    raise _Abort()


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
