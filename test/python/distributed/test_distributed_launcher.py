"""`python -m torch_neuron run --nproc-per-node N [--nnodes M]`: the ranks of a distributed
script under torchrun on loopback, one report of every rank (time per rank, compute,
communication and exposed communication, the collectives, fallbacks, peak HBM) and one trace
with a process per rank; a failing rank's exit code and error; Ctrl-C stops every process.
The report's arithmetic is also checked on synthetic rank reports, without processes."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torch_neuron
from conftest import loopback_env, rank_rows, run_process_group
from torch_neuron.distributed import report as _distributed_report
from torch_neuron.__main__ import run as run_command

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the repository
FSDP_EXAMPLE = os.path.join(REPO, "examples", "train_fsdp.py")
REPORT = "torch_neuron report"
COLLECTIVE_STREAM = torch_neuron._C._first_collective_stream()
TIMEOUT = 120  # per launcher run; each takes 10-25 s on a 2-core machine


def launch(*args, timeout=TIMEOUT):
    return run_process_group([sys.executable, "-m", "torch_neuron", "run", *args],
                             timeout=timeout)


def output(result):
    return f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def report_of(result):
    assert REPORT in result.stdout, output(result)
    return result.stdout[result.stdout.index(REPORT):]


def collective_lines(report):
    section = report.split("Collectives (")[1].split("\n\n")[0]
    return section.splitlines()[2:]


def script(tmp_path, code):
    path = tmp_path / "rank_script.py"
    path.write_text(textwrap.dedent(code))
    return str(path)


# The FSDP2 example on two ranks -------------------------------------------------------------


def test_fsdp_example_report_and_trace(tmp_path):
    trace = tmp_path / "trace.json"
    result = launch("--nproc-per-node", "2", FSDP_EXAMPLE, "--steps", "3", "--trace", str(trace))
    assert result.returncode == 0, output(result)
    assert "step   0  loss" in result.stdout and "step   2  loss" in result.stdout
    assert result.stdout.count("step   0  loss") == 1  # rank 0 prints
    report = report_of(result)
    assert "trn2.3xlarge" in report and "2 ranks on 1 instance" in report

    rows = rank_rows(report)
    assert sorted(rows) == [0, 1], report
    for rank, fields in rows.items():
        assert fields[:2] == [f"neuron:{rank}", "0"]
        span, compute, comm, exposed = map(float, fields[2:6])
        assert 0 < compute <= span and 0 < comm and 0 <= exposed <= comm, fields
        assert float(fields[7]) > 0  # peak HBM
    # The ranks' clocks agree: their spans end together within a few ops.
    assert abs(float(rows[0][2]) - float(rows[1][2])) < 0.05 * float(rows[0][2])

    lines = collective_lines(report)
    names = {line.split()[0] for line in lines}
    assert {"c10d::all_gather", "c10d::reduce_scatter"} <= names, report
    for line in lines:
        fields = line.split()
        assert fields[3] == "2", line  # group of 2 ranks
        assert float(fields[4]) > 0 and float(fields[5]) > 0, line  # calls/rank, time
        assert " / " in line  # algorithm / link
    assert "CPU fallback ops (summed over ranks): none" in report
    assert f"trace: {trace}" in report

    data = json.loads(trace.read_text())
    events = data["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {0: "rank 0 (neuron:0, node 0)", 1: "rank 1 (neuron:1, node 0)"}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e["name"] == "thread_name"}
    ends = {}
    for pid in (0, 1):
        assert tracks[(pid, 0)] == "stream 0"
        assert tracks[(pid, COLLECTIVE_STREAM)].startswith("collectives (group ")
        spans = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) ==
                 (pid, COLLECTIVE_STREAM)]
        assert {"c10d::all_gather", "c10d::reduce_scatter"} <= {e["name"] for e in spans}
        assert all(e["args"]["bytes"] > 0 and "busbw_gbps" in e["args"] for e in spans)
        ends[pid] = [e["ts"] + e["dur"] for e in spans]
    # One timeline: every collective ends at the same simulated time on both ranks.
    assert ends[0] == pytest.approx(ends[1])


# Several simulated instances ----------------------------------------------------------------


def test_two_instances(tmp_path):
    path = script(tmp_path, """
        import os, torch, torch.distributed as dist
        torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend="neuron")
        x = torch.ones(1 << 16, device="neuron")
        dist.all_reduce(x)
        assert x[0].item() == dist.get_world_size()
        dist.destroy_process_group()
    """)
    result = launch("--nproc-per-node", "1", "--nnodes", "2", path, "--instance", "trn2.48xlarge")
    assert result.returncode == 0, output(result)
    report = report_of(result)
    assert "trn2.48xlarge" in report and "2 ranks on 2 instances" in report
    rows = rank_rows(report)
    assert [rows[0][:2], rows[1][:2]] == [["neuron:0", "0"], ["neuron:0", "1"]], report
    (line,) = [line for line in collective_lines(report) if line.startswith("c10d::all_reduce")]
    assert "256.0 KiB" in line and line.endswith(" / EFA"), report  # between instances


# Failures and Ctrl-C ------------------------------------------------------------------------


def test_failing_rank_gives_its_error_and_exit_code(tmp_path):
    path = script(tmp_path, """
        import os, torch
        x = torch.ones(64, 64, device=f"neuron:{os.environ['LOCAL_RANK']}")
        (x @ x).sum().item()
        if os.environ["RANK"] == "1":
            raise ValueError("boom from rank 1")
    """)
    result = launch("--nproc-per-node", "2", path)
    assert result.returncode == 1, output(result)
    assert "rank 1 (neuron:1, node 0) failed first (exit code 1)" in result.stderr, output(result)
    tail = result.stderr.split("failed first")[1]
    assert "ValueError: boom from rank 1" in tail and "rank_script.py" in tail
    # The report of what the ranks did still comes.
    rows = rank_rows(report_of(result))
    assert sorted(rows) == [0, 1]
    assert rows[1][-3:] == ["exit", "code", "1"] and "exit" not in rows[0]


# Ctrl-C: every rank stops and the launcher exits 130, whenever it comes. The tests wait on
# conditions (files, processes), never on fixed sleeps, so a loaded machine only makes them
# slower; each process they start is found by its command line (the script's unique path) and
# killed at the end, even a rank that lost its agent.


def rank_processes(path):
    """Live processes running `path` as a rank (`torch_neuron run --rank-report-dir ...`), not
    the launcher or the torchrun agents, which name it too. Zombies have an empty command
    line."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if (path.encode() in args and b"torch.distributed.run" not in args
                and any(a.startswith(b"--rank-report-dir") for a in args)):
            found.append(int(entry))
    return found


