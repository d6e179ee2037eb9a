"""Every Python example in README.md and the quickstart script run as written."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run(args, cwd=ROOT):
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_readme_has_examples():
    assert len(README_BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(README_BLOCKS)))
def test_readme_python_example_runs(index, tmp_path):
    run(["-c", README_BLOCKS[index]], cwd=tmp_path)  # examples may write files (traces)


def test_quickstart_matches_cpu():
    out = run(["examples/quickstart.py"])
    result = re.search(r"result: (\S+) \(CPU says (\S+) \)", out)
    assert result, out
    assert float(result.group(1)) == pytest.approx(float(result.group(2)), rel=1e-5)
    assert "devices: 4 x NeuronCore-v3" in out


def test_readme_main_job_runs(tmp_path):
    """The README's main job: train under `python -m torch_neuron run` with a trace."""
    trace = tmp_path / "trace.json"
    out = run(["-m", "torch_neuron", "run", str(ROOT / "examples" / "train.py"), "--steps", "3",
               "--trace", str(trace)], cwd=tmp_path)
    assert "torch_neuron report" in out and "CPU fallback ops: none" in out
    assert trace.stat().st_size > 0


def test_readme_report_is_what_a_run_prints():
    """The README's report of examples/train.py is deterministic simulation output: it must be
    what a run prints now, so that it cannot go stale."""
    text = (ROOT / "README.md").read_text()
    shown = re.search(r"A real report \(`python -m torch_neuron run examples/train.py`.*?```\n(.*?)```",
                      text, re.S).group(1)
    out = run(["-m", "torch_neuron", "run", str(ROOT / "examples" / "train.py")])
    report = out[out.index("Simulated "):]
    report = report[:report.index("CPU fallback ops:")] + report[report.index("CPU fallback ops:"):].splitlines()[0] + "\n"
    assert report == shown


def test_readme_distributed_report_is_what_a_run_prints():
    """The README's (shortened) report of the distributed main job is deterministic simulation
    output: each line it shows must be in a fresh run's report, in order."""
    from conftest import assert_ok, loopback_env, run_process_group

    text = (ROOT / "README.md").read_text()
    shown = re.search(r"\(a real run, shortened\):\n\n```\n(.*?)```", text, re.S).group(1)
    result = assert_ok(run_process_group(
        [sys.executable, "-m", "torch_neuron", "run", "--nproc-per-node", "4",
         str(ROOT / "examples" / "train_fsdp.py")], env=loopback_env(), timeout=300))
    lines = result.stdout[result.stdout.index("Simulated "):].splitlines()
    position = 0
    for line in shown.splitlines():
        if line == "...":
            continue
        assert line in lines[position:], f"not in the fresh report (in order): {line!r}"
        position = lines.index(line, position) + 1


TORCHRUN_BLOCKS = re.findall(r"```python torchrun\n(.*?)```", (ROOT / "README.md").read_text(),
                             re.S)


@pytest.mark.parametrize("index", range(len(TORCHRUN_BLOCKS)))
def test_readme_torchrun_example_runs(index, tmp_path):
    """The README's torchrun scripts, with 2 ranks on loopback."""
    from conftest import assert_ok, run_torchrun

    script = tmp_path / "script.py"
    script.write_text(TORCHRUN_BLOCKS[index])
    result = assert_ok(run_torchrun(str(script), 2, timeout=180))
    # Both ranks print 0 + 1 = 1.0 (their lines may interleave on the shared pipe).
    assert result.stdout.count("1.0") >= 2, result.stdout
    assert "64 MiB all-reduce: ring on-chip" in result.stdout, result.stdout


def test_readme_documents_the_distributed_main_job():
    """The distributed main job is run by test_distributed_launcher.py; this keeps the README's
    command the one that test runs."""
    text = (ROOT / "README.md").read_text()
    assert ("python -m torch_neuron run --nproc-per-node 4 examples/train_fsdp.py "
            "--trace trace.json") in text


def test_readme_full_size_prediction_is_what_a_run_prints():
    """The predict-only example's lines in the README (all but the host time) are a fresh
    run's."""
    text = (ROOT / "README.md").read_text()
    shown = re.search(r"```\n(predicted on .*?)```", text, re.S).group(1).splitlines()
    out = run(["examples/predict_full_size.py"]).splitlines()
    assert [line for line in out if not line.startswith("(host")] == \
        [line for line in shown if not line.startswith("(host")]
