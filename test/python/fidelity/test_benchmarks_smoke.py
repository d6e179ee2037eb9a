"""The benchmark scripts run as documented, in their bounded sizes (their numbers are measured
by hand, side by side in one process; tests assert no timings)."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def run(script, *args):
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_op_benchmark_quick_prints_every_row():
    out = run("op_benchmark.py", "--quick")
    for row in ("matmul", "conv2d", "softmax 1 MiB, new output", "softmax 1 MiB, out=",
                "layer_norm 1 MiB, new output", "add 1 MiB, out=", "add, 1 element",
                "copy 1 MiB", "simulation per op"):
        assert row in out, out
    assert len(re.findall(r"ratio +\d+\.\d+", out)) == 9, out


def test_train_benchmark_quick_compares_both_devices():
    out = run("train_benchmark.py", "--quick")
    assert out.count("simulated Trainium step") == 2 and "worst ratio" in out, out


def test_profiler_benchmark_runs():
    out = run("profiler_benchmark.py", "--rounds", "1")
    assert re.search(r"ratio +\d+\.\d+", out), out


def test_compile_benchmark_quick_compares_four_configurations():
    out = run("compile_benchmark.py", "--quick", "--cpu-keeps-freed-memory")
    assert "CPU side: glibc keeps freed memory" in out, out
    rows = [line for line in out.splitlines() if " -> " in line]
    assert len(rows) == 3, out  # the three workloads, each with its predicted times
    for row in rows:
        # 4 wall times, the neuron/cpu ratio and the two speedups.
        assert len(re.findall(r"\d+\.\d+", row.split(" -> ")[0])) == 8, row
