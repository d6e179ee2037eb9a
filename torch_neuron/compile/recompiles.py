"""What torch.compile's compilations do to the simulated program.

- Counting: how many graphs torch.compile compiled, and how many of those were recompilations
  (a function compiled again because a guard failed: a new shape without dynamic shapes,
  another dtype, ...); the profiler's report shows both (torch_neuron/profiler.py).
- Pausing the simulated clocks while Dynamo and Inductor compile: compiling is host work, but
  Inductor makes a few tensors of its own on the graph's device (its attention pattern
  matcher's examples); they are no part of the program, and TorchNeuron's compiler launches
  nothing on the device. The ops still run; they are not charged (trnsim::pause_clocks).

Both hang on Dynamo's compile callbacks, which torch._dynamo.reset() clears: track() puts them
back at every compilation for neuron.
"""

import re

_counts = {"graphs": 0, "recompiles": 0}
_paused = [False]


def counts() -> dict:
    return dict(_counts)


def _on_compile_start(args) -> None:
    from torch_neuron import _C

    if not _paused[0]:
        _C._pause_clocks()
        _paused[0] = True


def _on_compile_end(args) -> None:
    from torch._dynamo.callback import CallbackTrigger

    from torch_neuron import _C

    if _paused[0]:  # not when tracking began during this compilation
        _paused[0] = False
        _C._resume_clocks()
    if args.callback_trigger != CallbackTrigger.DYNAMO:
        return  # a lazily compiled backward belongs to its forward's compilation
    _counts["graphs"] += 1
    # Dynamo's compile ids are "<frame>/<compilation of that frame>", e.g. "0/1".
    attempt = re.match(r"\d+", str(args.compile_id).split("/")[-1])
    if attempt and int(attempt.group()) > 0:
        _counts["recompiles"] += 1


def track(compiling: bool = False) -> None:
    """Counts and pauses from now on. `compiling`: called from inside a compilation (whose
    start callback has passed): the clocks pause now and resume when it ends."""
    import torch._dynamo

    handler = torch._dynamo.callback_handler
    if _on_compile_end not in handler.end_callbacks:
        handler.register_start_callback(_on_compile_start)
        handler.register_end_callback(_on_compile_end)
    if compiling:
        _on_compile_start(None)
