"""The OpInfo conformance slice that CI runs (see test/conformance/opinfo_sweep.py).

Every op and dtype of the slice must pass with zero CPU fallback (or fall back by policy, like
linalg.inv), unless test/conformance/expected_failures.json lists it with a reason; a listed op
that passes fails the test too, so the list can only shrink. The full sweep is one command:
`python test/conformance/opinfo_sweep.py --check`.
"""

import pathlib
import sys

import pytest

from conftest import on_shallow_stack

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "conformance"))
import opinfo_sweep  # noqa: E402


@pytest.fixture(scope="module")
def smoke_report():
    """The slice over every dtype (about 10 s on a 2-core machine; 45-61 s on pytest's stack)."""
    return on_shallow_stack(opinfo_sweep.sweep, opinfo_sweep.select_ops(smoke=True),
                            list(opinfo_sweep.DTYPES), progress=False)


def test_smoke_slice_covers_the_listed_ops(smoke_report):
    # Every listed name selects an OpInfo of this PyTorch, and each one ran with some dtype.
    missing = [name for name in opinfo_sweep.SMOKE_OPS
               if name not in smoke_report and not any(k.startswith(name + ".") or k == name
                                                       for k in smoke_report)]
    assert not missing, f"SMOKE_OPS names no OpInfo for: {missing}"
    for key, by_dtype in smoke_report.items():
        assert any(r["status"] != "skip" for r in by_dtype.values()), key


def test_smoke_slice_matches_expected_failures(smoke_report):
    problems = opinfo_sweep.check_against_expected(smoke_report,
                                                   opinfo_sweep.load_expected_failures())
    assert not problems, "\n".join(problems)


def test_smoke_slice_meets_float32_targets(smoke_report):
    summary = opinfo_sweep.summarize(smoke_report, "float32")
    assert summary["match_rate"] >= 0.95, summary
    assert summary["zero_fallback_rate"] >= 0.90, summary


def test_policy_fallback_is_reported_as_such(smoke_report):
    assert smoke_report["linalg.inv"]["float32"]["status"] == "policy_fallback"


def test_policy_fallback_is_decided_by_the_policy_table():
    # A linalg_* name is not enough: only ops the table sends to the CPU count.
    assert opinfo_sweep.is_policy_fallback({"aten::linalg_inv_ex": 1, "aten::_fft_r2c.default": 2})
    assert not opinfo_sweep.is_policy_fallback({"aten::linalg_inv_ex": 1, "aten::add.Tensor": 1})
    assert not opinfo_sweep.is_policy_fallback({"aten::linalg_vector_norm": 1})
    assert not opinfo_sweep.is_policy_fallback({})


def test_each_device_gets_its_own_copy_of_the_inputs():
    # uniform_ changes its input: with a shared sample the neuron run would start from the
    # CPU's result, and a kernel that did nothing would pass. With fresh copies it cannot.
    from torch.testing._internal.common_methods_invocations import op_db
    import torch
    import torch_neuron

    op = next(o for o in op_db if o.name == "uniform")
    sample = next(iter(op.sample_inputs("cpu", torch.float32)))
    original = sample.input.clone()
    opinfo_sweep.run_sample(op, sample, opinfo_sweep.fresh_cpu_copy)
    assert torch.equal(sample.input, original)  # the CPU run changed only its copy



def test_readme_table_is_the_committed_report():
    import json

    root = pathlib.Path(__file__).resolve().parents[3]
    report = json.loads((root / "test" / "conformance" / "opinfo_report.json").read_text())
    assert opinfo_sweep.markdown_table(report["summary"]) in (root / "README.md").read_text()
