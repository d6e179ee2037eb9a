"""`python -m torch_neuron run --virtual --nnodes N --nproc-per-node M [--run-ranks LIST]
SCRIPT`: a job of N*M ranks of which only the ranks in LIST (default: rank 0) run as processes,
in predict-only mode; the others are virtual (Note [Virtual world], csrc/distributed/
VirtualWorld.h). torch.distributed in a running rank sees the whole world; its collectives
over groups with virtual ranks are timed for the whole group where torchrun would place it.

The launcher starts the running ranks itself, with the environment torchrun would give them
(RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), and hosts the rendezvous store
(TORCHELASTIC_USE_AGENT_STORE, as torchrun's agent does): a rank 0 that does not run could not
host it, and one that does would wait for all N*M ranks to connect. The processes' lifetime is
managed as in a real launch (Note [Launcher processes], launcher.py).
"""

import os
import shutil
import sys
import tempfile
from datetime import timedelta

from torch_neuron.distributed import launcher as _launcher
from torch_neuron.distributed import report as _report

# How long a running rank waits for the store and its peers (torchrun's default is 30 min;
# everything here is on one machine).
STORE_TIMEOUT = timedelta(minutes=10)


def parse_run_ranks(text: str, world_size: int) -> list[int]:
    """The running ranks of `--run-ranks` ("0", "0,128,256"): sorted, checked."""
    ranks = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= world_size:
            raise ValueError(f"--run-ranks: {item!r} is not a rank of the {world_size} ranks of "
                             f"this job (0 to {world_size - 1})")
        ranks.append(int(item))
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"--run-ranks: {text!r} names a rank twice")
    return sorted(ranks)


def rank_command(report_dir: str, script: str, script_args: list[str]) -> list[str]:
    return [sys.executable, "-m", "torch_neuron", "run", f"--rank-report-dir={report_dir}",
            os.path.abspath(script), "--", *script_args]


def rank_environment(base: dict[str, str], rank: int, nproc: int, world_size: int,
                     run_ranks: list[int], port: int) -> dict[str, str]:
    """What torchrun's agent would set for `rank`, plus the virtual world and predict-only."""
    env = dict(base)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank % nproc), "GROUP_RANK": str(rank // nproc),
        "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(nproc),
        "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world_size), "ROLE_NAME": "default",
        "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCH_NEURON_VIRTUAL_RANKS": ",".join(map(str, run_ranks)),
        "TORCH_NEURON_EXECUTE": "0",
    })
    return env


def launch_virtual(nproc: int, nnodes: int, run_ranks: list[int], script: str,
                   script_args: list[str], instance: str | None, trace: str | None) -> int:
    """Runs the running ranks, prints the report of the job; returns the exit code."""
    import torch.distributed as dist

    world_size = nproc * nnodes
    workdir = tempfile.mkdtemp(prefix="torch_neuron_virtual_")
    report_dir = os.path.join(workdir, "reports")
    os.makedirs(report_dir)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=STORE_TIMEOUT)
    base = _launcher.agent_environment(instance)
    ranks: list = []
    _launcher.set_child_subreaper(True)
    try:
        try:
            commands = [rank_command(report_dir, script, script_args) for _ in run_ranks]
            for rank, command in zip(run_ranks, commands):
                env = rank_environment(base, rank, nproc, world_size, run_ranks, store.port)
                _launcher.start_agents(ranks, [command], env)
            codes = _launcher.wait_for_agents(ranks)
        except KeyboardInterrupt:
            print("\npython -m torch_neuron run: interrupted; stopping the ranks",
                  file=sys.stderr)
            if ranks:
                _launcher.stop_agents(ranks, grace_s=5.0)
            return 130
        finally:
            _launcher.kill_leftovers(report_dir, ranks)
            _launcher.set_child_subreaper(False)
        reports = _report.read_rank_reports(report_dir)
        sys.stderr.flush()
        print("\n" + "=" * 30 + " torch_neuron report " + "=" * 30)
        print(_report.summary(reports, world_size, running=run_ranks, nodes=nnodes))
        if trace:
            _report.write_chrome_trace(reports, trace)
            print(f"trace: {trace} (open in https://ui.perfetto.dev)")
        sys.stdout.flush()
        failed = [r["rank"] for r in reports if r["exit_code"]]
        missing = [rank for rank in run_ranks if rank not in {r["rank"] for r in reports}]
        if failed or missing:
            print(f"\nrank {(failed or missing)[0]} failed (its stderr is above)", file=sys.stderr)
            return next((c for c in codes if c and c > 0), 1)
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
