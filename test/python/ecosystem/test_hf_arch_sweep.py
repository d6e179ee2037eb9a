"""The transformers architecture sweep's CI slice (see test/conformance/hf_arch_sweep.py).

Widely used causal-LM architectures of every family run a forward pass and an 8-token greedy
generation on neuron and on the CPU from the same random weights; each must end with the
status the checked-in report gives it (for these: pass, i.e. identical tokens, logits within
float32 tolerance, zero CPU fallback). The full sweep is one command:
`python test/conformance/hf_arch_sweep.py --check`.
"""

import json
import pathlib
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "conformance"))
import hf_arch_sweep  # noqa: E402


@pytest.fixture(scope="module")
def smoke_report():
    return hf_arch_sweep.sweep(hf_arch_sweep.SMOKE_ARCHS, progress=False)


def test_smoke_slice_matches_the_checked_in_report(smoke_report):
    expected = json.loads(hf_arch_sweep.REPORT.read_text())["architectures"]
    problems = hf_arch_sweep.check_against_report(smoke_report, expected)
    assert not problems, "\n".join(problems)


def test_smoke_slice_passes_with_zero_fallback(smoke_report):
    failing = {arch: r for arch, r in smoke_report.items() if r["status"] != "pass"}
    assert not failing, failing


def test_checked_in_report_meets_the_target():
    summary = json.loads(hf_arch_sweep.REPORT.read_text())["summary"]
    assert summary["pass_rate"] >= 0.95, summary
