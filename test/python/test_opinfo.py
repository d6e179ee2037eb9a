"""The OpInfo conformance slice that CI runs (see test/conformance/opinfo_sweep.py).

Every op and dtype of the slice must pass with zero CPU fallback (or fall back by policy, like
linalg.inv), unless test/conformance/expected_failures.json lists it with a reason; a listed op
that passes fails the test too, so the list can only shrink. The full sweep is one command:
`python test/conformance/opinfo_sweep.py --check`.
"""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "conformance"))
import opinfo_sweep  # noqa: E402


@pytest.fixture(scope="module")
def smoke_report():
    return opinfo_sweep.sweep(opinfo_sweep.select_ops(smoke=True), list(opinfo_sweep.DTYPES),
                              progress=False)


def test_smoke_slice_covers_the_listed_ops(smoke_report):
    assert len(smoke_report) >= len(opinfo_sweep.SMOKE_OPS) - 2


def test_smoke_slice_matches_expected_failures(smoke_report):
    problems = opinfo_sweep.check_against_expected(smoke_report,
                                                   opinfo_sweep.load_expected_failures())
    assert not problems, "\n".join(problems)


def test_smoke_slice_meets_float32_targets(smoke_report):
    summary = opinfo_sweep.summarize(smoke_report, "float32")
    assert summary["pass_rate"] >= 0.95, summary
    assert summary["zero_fallback_rate"] >= 0.90, summary


def test_policy_fallback_is_reported_as_such(smoke_report):
    assert smoke_report["linalg.inv"]["float32"]["status"] == "policy_fallback"
