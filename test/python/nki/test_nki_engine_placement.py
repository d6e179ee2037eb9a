"""Where NKI instructions run and what slows them beyond the ISA formulas, on each NeuronCore
generation (trnsim Notes [Strided access], [Shared SBUF and PSUM ports] and [Engine choice]):

- NeuronCore-v2 (trn1) gives an SBUF/PSUM access whose innermost stride exceeds 16 bytes half
  of an interface's bandwidth; NeuronCore-v3 (trn2) is charged no penalty;
- on NeuronCore-v2 VectorE and GpSimdE cannot touch SBUF at the same time, nor VectorE and
  ScalarE PSUM; NeuronCore-v3 lifts both;
- a tensor_copy given no engine goes where the compiler's workload estimate puts it.

Durations are computed here by hand from the engine clocks (trn1: VectorE 1.12 GHz, ScalarE
and GpSimdE 1.4 GHz; trn2: VectorE 0.96 GHz, ScalarE and GpSimdE 1.2 GHz; the Trn1/Trn2
architecture pages) and the ISA stub's tensor_copy cost, max(MIN_II, N) cycles."""

import numpy as np
import pytest
import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

VECTOR_GHZ = {"trn1": 1.12, "trn2": 0.96}
GPSIMD_GHZ = {"trn1": 1.4, "trn2": 1.2}


def duration_ns(p, i):
    t = p.instruction(i)
    return (t.end_us - t.start_us) * 1e3


def strided_copy(target, step, dtype=nl.float32):
    @nki.jit(platform_target=target)
    def kernel(x):
        a = nl.ndarray((128, 512 * step), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((128, 512), dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=a[:, 0:512 * step:step], engine=nisa.engine.vector)  # 1
        out = nl.ndarray((128, 512), dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        return out
    return kernel


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("step,item,half_rate_on_v2", [
    (1, 4, False), (4, 4, False),   # 4 and 16 bytes: full rate
    (5, 4, True), (8, 4, True),     # 20 and 32 bytes
    (8, 2, False), (9, 2, True),    # bfloat16: 16 and 18 bytes
])
def test_an_innermost_stride_over_16_bytes_halves_the_rate_on_neuroncore_v2(
        target, step, item, half_rate_on_v2):
    dtype = nl.float32 if item == 4 else nl.bfloat16
    x = torch.randn(128, 512 * step, dtype=torch.float32 if item == 4 else torch.bfloat16)
    p = nki.profile(strided_copy(target, step, dtype), x)
    assert torch.equal(torch.as_tensor(p.run.result), x[:, 0:512 * step:step])
    factor = 2 if half_rate_on_v2 and target == "trn1" else 1
    assert duration_ns(p, 1) == pytest.approx(factor * 512 / VECTOR_GHZ[target])


def two_engines(target, memory):
    """VectorE and GpSimdE (SBUF) or VectorE and ScalarE (PSUM) on independent tiles."""
    @nki.jit(platform_target=target)
    def kernel(x):
        a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)                                                  # 0
        b = nl.ndarray((128, 512), dtype=nl.float32, buffer=memory)
        nisa.tensor_copy(dst=b, src=a, engine=nisa.engine.vector)                    # 1
        c = nl.ndarray((128, 512), dtype=nl.float32, buffer=memory)
        if memory is nl.sbuf:
            nisa.tensor_copy(dst=c, src=a, engine=nisa.engine.gpsimd)                # 2
        else:
            nisa.activation(dst=c, op=nl.copy, data=a)                               # 2
        d = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=d, data1=b, data2=a, op=nl.add, engine=nisa.engine.vector)
        nisa.tensor_tensor(dst=d, data1=c, data2=d, op=nl.add, engine=nisa.engine.vector)
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=d)
        return out
    return kernel


