"""Shared helpers of the Python tests: a clean subprocess runner, and restoring the process-wide
neuron state (current device, current streams, fallback mode) after every test so that tests
do not depend on their order."""

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

# The time limit per test (test/pytest_time_limit.py), shared with test/fidelity.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytest_plugins = ("pytest_time_limit",)

# Inductor checks each vector ISA the CPU reports by building and loading a probe library in
# a child process, in every process that compiles: about 2 s per process with a warm cache and
# 10 s in an empty cache folder (measured on a 2-core machine). The tests start many such
# processes and none of them tests that check, so they skip it (Inductor's own switch, read
# from the environment by the processes they start too); users' processes still run it.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")

# Inductor writes its cache folder into the environment of the process that compiles first;
# a subprocess chooses its own unless a test sets it.
INHERITED_ONLY_IF_SET = ("TORCHINDUCTOR_CACHE_DIR",)
# Set by torchrun for the ranks it starts; the launcher tests set them themselves.
LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT")


def _neuron_env_vars():
    import torch_neuron

    return tuple(name for name, *_ in torch_neuron._C._setting_specs()
                 if name not in INHERITED_ONLY_IF_SET + LAUNCHER_VARS)


# Every setting that selects the simulated machine or changes the backend's behaviour, from the
# settings table (Note [Settings table]). Subprocesses start without them unless a test sets
# them, so they see the default trn2.3xlarge.
NEURON_ENV_VARS = _neuron_env_vars()


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter; returns the CompletedProcess (text output)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in NEURON_ENV_VARS and k not in INHERITED_ONLY_IF_SET}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_python_json(code, env=None):
    """Runs `code`, which must print one JSON document as its last line, and returns it."""
    result = run_python(code, env)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def on_shallow_stack(fn, *args, **kwargs):
    """fn(*args, **kwargs) on a thread of its own, returning its result or raising its exception. OpInfo's
    sample iterators look for the calling test with inspect.stack(), which reads every frame's
    source; under pytest's deep stack that made OpInfo sweeps two to ten times slower."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def simulated_elapsed_ns(fn, warmup=False):
    """Simulated device time that `fn` adds to the current neuron device's clock; with
    `warmup`, of its second call (the first warms up, unmeasured)."""
    import torch

    if warmup:
        fn()
    torch.neuron.synchronize()
    start = torch.neuron.simulated_time_ns()
    fn()
    torch.neuron.synchronize()
    return torch.neuron.simulated_time_ns() - start


@pytest.fixture(autouse=True)
def _restore_neuron_state():
    yield
    import torch
    import torch_neuron

    torch_neuron.set_fallback_error(False)
    torch_neuron.set_execute(True)
    if torch.neuron.is_available():
        for i in range(torch.neuron.device_count()):
            torch.neuron.set_stream(torch.neuron.default_stream(i))
        torch.neuron.set_device(0)


DISTRIBUTED_DIR = os.path.join(os.path.dirname(__file__), "distributed", "workers")


_PORTS_GIVEN = set()
_PORT_LOCK = threading.Lock()
PORT_BLOCK = 1500  # ports a pytest-xdist worker draws from


def free_loopback_port():
    """A loopback port for a launch's store that no other launch of this test session gets.
    bind(("127.0.0.1", 0)) alone can hand two launches started at once (threads of one test,
    or two xdist workers) the same port, since each probe closes its socket before the store
    binds it, and ranks of one world could then meet the other's store. So ports come from
    below Linux's ephemeral range (32768-60999, where bind(0) and outgoing connections draw),
    from a block of their own for each xdist worker, never twice in one process, and free when
    probed."""
    import random
    import socket

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    low = 20000 + (int(worker) % 8 if worker.isdigit() else 0) * PORT_BLOCK
    with _PORT_LOCK:
        for _ in range(PORT_BLOCK):
            port = random.randrange(low, low + PORT_BLOCK)
            if port in _PORTS_GIVEN:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError(f"no free loopback port in {low}-{low + PORT_BLOCK - 1}")


def loopback_env(env=None):
    """The environment of a multi-process test: this machine's loopback only, one thread per
    rank, none of the neuron variables unless the test sets them."""
    full_env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    full_env.update({"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo",
                     "OMP_NUM_THREADS": "1"})
    full_env.update(env or {})
    return full_env


def run_process_group(command, env=None, timeout=240, cwd=None):
    """Runs `command` (a launcher and its ranks) in a session of its own; on timeout the whole
    session is killed, so no rank outlives the test. Returns the CompletedProcess."""
    import signal

    proc = subprocess.Popen(command, env=loopback_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM first: torchrun starts its ranks in sessions of their own and stops them
        # itself when it is terminated; SIGKILL only if it does not exit in time.
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        raise AssertionError(f"timed out after {timeout} s\nstdout:\n{stdout}\nstderr:\n{stderr}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of a failed run
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def run_torchrun(script, nproc, args=(), env=None, timeout=240, nnodes=1, extra_args=()):
    """Launches `script` (a file in test/python/distributed/workers unless a path) with torchrun on
    loopback; nnodes > 1 starts one torchrun agent per simulated instance; `extra_args` go to
    torchrun itself (e.g. --max-restarts)."""
    path = script if os.path.isabs(script) else os.path.join(DISTRIBUTED_DIR, script)
    port = free_loopback_port()
    agents = []
    for node in range(nnodes):
        agents.append(
            [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
             f"--nnodes={nnodes}", f"--node-rank={node}", "--master-addr=127.0.0.1",
             f"--master-port={port}", *extra_args, path, *args])
    if nnodes == 1:
        return run_process_group(agents[0], env, timeout)
    # Several agents: one shell session runs them all, so a timeout kills every rank.
    import shlex

    starts = "".join(f"{shlex.join(agent)} & p{i}=$!; " for i, agent in enumerate(agents))
    waits = "".join(f"wait $p{i} || s=1; " for i in range(nnodes))
    return run_process_group(["bash", "-c", f"{starts}s=0; {waits}exit $s"], env, timeout)


def assert_ok(result):
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def run_ranks(script, world, args=(), env=None, timeout=120, ranks=None):
    """Starts ranks of `script` as independent processes (no torchrun agent, so that one
    rank's death does not stop the others); `ranks` picks which of the `world` ranks to start.
    Returns one CompletedProcess per started rank; on timeout every rank is killed."""
    import signal

    path = os.path.join(DISTRIBUTED_DIR, script)
    port = free_loopback_port()
    started = list(range(world) if ranks is None else ranks)
    procs = []
    for rank in started:
        rank_env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
                    "LOCAL_WORLD_SIZE": str(world), "MASTER_PORT": str(port)}
        rank_env.update(env or {})
        procs.append(subprocess.Popen([sys.executable, path, *args], env=loopback_env(rank_env),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))

    def kill_all():
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    results = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=timeout)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    except subprocess.TimeoutExpired:
        # Every rank's last words, so that a hang says which rank waited on what.
        kill_all()
        tails = []
        for rank, proc in zip(started, procs):
            stdout, stderr = proc.communicate()
            tails.append(f"rank {rank} (exit {proc.returncode}):\n{(stdout or '')[-1500:]}"
                         f"\n{(stderr or '')[-1500:]}")
        raise AssertionError(f"ranks of {script} still running after {timeout} s\n"
                             + "\n".join(tails)) from None
    finally:
        kill_all()
    return results


def rank_rows(report):
    """{rank: [device, node, span, compute, comm, exposed, MFU, peak HBM, ...]} of the per-rank
    table of a `python -m torch_neuron run --nproc-per-node N` report."""
    rows = {}
    for line in report.split("\n\n")[1].splitlines()[1:]:
        fields = line.split()
        rows[int(fields[0])] = fields[1:]
    return rows


# What recording one event adds to its stream's clock: 100 cycles at 1.4 GHz, the documented
# assumption of Note [Event records] (trnsim's queue.cpp). The time between two events includes
# the end event's own record.
EVENT_RECORD_NS = 100 / 1.4


def catch_up(stream):
    """Makes `stream` wait for every stream of its device (the default one and the pool of 32),
    so that its clock is the device's clock: later allocations and the device's shared engines
    (Note [Shared engines] in trnsim/queue.h) cannot make it wait on earlier tests' work, and
    simulated_time_ns() moves exactly with what is launched on it."""
    import torch

    device = stream.device_index
    others = [torch.neuron.default_stream(device)]
    others += [torch.neuron.Stream(device=device) for _ in range(32)]
    for other in others:
        if other != stream:
            stream.wait_stream(other)
    mine = torch.neuron.Event(enable_timing=True)
    mine.record(stream)
    for other in others:
        if other == stream:
            continue  # (a record there now would come after `mine`)
        theirs = torch.neuron.Event(enable_timing=True)
        theirs.record(other)
        assert theirs.elapsed_time(mine) >= 0
