"""`python -m torch_neuron run --nproc-per-node N [--nnodes M] SCRIPT`: the ranks of a
distributed script on simulated Trainium instances, and one report of them all.

The launcher starts M torchrun agents (`python -m torch.distributed.run`) on this machine's
loopback, one per simulated instance (`--node-rank i`, static rendezvous on one free port).
Each agent starts N ranks, and each rank runs `python -m torch_neuron run --rank-report-dir DIR
SCRIPT`: the script under the profiler, its records written to DIR/rank<R>.json at the end
(torch_neuron/distributed/report.py). When the agents are done the launcher prints one report
and, with --trace, writes one trace of every rank.

Note [Launcher processes]: the agents share a process group of their own, so that Ctrl-C or
a failed agent stops all of them with one signal (torchrun turns SIGTERM into stopping its
ranks, which sit in sessions of their own). Nothing must outlive the launcher, even when it is
killed with SIGKILL (a test's timeout): each agent gets SIGTERM when the launcher dies, and each
rank SIGKILL when its agent dies (Linux's PR_SET_PDEATHSIG).

A Ctrl-C while torchrun starts its ranks is the hard case: the SIGTERM that stops the agent can
land while it is still creating them (inside subprocess.Popen), and torchrun then exits without
knowing, so without stopping, the ranks it already created; a rank that has not yet reached its
PR_SET_PDEATHSIG request (it is still importing torch) is reparented and would run on. So the
launcher is a child subreaper (PR_SET_CHILD_SUBREAPER) while it runs: such a rank becomes its
child, and before returning it kills every child of its own whose command line names this
launch's report directory (kill_leftovers).
"""

import ctypes
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from torch_neuron.distributed import report as _distributed_report

# An agent stops its ranks on SIGTERM within torchrun's own grace period; after this long the
# launcher stops waiting and kills what is left.
STOP_GRACE_S = 15.0
STDERR_TAIL_LINES = 25
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36


def _prctl():
    # Looked up once, in the parent: a child between fork and exec (start_agents' preexec_fn)
    # must not take the dynamic loader's lock, which another thread may have held at fork.
    if not hasattr(_prctl, "fn"):
        _prctl.fn = (ctypes.CDLL(None, use_errno=True).prctl
                     if sys.platform.startswith("linux") else None)
    return _prctl.fn


def die_with_parent(sig: int) -> None:
    """Asks Linux to send `sig` to this process when its parent exits (no-op elsewhere).
    "Parent" is the thread that started the process: the launcher's and torchrun's main
    threads start theirs, and live as long as their process."""
    prctl = _prctl()
    if prctl is None:
        return
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), sig)


def set_child_subreaper(on: bool) -> None:
    """Makes orphaned descendants of this process its children rather than init's (Linux; a
    no-op elsewhere). See Note [Launcher processes]."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


def children_named(marker: str) -> list[int]:
    """Live children of this process whose command line contains `marker` (zombies have an
    empty command line, so they are not listed)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):  # it ended while we looked
            continue
    return found


def kill_leftovers(marker: str, agents: list[subprocess.Popen], wait_s: float = 5.0) -> None:
    """SIGKILL, and reap, what this launch started and is still running outside the agents'
    care: ranks whose agent died while creating them (Note [Launcher processes]) and an agent
    started by a Popen that an interrupt cut short. The agents the launcher knows are
    stop_agents' business."""
    known = {a.pid for a in agents}
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        # Killing one may orphan its own children (a rank of a lost agent): look again.
        left = [pid for pid in children_named(marker) if pid not in known]
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if not _reaped(pid)]
            if left:
                time.sleep(0.05)


def _reaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # not ours any more, or already reaped
        return True


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_command(nproc: int, nnodes: int, node: int, port: int, log_dir: str, report_dir: str,
                  script: str, script_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
            f"--nnodes={nnodes}", f"--node-rank={node}", "--rdzv-backend=static",
            "--master-addr=127.0.0.1", f"--master-port={port}", "--max-restarts=0",
            f"--log-dir={log_dir}", "--tee=2",  # stderr to the console and to a file per rank
            "-m", "torch_neuron", "run", f"--rank-report-dir={report_dir}",
            os.path.abspath(script), "--", *script_args]