def wait_until(condition, timeout, what, poll_s=0.05):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(poll_s)


def sigint_as_from_a_terminal():
    """In the launcher's child before exec: SIGINT at its default disposition and not blocked,
    as a command typed in a terminal gets it, whatever the test process inherited (an ignored
    or blocked signal stays so across exec, and Python then never sees Ctrl-C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def interrupt(tmp_path, path, nproc, ready, poll_s=0.05):
    """Starts the launcher, sends it Ctrl-C once ready() holds (polled every `poll_s`), and
    checks that it exits 130 saying so and that no rank outlives it."""
    log = open(tmp_path / "launcher.log", "w")  # a file: a surviving rank must not hold a pipe
    launcher = subprocess.Popen([sys.executable, "-m", "torch_neuron", "run",
                                 "--nproc-per-node", str(nproc), path], env=loopback_env(),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=sigint_as_from_a_terminal)
    try:
        def started():
            assert launcher.poll() is None, (tmp_path / "launcher.log").read_text()
            return ready()

        wait_until(started, TIMEOUT, "the ranks did not start", poll_s)
        os.killpg(launcher.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        launcher.wait(timeout=45)  # it stops its agents within 5 s, then SIGKILLs them
        out = (tmp_path / "launcher.log").read_text()
        assert launcher.returncode == 130, out
        assert "interrupted; stopping the ranks" in out, out
        wait_until(lambda: not rank_processes(path), 30, "a rank outlived the launcher")
    finally:
        for pid in [launcher.pid] + rank_processes(path):
            try:
                os.killpg(pid, signal.SIGKILL)  # the ranks sit in sessions of their own
            except (ProcessLookupError, PermissionError):
                pass
        launcher.wait(timeout=30)
        log.close()


def test_ctrl_c_stops_every_rank(tmp_path):
    # Each rank says it is ready after its first device op, when it runs the script: its
    # parent-death signal is set and torchrun has registered it.
    path = script(tmp_path, f"""
        import os, time, torch
        torch.ones(4, device="neuron")
        ready = os.path.join({str(tmp_path)!r}, f"ready{{os.environ['RANK']}}")
        open(ready + ".tmp", "w").close()
        os.rename(ready + ".tmp", ready)  # appears whole
        time.sleep(600)
    """)
    interrupt(tmp_path, path, 2,
              ready=lambda: all((tmp_path / f"ready{r}").exists() for r in range(2)))


def test_ctrl_c_while_torchrun_starts_the_ranks_stops_every_rank(tmp_path):
    # Ctrl-C as soon as the first rank process exists: the agent's SIGTERM often lands while
    # torchrun is still creating ranks, and torchrun then exits without stopping those it had
    # created (Note [Launcher processes]). Four ranks, and a close watch, to hit that moment;
    # two launches, since it is a race.
    path = script(tmp_path, "import time; time.sleep(600)")
    for attempt in range(2):
        interrupt(tmp_path, path, 4, ready=lambda: bool(rank_processes(path)), poll_s=0.002)


# Arguments ----------------------------------------------------------------------------------


@pytest.fixture
def noop_script(tmp_path):
    path = tmp_path / "noop.py"
    path.write_text("")
    return str(path)


def test_bad_rank_counts_are_refused(noop_script, capsys):
    with pytest.raises(SystemExit, match="--nproc-per-node needs a positive integer"):
        run_command(["--nproc-per-node=0", noop_script])
    with pytest.raises(SystemExit, match="--nnodes needs a positive integer, not 'two'"):
        run_command(["--nproc-per-node", "1", "--nnodes", "two", noop_script])
    too_many = torch.neuron.device_count() + 1
    assert run_command(["--nproc-per-node", str(too_many), noop_script]) == 1
    err = capsys.readouterr().err
    assert f"--nproc-per-node {too_many} needs {too_many} NeuronCores" in err
    assert "--instance" in err
    assert run_command(["--nproc-per-node", "2", noop_script, "--plot", "x.png"]) == 2
    assert "--plot" in capsys.readouterr().err


def test_help_prints_the_usage_and_exits_0(tmp_path):
    echo = tmp_path / "echo.py"
    echo.write_text("import sys; print(sys.argv[1:])")
    commands = {"run --help": ["run", "--help"], "run -h": ["run", "-h"], "--help": ["--help"],
                # After the script, --help is the script's own argument (as with torchrun).
                "script's": ["run", str(echo), "--help"]}
    # All at once: the interpreters' imports dominate.
    procs = {name: subprocess.Popen([sys.executable, "-m", "torch_neuron", *args],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=loopback_env())
             for name, args in commands.items()}
    results = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
            results[name] = subprocess.CompletedProcess(commands[name], proc.returncode, stdout,
                                                        stderr)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    for name in ("run --help", "run -h"):
        result = results[name]
        assert result.returncode == 0 and result.stderr == "", output(result)
        assert result.stdout.startswith("usage: python -m torch_neuron run "), output(result)
        for option in ("--nproc-per-node", "--nnodes", "--instance", "--trace", "--no-execute"):
            assert option in result.stdout
    result = results["--help"]  # the commands
    assert result.returncode == 0, output(result)
    for command in ("run", "info", "env", "fidelity", "cmake-prefix-path"):
        assert command in result.stdout
    result = results["script's"]
    assert result.returncode == 0 and result.stdout.startswith("['--help']"), output(result)


def test_an_unknown_option_before_the_script_is_named(noop_script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_command(["--nproc-per-nod", "2", noop_script])
    assert exit_info.value.code == 2
    assert "unknown option --nproc-per-nod" in capsys.readouterr().err


# The report, on synthetic rank reports ------------------------------------------------------


def record(start, duration, name="aten::mm", queue=0, device=0, nbytes=0, detail=""):
    return {"name": name, "device": device, "queue": queue, "start_ns": float(start),
            "duration_ns": float(duration), "engine_ns": {}, "flops": 0.0, "bytes": nbytes,
            "detail": detail}


def all_gather(start, duration, device, nbytes=1 << 20, busbw=50.0):
    detail = json.dumps({"collective": "all_gather", "bytes": nbytes, "ranks": 2,
                         "group": "0", "algorithm": "ring", "link": "on-chip",
                         "busbw_gbps": busbw})
    return record(start, duration, "c10d::all_gather", COLLECTIVE_STREAM, device, nbytes, detail)


def rank_report(rank, records, fallback_ops=None, peak=1 << 20):
    return {"rank": rank, "local_rank": rank, "node": 0, "world_size": 3, "device": rank,
            "instance": torch_neuron._C._instance_info(), "exit_code": 0, "error": None,
            "finished_at": 0.0, "records": records, "fallback_ops": fallback_ops or {},
            "peak_hbm": {str(rank): peak}}


def test_summary_of_synthetic_ranks(tmp_path):
    reports = [
        rank_report(0, [record(0, 1000), all_gather(500, 1000, 0), all_gather(2000, 500, 0, 4096)],
                    {"aten::linalg_inv_ex": 2}, peak=3 << 20),
        rank_report(1, [record(0, 400, device=1), all_gather(500, 1000, 1),
                        all_gather(2000, 500, 1, 4096, busbw=70.0)], {"aten::linalg_inv_ex": 1}),
    ]
    for report in reports:  # through the files, as the launcher reads them
        _distributed_report.write_rank_report(str(tmp_path), report)
    reports = _distributed_report.read_rank_reports(str(tmp_path))
    assert [r["rank"] for r in reports] == [0, 1]
    text = _distributed_report.summary(reports, world_size=3)
    assert "3 ranks on 1 instance, predicted time 2.5 us" in text
    rows = rank_rows(text)
    # rank 0: compute [0,1000), comm [500,1500)+[2000,2500): exposed 500 + 500 ns
    assert rows[0][:8] == ["neuron:0", "0", "2.5", "1.0", "1.5", "1.0", "0.0%", "3.0"]
    # rank 1: compute [0,400): exposed 1000 + 500 ns
    assert rows[1][:8] == ["neuron:1", "0", "2.5", "0.4", "1.5", "1.5", "0.0%", "1.0"]
    assert rows[2] == ["(no", "report:", "the", "rank", "was", "stopped", "or", "crashed)"]
    lines = collective_lines(text)
    assert [line.split()[:6] for line in lines] == [
        ["c10d::all_gather", "1.0", "MiB", "2", "1", "1.0"],   # 1 call per rank, 1.0 us
        ["c10d::all_gather", "4.0", "KiB", "2", "1", "0.5"],
    ]
    assert lines[1].split()[6] == "60.0"  # busbw: mean over the ranks' calls
    assert "CPU fallback ops (summed over ranks): aten::linalg_inv_ex x3" in text
    assert "c10d::" not in text.split("Ops (summed over ranks")[1]


def test_trace_of_synthetic_ranks():
    reports = [rank_report(r, [record(0, 100, device=r), all_gather(100, 50, r)])
               for r in (0, 1)]
    # A rank that also used another NeuronCore gets tracks per device.
    reports[1]["records"].append(record(0, 10, device=3))
    trace = _distributed_report.chrome_trace(reports)
    assert json.loads(json.dumps(trace)) == trace
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"} == {
        0: "rank 0 (neuron:0, node 0)", 1: "rank 1 (neuron:1, node 0)"}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
              if e["name"] == "thread_name"}
    assert tracks[(0, 0)] == "stream 0"
    assert tracks[(0, COLLECTIVE_STREAM)] == "collectives (group 0)"
    assert tracks[(1, 20000 + COLLECTIVE_STREAM)] == "neuron:1 collectives (group 0)"
    assert tracks[(1, 40000)] == "neuron:3 stream 0"
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == 5 and all((e["pid"], e["tid"]) in tracks for e in spans)
