"""NKI instruction-level timing (Note [Kernel schedule], Note [ISA instruction costs]):
durations against the ISA stub's published formulas computed here by hand, dependency
scheduling, the overhead of dependent instructions, profiles and traces, and kernels charged
to a neuron stream.

Hand-computation facts: Trainium2 engine clocks TensorE 2.4 GHz, VectorE 0.96 GHz, ScalarE 1.2
GHz, GpSimdE 1.2 GHz (trnsim instance.cpp, from the Trn2 architecture page); MIN_II = 64 cycles;
a dma_copy costs 1300 ns (DMA bandwidth guide) plus its bytes over the plotted DMA efficiency
at its bytes per descriptor (trnsim Note [DMA payload efficiency]) at one physical Trainium2
core's stream bandwidth, min(16 x 23 B/ns, 2900 / 8 GB/s) = 362.5 B/ns."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import torch_neuron
import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

TENSOR_GHZ, VECTOR_GHZ, SCALAR_GHZ, GPSIMD_GHZ = 2.4, 0.96, 1.2, 1.2
MIN_II = 64
# An instruction that reads the output of the one before it on VectorE or ScalarE: + 100 cycles
# (trnsim Note [Dependent instruction overhead], NKI architecture guide).
DEPENDENT = 100
LAUNCH_US = 1.5  # trnsim cost.h kLaunchOverheadNs


def duration_ns(p, i):
    t = p.instruction(i)
    return (t.end_us - t.start_us) * 1e3


@nki.jit(platform_target="trn2")
def one_of_each(x):
    a = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=1.0)                                         # 0 VectorE
    b = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=b, op=nl.exp, data=a)                             # 1 ScalarE
    c = nl.ndarray((128, 10), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=c, op=nl.exp, data=a[:, 0:10])                    # 2 ScalarE, MIN_II
    d = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.add)                # 3 VectorE, 2N
    s = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0.0)                                         # 4 VectorE, N/2
    m = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=m, value=0.5)                                         # 5
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=m)                       # 6 TensorE bf16
    acc2 = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc2, stationary=a[:, 0:32], moving=a[:, 0:16])    # 7 TensorE fp32
    r = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
    mb = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=mb, src=m, engine=nisa.engine.vector)            # 8 VectorE
    nisa.tensor_reduce(dst=r, op=nl.add, data=mb, axis=1)                 # 9 VectorE, N/2
    out = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)                                         # 10 DMA
    return out


def test_instruction_durations_equal_the_published_formulas():
    p = nki.profile(one_of_each, np.zeros(4, np.float32))
    names = [r.name for r in p.records]
    assert names[6] == "nc_matmul" and names[10] == "dma_copy"
    expected = {
        0: 1000 / VECTOR_GHZ,                     # memset: max(MIN_II, N)
        1: 1000 / SCALAR_GHZ,                     # activation: max(MIN_II, N)
        2: MIN_II / SCALAR_GHZ,                   # activation, N = 10 < MIN_II
        3: (2 * 1000 + DEPENDENT) / VECTOR_GHZ,   # tensor_tensor, both SBUF fp32: 2N; reads 0
        4: MIN_II / VECTOR_GHZ,                   # memset 0 to bf16: max(MIN_II, N/2) = 64
        5: 512 / VECTOR_GHZ,
        6: 512 / TENSOR_GHZ,                      # max(min(64, 128), 512), bf16
        7: 4 * max(min(64, 32), 16) / TENSOR_GHZ,  # fp32: 4x
        8: (512 + DEPENDENT) / VECTOR_GHZ,        # reads 5's output
        9: (256 + DEPENDENT) / VECTOR_GHZ,        # tensor_reduce bf16 add: N/2; reads 8's
    }
    for i, ns in expected.items():
        assert duration_ns(p, i) == pytest.approx(ns, rel=1e-9), (i, names[i])
    attrs = dict(p.records[10].attrs)
    # 4000 B a descriptor: between the 2 KiB (0.816) and 4 KiB (0.966) points of trnsim's Note
    # [DMA payload efficiency], linear in log2 of the size.
    assert attrs["bytes"] == 128 * 1000 * 4 and attrs["descriptors"] == 128
    fraction = 0.816 + math.log2(4000 / 2048) * (0.966 - 0.816)
    dma_ns = 1300 + round(attrs["bytes"] / fraction) / 362.5
    assert duration_ns(p, 10) == pytest.approx(dma_ns, rel=1e-9)
    assert p.instructions == {"TensorE": 2, "VectorE": 6, "ScalarE": 2, "GpSimdE": 0,
                              "DMA": 1}


@nki.jit(platform_target="trn2")
def streams(x):
    # Two independent streams: VectorE fills a, GpSimdE fills b.
    a = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=1.0)                                    # 0
    nisa.memset(dst=b, value=2.0, engine=nisa.engine.gpsimd)         # 1
    # Dependent: ScalarE reads a (RAW on VectorE's memset).
    c = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=c, op=nl.exp, data=a)                        # 2
    # Buffer reuse: overwriting b waits for ScalarE's read of it (WAR).
    d = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=d, op=nl.exp, data=b)                        # 3
    nisa.memset(dst=b, value=3.0, engine=nisa.engine.gpsimd)         # 4
    out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


def test_independent_streams_overlap_dependent_serialise_reuse_waits():
    p = nki.profile(streams, np.zeros(4, np.float32))
    t = [p.instruction(i) for i in range(5)]
    vector_fill = 2048 / VECTOR_GHZ / 1e3
    gpsimd_fill = 512 / GPSIMD_GHZ / 1e3
    assert t[0].start_us == 0 and t[1].start_us == 0  # overlap on two engines
    assert t[1].end_us == pytest.approx(gpsimd_fill)
    assert t[2].start_us == pytest.approx(vector_fill)  # RAW: after the VectorE fill
    # ScalarE runs in order: instruction 3 follows instruction 2.
    assert t[3].start_us == pytest.approx(t[2].end_us)
    # WAR: the second fill of b waits for the read of b, not just for GpSimdE.
    assert t[4].start_us == pytest.approx(t[3].end_us)
    assert t[4].start_us > t[1].end_us + 1.0
    # The critical path: VectorE fill -> activation -> activation -> ... each with its line.
    lines = [c.source for c in p.critical_path]
    assert p.critical_path[0].index == 0 and all(":" in s for s in lines)
    src = Path(__file__).name
    assert all(s.split(":")[0].endswith(src) for s in lines)


@nki.jit(platform_target="trn2")
def chain_and_fan(x):
    a = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=1.0)                               # 0 VectorE
    b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=b, src=a, engine=nisa.engine.vector)   # 1 reads 0's output
    c = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=c, data=a, op0=nl.multiply, operand0=2.0)  # 2 reads a, not 1's
    e = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=c)                   # 3 ScalarE, first on it
    f = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=f, op=nl.exp, data=e)                   # 4 reads 3's output
    g = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=g, op=nl.exp, data=b)                   # 5 reads b, not 4's output
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_reading_the_previous_instructions_output_costs_100_cycles_more():
    p = nki.profile(chain_and_fan, np.zeros(4, np.float32))
    assert duration_ns(p, 1) == pytest.approx((512 + DEPENDENT) / VECTOR_GHZ)
    assert duration_ns(p, 2) == pytest.approx(512 / VECTOR_GHZ)
    assert duration_ns(p, 3) == pytest.approx(512 / SCALAR_GHZ)
    assert duration_ns(p, 4) == pytest.approx((512 + DEPENDENT) / SCALAR_GHZ)
    assert duration_ns(p, 5) == pytest.approx(512 / SCALAR_GHZ)


@nki.jit(platform_target="trn2")
def quadrants(x):
    a = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a[64:128, 0:64], value=1.0, engine=nisa.engine.gpsimd)   # 0: short
    nisa.memset(dst=a[0:64, :], value=2.0)                                   # 1: long, VectorE
    b = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=b, op=nl.exp, data=a[64:128, 0:64])                  # 2
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=b)
    return out


def test_writes_to_other_partitions_of_a_tile_do_not_order():
    p = nki.profile(quadrants, np.zeros(4, np.float32))
    # The activation reads partitions 64-127, which only the GpSimd fill wrote.
    assert p.instruction(2).start_us == pytest.approx(MIN_II / GPSIMD_GHZ / 1e3)
    assert p.instruction(2).start_us < p.instruction(1).end_us


def test_profile_fields_and_trace(tmp_path):
    p = nki.profile(streams, np.zeros(4, np.float32))
    assert p.time_us == pytest.approx(max(p.instruction(i).end_us
                                          for i in range(len(p.records))))
    assert set(p.busy) == {"TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA"}
    assert p.busy["VectorE"] == pytest.approx((2048 / VECTOR_GHZ / 1e3) / p.time_us)
    dma = p.instruction(len(p.records) - 1)
    assert p.busy["DMA"] == pytest.approx((dma.end_us - dma.start_us) / p.time_us)
    assert p.dma_queue_busy[dma.dma_queue] == pytest.approx(p.busy["DMA"])
    path = tmp_path / "kernel.json"
    p.save_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"TensorE", "VectorE", "ScalarE", "GpSimdE", f"DMA queue {dma.dma_queue}"} <= tracks
    ops = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in ops] == [r.name for r in p.records]
    assert all(e["args"]["source"] == r.source for e, r in zip(ops, p.records))


def _elapsed_us(fn):
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3, out


def test_eager_call_charges_the_stream_with_the_schedule():
    x = torch.rand(128, 2048)
    a = x.to("neuron")
    base, _ = _elapsed_us(lambda: None)
    us, out = _elapsed_us(lambda: streams(a))
    timing = streams.last_run.timing
    assert us - base == pytest.approx(timing["makespan_ns"] / 1e3 + LAUNCH_US, abs=1e-6)
    assert out.device.type == "neuron"
    np.testing.assert_allclose(out.cpu().numpy(), np.exp(np.ones((128, 2048), np.float32)),
                               rtol=1e-6)


def test_predict_only_times_a_kernel_without_its_values():
    a = torch.rand(128, 2048).to("neuron")
    executed, _ = _elapsed_us(lambda: streams(a))
    records = len(streams.last_run.records)
    with torch_neuron.predict_only():
        predicted, out = _elapsed_us(lambda: streams(a))
        assert out.shape == (128, 2048) and out.device.type == "neuron"
    assert predicted == pytest.approx(executed, abs=1e-9)
    assert len(streams.last_run.records) == records


def test_trn3_kernels_are_timed_on_trainium3s_clocks_and_unknown_cores_are_an_error():
    @nki.jit(platform_target="trn3")
    def k(x):
        a = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=0.0)
        out = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    # VectorE at 1.2 GHz on NeuronCore-v4 (trainium3_arch.rst), 0.96 GHz on v3.
    assert duration_ns(nki.profile(k, np.zeros(4, np.float32)), 0) == pytest.approx(1000 / 1.2)
    from torch_neuron import _C

    empty = np.zeros((0, 15), np.int64), np.zeros((0, 6), np.int64)
    with pytest.raises(ValueError, match="NeuronCore-v9.*known: NeuronCore-v2"):
        _C._nki_schedule("NeuronCore-v9", 16, 1, *empty)


@pytest.mark.extended
def test_matmul_sequence_gets_faster_and_turns_tensor_bound():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "nki"))
    import matmul_sequence as ms

    torch.manual_seed(0)
    lhsT = torch.randn(2048, 1024, dtype=torch.bfloat16)
    rhs = torch.randn(2048, 2048, dtype=torch.bfloat16)
    expected = lhsT.float().T @ rhs.float()
    profiles = []
    for name, kernel in ms.KERNELS:
        p = nki.profile(kernel, lhsT, rhs)
        torch.testing.assert_close(p.run.result, expected, rtol=1e-4, atol=1e-2)
        profiles.append(p)
    times = [p.time_us for p in profiles]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    assert profiles[0].bound == "DMA" and profiles[0].busy["DMA"] > 0.95
    assert profiles[-1].bound == "TensorE"


@nki.jit(platform_target="trn2")
def _load_columns(x, width):
    """Loads x [128, N] float32 in [128, width] tiles: rows of width x 4 bytes a partition."""
    out = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    for j in nl.affine_range(x.shape[1] // width):
        t = nl.ndarray((128, width), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, j * width:(j + 1) * width])
    done = nl.ndarray((128, 1), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=done, value=0.0)
    nisa.dma_copy(dst=out, src=done)
    return out


@pytest.mark.parametrize("width, fraction", [(64, 0.104), (512, 0.816)])
def test_small_dma_rows_move_at_the_plotted_fraction_of_the_peak(width, fraction):
    """The same 4 MiB loaded in rows of 256 B or 2 KiB a partition: AWS's DMA overview plots
    0.104 and 0.816 of the peak for them (trnsim Note [DMA payload efficiency]), so the bytes
    take at least their time at that fraction of one core's 362.5 B/ns, and at most that plus
    each queue's fixed 1300 ns per transfer and the final store. A 256 B row costs 7.8x a
    2 KiB row's time per byte (a per-descriptor overhead of 256 B would make it 1.8x)."""
    x = np.zeros((128, 8192), np.float32)
    p = nki.profile(_load_columns, x, width)
    loads = 8192 // width
    floor_us = x.nbytes / (fraction * 362.5) / 1e3
    assert floor_us <= p.time_us <= floor_us + (-(-loads // 16) * 1300 + 4000) / 1e3, p.time_us


@nki.jit(platform_target="trn2")
def _load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t[:, 0:1])
    return out


def test_a_load_to_few_partitions_runs_on_their_dma_engines_only():
    # AWS's DMA overview, Example 1: [4, 4096] bf16 (32 KiB) lands in 4 partitions, which one
    # of the 16 engines serves (8 partitions each), so it moves at one engine's 23 B/ns (8 KiB
    # rows: 0.983 of the peak). The same bytes in 128 partitions ([128, 128], Example 2) use all
    # 16 engines, bounded by the core's 362.5 B/ns (256 B rows: 0.104).
    few = nki.profile(_load, torch.zeros(4, 4096, dtype=torch.bfloat16))
    many = nki.profile(_load, torch.zeros(128, 128, dtype=torch.bfloat16))
    assert duration_ns(few, 0) == pytest.approx(1300 + round(32768 / 0.983) / 23, rel=1e-6)
    assert duration_ns(many, 0) == pytest.approx(1300 + round(32768 / 0.104) / 362.5, rel=1e-6)


@nki.jit(platform_target="trn2")
def _rows_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = a.shape[0] // nl.num_programs(0)
    for i in nl.affine_range(rows // 128):
        r0 = nl.program_id(0) * rows + i * 128
        nl.store(out[r0:r0 + 128, :], nl.add(nl.load(a[r0:r0 + 128, :]),
                                              nl.load(b[r0:r0 + 128, :])))
    return out


def test_lnc2_programs_run_on_two_physical_cores():
    a, b = np.random.rand(1024, 512).astype(np.float32), np.random.rand(1024, 512).astype(np.float32)
    one, two = nki.profile(_rows_add, a, b), nki.profile(_rows_add[2], a, b)
    np.testing.assert_allclose(two.run.result, a + b)
    assert two.programs == 2 and {r.core for r in two.records} == {0, 1}
    # Each program has half the rows and its own core's engines and HBM share.
    assert two.time_us < 0.6 * one.time_us
    assert two.instructions == one.instructions
