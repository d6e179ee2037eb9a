"""Predict-only NKI kernels (Note [Predict-only instructions]): the same instructions, records
and charged time as an executed run, every hardware rule still checked, and no arithmetic."""

import numpy as np
import pytest
import torch

import torch_neuron
import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl
from torch_neuron.nki import dtypes, ops


@nki.jit(platform_target="trn2")
def many_instructions(x, w):
    """One of most instructions, with accumulation, reuse and a loop."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    xs = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    ws = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    nisa.dma_copy(dst=ws, src=w)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(3):
        nisa.nc_matmul(dst=acc, stationary=ws, moving=xs)
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=y, op=nl.exp, data=acc, scale=0.01, reduce_op=nl.add,
                    reduce_res=total, reduce_cmd=nisa.reduce_cmd.reset_reduce)
    inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=total)
    nisa.tensor_scalar(dst=y, data=y, op0=nl.multiply, operand0=inv, op1=nl.add, operand1=1.0)
    m = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=m, op=nl.max, data=y, axis=1)
    stats = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=stats, data=y)
    mv = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mv, data=stats)
    t = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
    yb = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=yb, src=y[:, 0:128])
    nisa.nc_transpose(dst=t, data=yb)
    z = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=t, data2=yb, op=nl.subtract)
    nisa.affine_select(dst=z, pattern=[[-1, 128]], channel_multiplier=1, on_true_tile=z,
                       on_false_value=0.0, cmp_op=nl.greater_equal)
    nisa.tensor_copy(dst=y[:, 0:128], src=z, engine=nisa.scalar_engine)
    nisa.dma_copy(dst=out, src=y)
    return out


def _elapsed_us(fn):
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3, out


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(128, 512, dtype=torch.bfloat16).to("neuron"),
            torch.randn(128, 128, dtype=torch.bfloat16).to("neuron"))


def test_predict_only_charges_exactly_what_an_executed_run_charges():
    x, w = _inputs()
    executed_us, out = _elapsed_us(lambda: many_instructions(x, w))
    executed = many_instructions.last_run
    assert torch.isfinite(out.cpu()).all()
    with torch_neuron.predict_only():
        predicted_us, _ = _elapsed_us(lambda: many_instructions(x, w))
    predicted = many_instructions.last_run
    assert predicted.predict_only and not executed.predict_only
    assert predicted.records == executed.records   # engines, operands, regions, attrs, lines
    for key in ("makespan_ns", "busy_ns", "dma_queue_busy_ns", "instructions"):
        assert np.array_equal(np.asarray(predicted.timing[key]),
                              np.asarray(executed.timing[key])), key
    # The same charge; the events' difference rounds differently at another absolute time.
    assert predicted_us == pytest.approx(executed_us, rel=1e-12)


def test_predict_only_computes_nothing(monkeypatch):
    x, w = _inputs()

    def no_arithmetic(*args, **kwargs):
        raise AssertionError("predict-only computed a value")

    monkeypatch.setattr(ops, "apply", no_arithmetic)
    monkeypatch.setattr(dtypes, "convert", no_arithmetic)
    monkeypatch.setattr(nisa, "apply", no_arithmetic)
    with torch_neuron.predict_only():
        out = many_instructions(x, w)
    assert out.shape == (128, 512)
    with pytest.raises(AssertionError, match="computed a value"):
        many_instructions(x, w)


@nki.jit(platform_target="trn2")
def _too_much_sbuf(x):
    tiles = [nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
    return tiles


@nki.jit(platform_target="trn2")
def _fp32_psum_required(x):
    a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    acc = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=a)


@nki.jit(platform_target="trn2")
def _reads_unwritten(x):
    a = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    b = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b, src=a)   # b is unwritten too (Note [Results of unwritten memory])
    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=b, axis=1)


@nki.jit(platform_target="trn2")
def _moving_too_wide(x):
    a = nl.ndarray((128, 1024), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=a, value=0.0)
    acc = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a[:, 0:128], moving=a)


@pytest.mark.parametrize("kernel, error", [
    (_too_much_sbuf, nki.CapacityError), (_fp32_psum_required, nki.DtypeError),
    (_reads_unwritten, nki.UninitializedReadError), (_moving_too_wide, nki.TileSizeError)])
def test_predict_only_still_checks_the_hardware_rules(kernel, error):
    x = torch.zeros(128, 128, dtype=torch.bfloat16).to("neuron")
    with torch_neuron.predict_only(), pytest.raises(error, match="test_nki_predict_only.py"):
        kernel(x)
