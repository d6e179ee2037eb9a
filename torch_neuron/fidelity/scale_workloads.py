"""The scale anchors' workloads: the Llama examples run as a virtual world
(`python -m torch_neuron run --virtual`, docs/scale.md), their printed step time, time to first
token and time per output token parsed from what they print. Nothing here knows the published
numbers: a run is the examples' own command line, as a user would type it."""

import functools
import os
import re
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# A hang guard, not an estimate: the longest run, the 70B training step (8 running ranks,
# 256 micro-batches), took 16 min alone on the 2-core machine; --all runs two at once.
RUN_TIMEOUT_S = 3600

# What the examples print (examples/llama_pretrain.py, examples/llama_generate.py).
STEP = re.compile(r"^throughput: ([0-9.]+) sequences/s, .*\(step ([0-9.]+) ms, mean of", re.M)
LATENCY = re.compile(r"^time to first token: ([0-9.]+) ms; per output token: ([0-9.]+) ms", re.M)
HOST = re.compile(r"^\(host: .*\)$", re.M)  # the running rank's wall time and peak RSS


def command(script: str, nnodes: int, nproc: int, instance: str, run_ranks: str,
            args: tuple) -> list[str]:
    return [sys.executable, "-m", "torch_neuron", "run", "--virtual", "--nnodes", str(nnodes),
            "--nproc-per-node", str(nproc), "--instance", instance, "--run-ranks", run_ranks,
            os.path.join("examples", script), *args]


@functools.lru_cache(maxsize=None)
def virtual_run(script: str, nnodes: int, nproc: int, instance: str, run_ranks: str,
                args: tuple, env: tuple = ()) -> tuple[str, float]:
    """The run's stdout and its wall time in s, with the settings `env` ((name, value) pairs)
    set for it. Cached: the anchors of one run (time to first token and per output token)
    share it."""
    # The worker's environment (its instance, predict-only) is the run's too: --instance
    # names the same instance, and a virtual world runs predict-only anyway.
    start = time.monotonic()
    argv = command(script, nnodes, nproc, instance, run_ranks, args)
    settings = "".join(f"{name}={value} " for name, value in env)  # as a shell prefix
    out = subprocess.run(argv, cwd=REPO, env=dict(os.environ, **dict(env)), capture_output=True,
                         text=True, timeout=RUN_TIMEOUT_S)
    if out.returncode != 0:
        raise RuntimeError(f"{settings}{' '.join(argv)} exited with {out.returncode}:\n"
                           f"{out.stderr[-2000:]}")
    wall = time.monotonic() - start
    # On stderr with the runner's prefix, which passes it through: CI logs show each run's
    # cost (the launcher's wall time; the printing rank's own wall time and peak RSS).
    host = HOST.search(out.stdout)
    print(f"fidelity: {settings}{script} {' '.join(args)}: "
          f"{wall:.1f} s wall"
          f"{', rank ' + host.group(0) if host else ''}", file=sys.stderr, flush=True)
    return out.stdout, wall


def run_settings(run: tuple) -> dict:
    """The settings a run (virtual_run's arguments) sets: {} when it sets none."""
    return dict(run[6]) if len(run) > 6 else {}


def _parsed(pattern, what: str, run: tuple) -> tuple:
    stdout, _ = virtual_run(*run)
    match = pattern.search(stdout)
    if not match:
        raise RuntimeError(f"the run printed no {what} line:\n{stdout[-2000:]}")
    return tuple(float(g) for g in match.groups())


def step_ms(run: tuple, mode: str) -> float:
    """The mean training step, ms, as llama_pretrain.py prints it."""
    del mode  # how the example runs is in its arguments (--compile)
    return _parsed(STEP, "throughput", run)[1]


def first_token_ms(run: tuple, mode: str) -> float:
    del mode
    return _parsed(LATENCY, "time to first token", run)[0]


def per_token_ms(run: tuple, mode: str) -> float:
    del mode
    return _parsed(LATENCY, "time to first token", run)[1]