def agent_environment(instance: str | None, execute: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    if not execute:
        env["TORCH_NEURON_EXECUTE"] = "0"  # predict-only ranks: collectives move no data
    env["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    env["MASTER_ADDR"] = "127.0.0.1"
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[rank${rank}]:")
    if instance:
        env["TORCH_NEURON_INSTANCE"] = instance
    return env


def start_agents(agents: list[subprocess.Popen], commands: list[list[str]],
                 env: dict[str, str]) -> None:
    """Starts the agents in one new process group (Note [Launcher processes]), appending each
    to `agents` as soon as it runs (an interrupt may come before the last one starts)."""
    _prctl()  # resolved before forking
    for command in commands:
        group = agents[0].pid if agents else 0

        def child_setup(group=group):
            os.setpgid(0, group)
            die_with_parent(signal.SIGTERM)

        agents.append(subprocess.Popen(command, env=env, preexec_fn=child_setup))


def stop_agents(agents: list[subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to the agents' process group; SIGKILL to what is left after `grace_s`."""
    group = agents[0].pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(a.poll() is None for a in agents):
            time.sleep(0.05)
        if all(a.poll() is not None for a in agents):
            return


def wait_for_agents(agents: list[subprocess.Popen]) -> list[int]:
    """Exit codes of the agents; when one fails the others are stopped (their ranks would wait
    for the failed ranks until a timeout)."""
    while any(a.poll() is None for a in agents):
        if any(a.returncode not in (None, 0) for a in agents):
            stop_agents(agents)
            break
        time.sleep(0.1)
    return [a.wait() for a in agents]


def stderr_tail(log_dir: str, node: int, local_rank: int) -> str:
    """The last lines a rank wrote to stderr (torchrun's log file of it), or ""."""
    paths = glob.glob(os.path.join(log_dir, f"node{node}", "*", "attempt_*", str(local_rank),
                                   "stderr.log"))
    if not paths:
        return ""
    with open(max(paths, key=os.path.getmtime), errors="replace") as f:
        return "".join(f.readlines()[-STDERR_TAIL_LINES:])


def failed_ranks(reports: list[dict], world_size: int, agents_failed: bool) -> list[int]:
    """The failed ranks, the first to fail first (the others usually fail because it did):
    those whose script failed; else, if an agent failed, the ranks that left no report (they
    crashed, or their agent could not start them)."""
    failed = [r["rank"] for r in sorted(reports, key=lambda r: r["finished_at"]) if r["exit_code"]]
    if failed or not agents_failed:
        return failed
    reported = {r["rank"] for r in reports}
    return [rank for rank in range(world_size) if rank not in reported]


def print_failure(failed: list[int], reports: list[dict], nproc: int, log_dir: str) -> None:
    """The end of the first failed rank's stderr, and which other ranks failed."""
    first = failed[0]
    report = next((r for r in reports if r["rank"] == first), None)
    node, local_rank = divmod(first, nproc)  # how static rendezvous numbers the ranks
    tail = stderr_tail(log_dir, node, local_rank) or (report or {}).get("error") or ""
    how = f"exit code {report['exit_code']}" if report else "no report: it crashed or was killed"
    print(f"\nrank {first} (neuron:{local_rank}, node {node}) failed first ({how}); the end of "
          f"its stderr:\n{tail.rstrip() or '(empty)'}", file=sys.stderr)
    if len(failed) > 1:
        others = ", ".join(map(str, sorted(failed[1:])))
        print(f"then rank{'s' if len(failed) > 2 else ''} {others} failed too", file=sys.stderr)


def launch(nproc: int, nnodes: int, script: str, script_args: list[str],
           instance: str | None, trace: str | None, execute: bool = True) -> int:
    """Runs the ranks, prints the report; returns the exit code (nonzero if a rank failed)."""
    world_size = nproc * nnodes
    workdir = tempfile.mkdtemp(prefix="torch_neuron_run_")
    report_dir, log_dir = os.path.join(workdir, "reports"), os.path.join(workdir, "logs")
    os.makedirs(report_dir)
    agents: list[subprocess.Popen] = []
    set_child_subreaper(True)
    try:
        try:
            port = free_loopback_port()
            commands = [agent_command(nproc, nnodes, node, port,
                                      os.path.join(log_dir, f"node{node}"), report_dir, script,
                                      script_args) for node in range(nnodes)]
            start_agents(agents, commands, agent_environment(instance, execute))
            codes = wait_for_agents(agents)
        except KeyboardInterrupt:
            print("\npython -m torch_neuron run: interrupted; stopping the ranks",
                  file=sys.stderr)
            if agents:
                stop_agents(agents, grace_s=5.0)
            return 130
        finally:
            kill_leftovers(report_dir, agents)
            set_child_subreaper(False)
        reports = _distributed_report.read_rank_reports(report_dir)
        sys.stderr.flush()
        print("\n" + "=" * 30 + " torch_neuron report " + "=" * 30)
        print(_distributed_report.summary(reports, world_size))
        if trace:
            _distributed_report.write_chrome_trace(reports, trace)
            print(f"trace: {trace} (open in https://ui.perfetto.dev)")
        sys.stdout.flush()
        failed = failed_ranks(reports, world_size, any(codes))
        if failed:
            print_failure(failed, reports, nproc, log_dir)
        if not failed and not any(codes):
            return 0
        exit_codes = [r["exit_code"] for r in reports if r["rank"] in failed[:1]] + codes
        return next((c for c in exit_codes if c and c > 0), 1)  # a signal's death: 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