@pytest.mark.parametrize("memory", [nl.sbuf, nl.psum], ids=["sbuf", "psum"])
def test_neuroncore_v2_serialises_engines_that_share_a_port_v3_does_not(memory):
    x = torch.randn(128, 512)
    expected = 3 * x
    starts = {}
    for target in ("trn1", "trn2"):
        p = nki.profile(two_engines(target, memory), x)
        torch.testing.assert_close(torch.as_tensor(p.run.result), expected)
        first, second = p.instruction(1), p.instruction(2)
        assert (first.engine, second.engine) == (
            "VectorE", "GpSimdE" if memory is nl.sbuf else "ScalarE")
        starts[target] = (first, second)
    first, second = starts["trn1"]
    # VectorE is listed before the other engine, so it takes the port; the other waits for it.
    assert second.start_us == pytest.approx(first.end_us)
    first, second = starts["trn2"]
    assert second.start_us == pytest.approx(first.start_us)


def busy_vector_then_copy(target, copy_dst_memory=nl.sbuf, dtype=nl.float32, engine=None):
    """VectorE busy with 9 fills, then a tensor_copy given `engine` (None: none)."""
    @nki.jit(platform_target=target)
    def kernel(x):
        a = nl.ndarray((128, 512), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        acc = nl.ndarray((128, 512), dtype=dtype, buffer=nl.sbuf)
        for i in range(9):
            nisa.memset(dst=acc, value=i + 1, engine=nisa.engine.vector)
        c = nl.ndarray((128, 512), dtype=dtype, buffer=copy_dst_memory)
        if engine is None:
            nisa.tensor_copy(dst=c, src=a)
        else:
            nisa.tensor_copy(dst=c, src=a, engine=engine)
        if copy_dst_memory is nl.psum:  # a DMA reads SBUF or HBM only
            back = nl.ndarray((128, 512), dtype=dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=back, src=c, engine=nisa.engine.vector)
            c = back
        out = nl.ndarray((128, 512), dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=c)
        return out
    return kernel


def the_copy(p):
    """The first tensor_copy's TimedInstruction."""
    return next(i for i in (p.instruction(k) for k in range(len(p.records)))
                if i.name == "tensor_copy")


def copy_engine(p):
    return the_copy(p).engine


def test_a_copy_given_no_engine_runs_where_the_workload_is_least():
    x = torch.randn(128, 512)
    p = nki.profile(busy_vector_then_copy("trn2"), x)
    assert torch.equal(torch.as_tensor(p.run.result), x)
    # ScalarE and GpSimdE are idle and equally fast (1.2 GHz): the first listed, ScalarE.
    assert copy_engine(p) == "ScalarE"
    assert p.instructions["VectorE"] == 9 and p.instructions["ScalarE"] == 1
    copy = the_copy(p)
    assert p.by_line()[(copy.source, "ScalarE")] == pytest.approx(512 / 1.2 / 1e3)
    # The same copy told to use VectorE queues behind VectorE's nine fills.
    explicit = nki.profile(busy_vector_then_copy("trn2", engine=nisa.engine.vector), x)
    assert copy_engine(explicit) == "VectorE"
    assert the_copy(explicit).start_us > copy.end_us
    assert explicit.time_us > p.time_us


def test_a_copy_given_no_engine_keeps_to_the_engines_that_can_run_it():
    x = torch.randn(128, 512)
    # PSUM: not GpSimdE; NeuronCore-v2: not ScalarE. VectorE is what is left.
    p = nki.profile(busy_vector_then_copy("trn1", nl.psum), x)
    assert torch.equal(torch.as_tensor(p.run.result), x)
    assert copy_engine(p) == "VectorE"
    # trn1 SBUF: GpSimdE shares VectorE's SBUF port, so the port's work counts against it;
    # at 1.4 GHz against VectorE's 1.12 it still finishes first.
    assert copy_engine(nki.profile(busy_vector_then_copy("trn1"), x)) == "GpSimdE"
    # int32 through ScalarE's FP32 would not be exact: GpSimdE (PSUM excluded) or VectorE.
    xi = torch.randint(-2**30, 2**30, (128, 512), dtype=torch.int32)
    p = nki.profile(busy_vector_then_copy("trn2", nl.psum, nl.int32), xi)
    assert torch.equal(torch.as_tensor(p.run.result), xi)
    assert copy_engine(p) == "VectorE"
