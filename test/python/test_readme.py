"""Every Python example in README.md and the quickstart script run as written."""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
README_BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def run(args):
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_readme_has_examples():
    assert len(README_BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(README_BLOCKS)))
def test_readme_python_example_runs(index):
    run(["-c", README_BLOCKS[index]])


def test_quickstart_matches_cpu():
    out = run(["examples/quickstart.py"])
    result = re.search(r"result: (\S+) \(CPU says (\S+) \)", out)
    assert result, out
    assert float(result.group(1)) == pytest.approx(float(result.group(2)), rel=1e-5)
    assert "devices: 4 x NeuronCore-v3" in out
