"""What an anchor is, and the goals the suite holds the predictions to (issue 25, item 7)."""

import dataclasses
from typing import Callable, Optional

# Whether an anchor counts towards its kind's goals. Anything but COUNTS is printed with its
# prediction and the reason, which never depends on the prediction (Note [Fidelity anchors]).
COUNTS = "counts"
EXCLUDED = "excluded"   # measured on something the model does not describe
LOOSE = "loose"         # the source leaves out what the prediction needs (e.g. the instance)
SANITY = "sanity"       # met by construction: cannot discriminate between models

KINDS = ("op", "end-to-end", "collective", "scale")

# Goals per kind: the largest median |predicted / measured - 1| and the band every counting
# anchor's ratio must fall in. Collectives have no goal of their own yet: every published
# nccom-test row leaves out its instance type, so all of them are loose.
_END_TO_END = {"median_abs_error": 0.15, "band": (0.67, 1.5)}
GOALS = {
    "op": {"median_abs_error": 0.10, "band": (0.8, 1.25)},
    "end-to-end": _END_TO_END,
    # Whole jobs predicted through the virtual world (docs/scale.md): the end-to-end goals.
    "scale": _END_TO_END,
}


@dataclasses.dataclass
class Anchor:
    """One published measurement of real Trainium and the workload that produced it.

    `predict(mode)` runs the workload on device "neuron" (predict-only) and returns its
    simulated time in ms, or a utilization in %; mode is "compiled" or "eager". `bound` returns
    the physical lower bound in ms (the documented peak FLOPs or bandwidth of what it must do),
    which no prediction may beat; None where no bound applies (a utilization)."""

    name: str
    kind: str                # one of KINDS
    instance: str            # the instance it was measured on (or assumed on, for a loose row)
    workload: str
    measured: float
    unit: str                # "ms" or "%"
    source: str              # document, commit, table row
    predict: Callable[[str], float]
    bound: Optional[Callable[[], float]] = None
    measured_as: str = "compiled"   # "compiled" or "eager": how AWS ran it, how it runs here
    status: str = COUNTS
    reason: str = ""         # why it does not count (status != COUNTS)
    note: str = ""
    # A long workload (a full training step compiled) runs in a worker of its own, named here,
    # so that the two workers at a time share the suite's time evenly; anchors with the same
    # workload share the worker, which runs it once.
    worker: str = ""
    # Note [On-request anchors]: True for a workload of minutes (a virtual Llama job), which
    # runs only when asked for (--kind scale, --anchor NAME, --all), so that the suite as CI
    # runs it stays bounded; its row still belongs to the documented table.
    on_request: bool = False

    def __post_init__(self):
        assert self.kind in KINDS, self.kind
        assert self.measured_as in ("compiled", "eager"), self.measured_as
        assert (self.status == COUNTS) == (not self.reason), (self.name, self.status)
