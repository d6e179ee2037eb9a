"""Running the anchors: one predict-only worker process per instance (TORCH_NEURON_INSTANCE
must be set before the first device use), two at a time. A workload that raises is recorded
as that anchor's error; the others still run."""

import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

WORKER_TIMEOUT_S = 900
# An on-request anchor's worker waits for its virtual job, which scale_workloads bounds itself
# (RUN_TIMEOUT_S): the worker's own bound leaves it a minute more.
ON_REQUEST_MARGIN_S = 60


def worker(instance: str, names: list[str], eager: bool) -> dict:
    """In the worker process: each named anchor's prediction in the mode AWS measured it,
    its eager prediction too when asked, and its physical lower bound."""
    import torch
    import torch_neuron
    from torch_neuron.fidelity.anchors import ANCHORS

    torch_neuron.set_execute(False)
    out = {}
    done: dict = {}  # the same workload (function and arguments) and mode runs once

    def run(fn, *mode):
        key = repr((getattr(fn, "func", fn), getattr(fn, "args", ()), mode))
        if key not in done:
            # Each workload compiles as in a process of its own, as AWS measured each model:
            # Dynamo keeps no frames of the workloads before it (a frame it compiles again for
            # other shapes, such as Hugging Face's shared attention code, it would recompile
            # with dynamic shapes: automatic_dynamic_shapes).
            torch._dynamo.reset()
            done[key] = fn(*mode)
        return done[key]

    for anchor in [a for a in ANCHORS if a.name in names]:
        assert anchor.instance == instance, (anchor.name, instance)
        result = {}
        start = time.monotonic()
        try:
            result["predicted"] = run(anchor.predict, anchor.measured_as)
            if eager and anchor.measured_as == "compiled" and anchor.kind not in ("collective", "scale"):
                result["eager"] = run(anchor.predict, "eager")
            if anchor.bound is not None:
                result["bound"] = run(anchor.bound)
        except Exception:
            result["error"] = traceback.format_exc(limit=3)[-2000:]
        out[anchor.name] = result
        # Progress on stderr, which the parent passes through: CI logs show where time goes.
        print(f"fidelity: {anchor.name} on {instance}: {time.monotonic() - start:.1f} s wall",
              file=sys.stderr, flush=True)
    return out


def _run_worker(instance: str, names: list[str], eager: bool, timeout: float) -> dict:
    env = dict(os.environ, TORCH_NEURON_INSTANCE=instance, TORCH_NEURON_EXECUTE="0")
    request = json.dumps({"instance": instance, "names": names, "eager": eager})
    try:
        out = subprocess.run([sys.executable, "-m", "torch_neuron.fidelity", "--worker"],
                             input=request, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {n: {"error": f"the {instance} worker took over {timeout:.0f} s"} for n in names}
    progress = [line for line in out.stderr.splitlines() if line.startswith("fidelity: ")]
    if progress:
        print("\n".join(progress), file=sys.stderr, flush=True)
    if out.returncode != 0:
        error = f"the {instance} worker failed:\n{out.stderr[-3000:]}"
        return {n: {"error": error} for n in names}
    return json.loads(out.stdout.strip().splitlines()[-1])


def predict(anchors, eager: bool = False, timeout: Optional[float] = None) -> dict:
    """{anchor name: {"predicted", "bound", ["eager"], or "error"}} for the given anchors.
    `timeout`: seconds each worker may take; by default WORKER_TIMEOUT_S, and for an
    on-request anchor's worker what its virtual job may take plus ON_REQUEST_MARGIN_S."""
    from torch_neuron.fidelity.scale_workloads import RUN_TIMEOUT_S

    groups: dict[tuple, list[str]] = {}
    for a in anchors:
        groups.setdefault((not a.worker, a.instance, a.worker, a.on_request), []).append(a.name)
    jobs = [(key[1], names, timeout or (RUN_TIMEOUT_S + ON_REQUEST_MARGIN_S if key[3]
                                        else WORKER_TIMEOUT_S))
            for key, names in sorted(groups.items())]  # long ones first
    results = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for part in pool.map(lambda job: _run_worker(job[0], job[1], eager, job[2]), jobs):
            results.update(part)
    return results
