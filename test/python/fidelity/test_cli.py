"""The command line, as users run it: `python -m torch_neuron run SCRIPT.py ...` (the script's
output, then the report; --instance, --trace, options anywhere, `--`, the script's exit code)
and `python -m torch_neuron info`."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import NEURON_ENV_VARS

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the repository
TRAIN = os.path.join(REPO, "examples", "train.py")
REPORT = "torch_neuron report"


def cli(*args, cwd=None, timeout=120):
    """Runs `python -m torch_neuron ARGS` in a clean environment (default instance)."""
    env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    return subprocess.run([sys.executable, "-m", "torch_neuron", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def output(result):
    return f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


@pytest.fixture
def script(tmp_path):
    """Writes a small script that uses the device, prints its arguments, and exits with
    `--exit CODE` or raises with `--raise` when asked."""
    path = tmp_path / "echo_args.py"
    path.write_text(textwrap.dedent("""
        import sys, torch
        x = torch.ones(64, 64, device="neuron")
        (x @ x).sum().item()
        print("ARGS", sys.argv[1:])
        if "--exit" in sys.argv:
            sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
        if "--raise" in sys.argv:
            raise ValueError("boom from the script")
    """))
    return str(path)


def test_run_train_example(tmp_path):
    trace = tmp_path / "T.json"
    result = cli("run", TRAIN, "--steps", "3", "--instance", "trn1.2xlarge", "--trace",
                 str(trace))
    assert result.returncode == 0, output(result)
    out = result.stdout
    # The script's own output, then the report.
    assert "step   0  loss" in out and "step   2  loss" in out, output(result)
    assert "step   3" not in out  # --steps went to the script
    assert REPORT in out
    assert out.index("step   2  loss") < out.index(REPORT)
    report = out[out.index(REPORT):]
    assert "trn1.2xlarge" in report
    assert "Trainium1" in report
    assert "aten::mm" in report
    assert "MFU" in report
    assert "CPU fallback ops: none" in report
    assert str(trace) in report
    data = json.loads(trace.read_text())
    assert data["otherData"]["instance"] == "trn1.2xlarge"
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert spans
    # Ordered and non-overlapping on every stream.
    tracks = {}
    for e in spans:
        if e["tid"] < 1000:
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for es in tracks.values():
        for prev, nxt in zip(es, es[1:]):
            assert prev["ts"] + prev["dur"] <= nxt["ts"] + 1e-6


def test_options_before_and_after_the_script_arguments(script, tmp_path):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib")
    trace, png = tmp_path / "t.json", tmp_path / "p.png"
    result = cli("run", "--instance=trn1.2xlarge", script, "a", "--flag", "b",
                 "--trace", str(trace), "--plot", str(png))
    assert result.returncode == 0, output(result)
    assert "ARGS ['a', '--flag', 'b']" in result.stdout
    assert "trn1.2xlarge" in result.stdout
    assert json.loads(trace.read_text())["traceEvents"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_double_dash_passthrough_and_the_script_exit_code(script):
    # Everything after `--` is the script's, even our own option names; the script's
    # sys.exit(3) becomes the exit code, and the report is still printed.
    result = cli("run", script, "x", "--", "--instance", "trn1.2xlarge", "--trace", "t.json",
                 "--exit", "3")
    assert result.returncode == 3, output(result)
    assert ("ARGS ['x', '--instance', 'trn1.2xlarge', '--trace', 't.json', '--exit', '3']"
            in result.stdout), output(result)
    report = result.stdout[result.stdout.index(REPORT):]
    assert "trn2.3xlarge" in report  # not the script's --instance
    assert "aten::mm" in report
    assert "CPU fallback ops: none" in report
    assert "trace:" not in report


def test_script_exception_shows_its_traceback_and_the_report(script):
    # As `python SCRIPT.py`: the traceback of the script's error and exit code 1; the report
    # of the work done until then still follows.
    result = cli("run", script, "--raise")
    assert result.returncode == 1, output(result)
    assert "Traceback (most recent call last)" in result.stderr
    assert "ValueError: boom from the script" in result.stderr
    assert 'echo_args.py", line' in result.stderr
    assert "runpy" not in result.stderr  # the launcher's own frames are left out
    assert "torch_neuron run: error" not in result.stderr  # not mistaken for a CLI error
    assert REPORT in result.stdout and "aten::mm" in result.stdout


def test_unknown_instance_lists_the_valid_names(script):
    result = cli("run", script, "--instance", "trn9.huge")
    assert result.returncode != 0
    assert "trn9.huge" in result.stderr
    for name in ("trn1.2xlarge", "trn1.32xlarge", "trn2.3xlarge", "trn2.48xlarge"):
        assert name in result.stderr, output(result)
    assert "Traceback" not in result.stderr
    assert "ARGS" not in result.stdout  # the script did not run


def test_missing_script(tmp_path):
    result = cli("run", str(tmp_path / "nope.py"), "--instance", "trn1.2xlarge")
    assert result.returncode == 2, output(result)
    assert "no such script" in result.stderr and "nope.py" in result.stderr
    assert REPORT not in result.stdout


@pytest.mark.parametrize("command", ["info", "run"])
def test_unknown_instance_is_one_line_without_a_cpp_stack(command, tmp_path):
    script = tmp_path / "noop.py"
    script.write_text("pass\n")
    args = ("--instance", "bogus") if command == "info" else (str(script), "--instance", "bogus")
    result = cli(command, *args)
    assert result.returncode == 1, output(result)
    assert "unknown Trainium instance type 'bogus'" in result.stderr
    assert "Exception raised from" not in result.stderr and "frame #" not in result.stderr


def test_info_on_a_large_instance():
    result = cli("info", "--instance", "trn2.48xlarge")
    assert result.returncode == 0, output(result)
    out = result.stdout
    assert "trn2.48xlarge" in out
    assert "16 x Trainium2" in out
    assert "devices:       64 (neuron:0..neuron:63)" in out
    assert "24.0 GiB" in out  # HBM per logical core: 96 GiB / 4
    # Peaks from the TensorE clock (2 x 128 x 128 x 2.4 GHz x 2 physical cores), with the
    # product page's per-chip figure beside them.
    assert "peak BF16:     157.3 TFLOPS per core (product page: 667 per chip)" in out
    assert "peak FP32:     39.3 TFLOPS per core" in out
    assert "HBM streaming: 725 GB/s per core" in out

