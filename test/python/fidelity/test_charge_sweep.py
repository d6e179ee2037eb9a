"""One charge in both modes (Note [One charge path] in csrc/aten/Charge.h): predict-only and
executed runs charge every op the same (test/conformance/charge_sweep.py sweeps the OpInfos).
The smoke slice of the OpInfo charge sweep, and the cases it found, each against the executed
run (and the CPU for values)."""

import pathlib
import sys

import pytest
import torch

import torch_neuron
from torch_neuron import _C
from conftest import on_shallow_stack

CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "conformance"


def charges(fn, execute):
    """The trace records (name, duration, engine times) of fn run in one mode."""
    _C._take_trace()
    _C._set_tracing(True)
    try:
        with torch_neuron.predict_only() if not execute else _nothing():
            fn()
    finally:
        _C._set_tracing(False)
    return [(r["name"], r["duration_ns"], sorted(r["engine_ns"].items()))
            for r in _C._take_trace()]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_smoke_sweep_charges_the_same_in_both_modes():
    sys.path.insert(0, str(CONFORMANCE))
    try:
        import charge_sweep
    finally:
        sys.path.remove(str(CONFORMANCE))
    ops = charge_sweep.opinfo_sweep.select_ops(charge_sweep.SMOKE_OPS)
    report = on_shallow_stack(charge_sweep.sweep, ops, ["float32"], charge_sweep.SMOKE_SAMPLES,
                              progress=False)
    assert charge_sweep.problems(report, charge_sweep.load_expected()) == []
    compared = [k for k, v in report.items() if v["float32"]["status"] == "same"]
    assert len(compared) >= len(charge_sweep.SMOKE_OPS) - 2, report


def test_fill_from_a_device_scalar_is_one_device_pass_in_both_modes():
    x = torch.zeros(1000, device="neuron")
    value = torch.tensor(3.0, device="neuron")
    executed = charges(lambda: x.fill_(value), execute=True)
    assert executed == charges(lambda: x.fill_(value), execute=False)
    # The value stays on the device (ATen's fill_ copies it): no read to the host, one VectorE
    # pass like a fill from a host scalar, the value's 4 bytes aside.
    from_host = charges(lambda: x.fill_(3.0), execute=True)
    assert [name for name, _, _ in executed] == ["aten::fill_"]
    assert executed[0][2] == from_host[0][2]  # VectorE time
    assert executed[0][1] == pytest.approx(from_host[0][1], abs=1.0)
    torch.testing.assert_close(x.cpu(), torch.full((1000,), 3.0))


@pytest.mark.parametrize("case", ["element of self", "another device", "cpu tensor"])
def test_fill_from_a_device_scalar_values(case):
    cpu = torch.arange(6.0)
    if case == "element of self":
        x = cpu.to("neuron")
        x.fill_(x[4])
        want = cpu.fill_(cpu[4].clone())
    elif case == "another device":
        x = torch.zeros(3, device="neuron:1")
        x.fill_(torch.tensor(2.5, device="neuron:0"))
        want = torch.full((3,), 2.5)
    else:  # the CPU fills a CPU tensor; the device only reads the value back
        x, value = torch.zeros(3), torch.tensor(1.5, device="neuron")
        read = charges(lambda: x.fill_(value), execute=True)
        assert [name for name, _, _ in read] == ["aten::_local_scalar_dense"]
        want = torch.full((3,), 1.5)
    torch.testing.assert_close(x.cpu(), want)


def test_python_number_keeps_its_weak_type_when_predicting():
    # Found by the sweep: a 0-dim float32 tensor times a Python float predicted a float64
    # result (and charged a conversion copy the executed run does not make).
    x = torch.tensor(2.0, device="neuron")
    with torch_neuron.predict_only():
        assert (x * 0.5).dtype == torch.float32
        assert torch.ops.aten.mul.Tensor(x, torch.tensor(0.5, dtype=torch.float64)).dtype == \
            torch.float64  # a real 0-dim float64 tensor still promotes, as on the CPU
    assert (x * 0.5).dtype == (x.cpu() * 0.5).dtype
