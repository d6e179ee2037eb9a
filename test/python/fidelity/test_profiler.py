"""torch_neuron.profiler through its public interface: what profile() records, the summary
report, the Chrome/Perfetto trace (well-formed, ordered, durations equal to trnsim's cost model),
the PNG plot, that tracing stops with the context, and how collectives (records on a process
group's stream) are reported: apart from the ops, with compute, communication and exposed
communication per device (interval arithmetic checked on synthetic records)."""

import json
import math
import random

import pytest
import torch
import torch.nn as nn

import torch_neuron
from torch_neuron.profiler.collectives import (covered_ns, merge_intervals, time_breakdown,
                                       uncovered_ns)
from torch_neuron.profiler import ENGINES, profile
from conftest import EVENT_RECORD_NS

# From the Neuron docs, per chip: HBM GB/s, engine clocks (GHz), one DMA engine's B/ns (16 per
# physical core). Only what the matmul cost formula below needs.
CHIPS = {
    "Trainium1": {"hbm": 820.0, "tensor_ghz": 2.8, "vector_ghz": 1.12, "scalar_ghz": 1.4,
                  "dma_engine": 17.0},
    "Trainium2": {"hbm": 2900.0, "tensor_ghz": 2.4, "vector_ghz": 0.96, "scalar_ghz": 1.2,
                  "dma_engine": 23.0},
}
LAUNCH_NS = 1500.0  # trnsim::kLaunchOverheadNs, an assumption of the model (cost.h)
ENGINE_TID_BASE = 1000  # engine tracks of the chrome trace


def tensor_engine_cycles(m, k, n, fp32):
    """NKI architecture guide: per 128-row stationary tile and 128-row contraction tile, the
    moving columns pass in PSUM-bank tiles of 512 at max(N, 64) cycles each (x4 for fp32); the
    stationary load (128 / 4 cycles) hides behind them. The kernel picks C or C^T."""
    def layout(m, n):
        def moving(cols):
            return (cols // 512) * 512 + (max(cols % 512, 64) if cols % 512 else 0)
        groups = [4096] * (n // 4096) + ([n % 4096] if n % 4096 else [])
        per_k = sum(max(min(m, 128) / 4, moving(g)) for g in groups)
        return math.ceil(m / 128) * math.ceil(k / 128) * per_k * (4 if fp32 else 1)
    return min(layout(m, n), layout(n, m)) + 256  # + one array fill and drain


def streaming_cycles(elements, lanes):
    """One one-input pass: elements per lane, plus 100 cycles per 2048-element instruction."""
    per_lane = math.ceil(elements / lanes)
    return per_lane + math.ceil(per_lane / 2048) * 100


def model_mm_ns(m, k, n, dtype):
    """What trnsim's cost model predicts for [m, k] @ [k, n] on one logical core of the current
    instance: the launch overhead plus the longest of TensorE, the PSUM copies (half on VectorE,
    half on ScalarE) and the HBM traffic at the core's streaming rate."""
    props = torch.neuron.get_device_properties(0)
    chip = CHIPS.get(props.chip)
    if chip is None:
        pytest.fail(f"no table entry for {props.chip}: add its documented figures to CHIPS")
    logical_per_chip = props.core_count // props.chips
    cores = props.physical_cores_per_logical
    stream_per_ns = min(chip["hbm"] / logical_per_chip, 16 * chip["dma_engine"] * cores)
    fp32 = dtype not in (torch.bfloat16, torch.float16)
    tensor_ns = tensor_engine_cycles(m, k, n, fp32) / chip["tensor_ghz"] / cores
    vector_ns = streaming_cycles((m * n + 1) // 2, 128 * cores) / chip["vector_ghz"]
    scalar_ns = streaming_cycles(m * n // 2, 128 * cores) / chip["scalar_ghz"]
    nbytes = (m * k + k * n + m * n) * torch.empty(0, dtype=dtype).element_size()
    busiest = max(tensor_ns, vector_ns, scalar_ns, nbytes / stream_per_ns)
    return LAUNCH_NS + busiest, {"TensorE": tensor_ns, "VectorE": vector_ns,
                                 "ScalarE": scalar_ns}, nbytes


def small_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.LayerNorm(128),
                         nn.Linear(128, 10)).to("neuron")


def train_step(model, x):
    model(x).square().mean().backward()


@pytest.fixture(scope="module")
def training_profile():
    model = small_model()
    x = torch.randn(32, 64).to("neuron")
    with profile() as prof:
        train_step(model, x)
    return prof


# Records -------------------------------------------------------------------------------------


def test_records_of_a_training_step(training_profile):
    records = training_profile.records
    assert records
    names = {r["name"] for r in records}
    assert {"aten::addmm", "aten::mm", "aten::relu"} <= names  # forward and backward
    for r in records:
        assert set(r) >= {"name", "device", "queue", "start_ns", "duration_ns", "engine_ns",
                          "flops", "bytes", "detail"}
        assert r["device"] == 0
        assert r["duration_ns"] >= 0
        assert set(r["engine_ns"]) <= set(ENGINES)
        # No engine is busy for longer than the op it works for.
        assert all(0 < busy <= r["duration_ns"] for busy in r["engine_ns"].values())
    mms = [r for r in records if r["name"] in ("aten::mm", "aten::addmm")]
    assert all("TensorE" in r["engine_ns"] and r["flops"] > 0 for r in mms)
    assert all(r["detail"].startswith("Float[") for r in mms)
    assert training_profile.devices() == [0]
    assert training_profile.total_time_ns() == pytest.approx(training_profile.span_ns(0))
    assert training_profile.span_ns(0) >= sum(r["duration_ns"] for r in records) * (1 - 1e-9)


def test_records_are_ordered_per_device():
    with profile() as prof:
        with torch.neuron.stream(torch.neuron.Stream(device=1)):
            a = torch.empty(256, 256, device="neuron:1")
            a @ a
        b = torch.empty(256, 256, device="neuron")
        b + b
    keys = [(r["device"], r["start_ns"]) for r in prof.records]
    assert keys == sorted(keys)
    assert prof.devices() == [0, 1]


@pytest.mark.parametrize("shape,dtype", [
    ((300, 1000, 700), torch.bfloat16),   # TensorE-bound, padded tiles
    ((300, 1000, 700), torch.float32),
    ((4096, 16, 4096), torch.bfloat16),   # HBM-bound: writes a 32 MiB output
], ids=["bf16", "fp32", "hbm-bound"])
def test_op_duration_equals_the_cost_model(shape, dtype):
    m, k, n = shape
    a = torch.empty(m, k, dtype=dtype, device="neuron")
    b = torch.empty(k, n, dtype=dtype, device="neuron")
    out = torch.empty(m, n, dtype=dtype, device="neuron")  # no allocation inside the profile
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with profile() as prof:
        start.record()
        torch.mm(a, b, out=out)
        end.record()
    (r,) = [r for r in prof.records if r["name"].startswith("aten::mm")]
    expected, engines, nbytes = model_mm_ns(m, k, n, dtype)
    assert r["duration_ns"] == pytest.approx(expected, rel=1e-9)
    assert r["engine_ns"] == {e: pytest.approx(ns, rel=1e-9) for e, ns in engines.items()}
    assert r["flops"] == 2 * m * k * n
    assert r["bytes"] == nbytes
    # The record is what the stream's clock did (with the end event's own record).
    assert start.elapsed_time(end) * 1e6 == pytest.approx(r["duration_ns"] + EVENT_RECORD_NS,
                                                          rel=1e-9)


# Summary -------------------------------------------------------------------------------------


def test_summary(training_profile):
    text = training_profile.summary()
    instance = torch.neuron.get_device_properties(0).instance_type
    assert f"Simulated {instance}" in text
    for name in ("aten::addmm", "aten::mm"):
        assert name in text
    assert "MFU" in text
    assert "engine busy" in text
    for engine in ENGINES:
        assert engine in text
    assert "CPU fallback ops: none" in text
    assert training_profile.fallback_ops == {}
    assert training_profile.peak_hbm[0] > 0
    assert 0 < training_profile.mfu(0) <= 1
    util = training_profile.engine_utilization(0)
    assert set(util) == set(ENGINES)
    assert all(0 <= u <= 1 + 1e-9 for u in util.values())
    rows = training_profile.by_op()
    assert sum(row["calls"] for row in rows) == len(training_profile.records)
    assert [row["time_ns"] for row in rows] == sorted((row["time_ns"] for row in rows),
                                                      reverse=True)


def test_summary_lists_cpu_fallback_ops():
    a = (torch.randn(8, 8) + 8 * torch.eye(8)).to("neuron")
    with profile() as prof:
        torch.linalg.inv(a)
    text = prof.summary()
    assert "linalg_inv" in text.split("CPU fallback ops:")[1]
    assert "CPU fallback ops: none" not in text
    assert any("linalg_inv" in k for k in prof.fallback_ops)
    (r,) = [r for r in prof.records if "linalg_inv" in r["name"]]
    assert r["detail"].startswith("CPU fallback")
    assert "DMA" in r["engine_ns"]


def test_fallback_ops_before_the_profile_are_not_reported():
    a = (torch.randn(8, 8) + 8 * torch.eye(8)).to("neuron")
    torch.linalg.inv(a)
    with profile() as prof:
        a + a
    assert prof.fallback_ops == {}
    assert "CPU fallback ops: none" in prof.summary()


# Chrome trace --------------------------------------------------------------------------------


def check_chrome_trace(trace, records):
    """Well-formed, complete, and per (device, track) ordered and non-overlapping."""
    assert json.loads(json.dumps(trace)) == trace
    events = trace["traceEvents"]
    assert trace["displayTimeUnit"] in ("ms", "ns")
    meta = [e for e in events if e["ph"] == "M"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(meta) + len(spans) == len(events)
    devices = sorted({r["device"] for r in records})
    streams = sorted({(r["device"], r["queue"]) for r in records})
    process_names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert process_names == {d: f"neuron:{d}" for d in devices}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"]
                    for e in meta if e["name"] == "thread_name"}
    for d, q in streams:
        assert thread_names[(d, q)] == f"stream {q}"
    for d in devices:
        for i, engine in enumerate(ENGINES):
            assert thread_names[(d, ENGINE_TID_BASE + i)] == engine
    # One span per record on its stream's track, with the record's times in microseconds.
    on_streams = [e for e in spans if e["tid"] < ENGINE_TID_BASE]
    assert len(on_streams) == len(records)
    for e in spans:
        assert {"name", "pid", "tid", "ts", "dur"} <= set(e)
        assert e["ts"] >= 0 and e["dur"] >= 0
        assert (e["pid"], e["tid"]) in thread_names
    by_track = {}
    for e in on_streams:
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for track, es in by_track.items():
        starts = [e["ts"] for e in es]
        assert starts == sorted(starts), track
        for prev, nxt in zip(es, es[1:]):
            assert prev["ts"] + prev["dur"] <= nxt["ts"] + 1e-6, (track, prev, nxt)
    total = sum(r["duration_ns"] for r in records) / 1e3
    assert sum(e["dur"] for e in on_streams) == pytest.approx(total)
    return by_track


def test_chrome_trace_of_a_training_step(training_profile, tmp_path):
    trace = training_profile.chrome_trace()
    check_chrome_trace(trace, training_profile.records)
    assert trace["otherData"]["instance"] == torch.neuron.get_device_properties(0).instance_type
    # One stream: its engines' spans cannot overlap either.
    engines = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["tid"] >= ENGINE_TID_BASE:
            engines.setdefault(e["tid"], []).append(e)
    assert ENGINE_TID_BASE + ENGINES.index("TensorE") in engines
    for tid, es in engines.items():
        es.sort(key=lambda e: e["ts"])
        for prev, nxt in zip(es, es[1:]):
            assert prev["ts"] + prev["dur"] <= nxt["ts"] + 1e-6, tid

    path = tmp_path / "trace.json"
    training_profile.export_chrome_trace(str(path))
    assert json.loads(path.read_text()) == trace


def test_chrome_trace_with_streams_and_devices():
    last = torch.neuron.device_count() - 1
    a = torch.empty(512, 512, device="neuron")
    c = torch.empty(512, 512, device=f"neuron:{last}")
    side = torch.neuron.Stream()
    with profile() as prof:
        a @ a
        with torch.neuron.stream(side):
            a @ a
            a + a
        c @ c
        a.relu()
    streams = {(r["device"], r["queue"]) for r in prof.records}
    assert {(0, 0), (0, side.stream_id), (last, 0)} <= streams
    check_chrome_trace(prof.chrome_trace(), prof.records)


def test_trace_path_is_written_on_exit(tmp_path):
    path = tmp_path / "on_exit.json"
    a = torch.empty(64, 64, device="neuron")
    with profile(trace_path=str(path)) as prof:
        a @ a
        assert not path.exists()
    trace = json.loads(path.read_text())
    assert any(e["ph"] == "X" and e["name"] == "aten::mm" for e in trace["traceEvents"])
    check_chrome_trace(trace, prof.records)


def test_empty_profile():
    with profile() as prof:
        pass
    assert prof.records == []
    assert prof.total_time_ns() == 0
    assert "CPU fallback ops: none" in prof.summary()
    trace = prof.chrome_trace()
    assert json.loads(json.dumps(trace)) == trace
    assert not [e for e in trace["traceEvents"] if e["ph"] == "X"]


# Plot ----------------------------------------------------------------------------------------


def test_plot_writes_a_png(training_profile, tmp_path):
    pytest.importorskip("matplotlib", reason="profile.plot() needs matplotlib (pip install "
                        "torch_neuron[plot])")
    path = tmp_path / "profile.png"
    training_profile.plot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000


# Tracing stops with the context --------------------------------------------------------------


def test_tracing_is_off_after_the_context():
    a = torch.empty(64, 64, device="neuron")
    with profile() as prof:
        a @ a
    assert len(prof.records) == 1
    for _ in range(10):
        a @ a
    # profile.__enter__ drops stale records, so only the simulator's buffer shows whether
    # anything was recorded after the context ended.
    assert torch_neuron._C._take_trace() == []
    with profile() as empty:
        pass
    assert empty.records == []
    assert len(prof.records) == 1  # the first session's records are its own


def test_tracing_is_off_after_an_exception():
    a = torch.empty(64, 64, device="neuron")
    with pytest.raises(ValueError):
        with profile() as prof:
            a @ a
            raise ValueError("boom")
    assert [r["name"] for r in prof.records] == ["aten::mm"]
    a @ a
    assert torch_neuron._C._take_trace() == []



# Collectives: interval arithmetic and reports, on synthetic records ------------------------------

COLLECTIVE_STREAM = torch_neuron._C._first_collective_stream()


def op(start, duration, name="aten::mm", device=0, queue=0, flops=0.0, engine_ns=None):
    return {"name": name, "device": device, "queue": queue, "start_ns": float(start),
            "duration_ns": float(duration), "engine_ns": engine_ns or {}, "flops": flops,
            "bytes": 0, "detail": ""}


def collective(start, duration, name="c10d::all_reduce", nbytes=1 << 20, device=0, group="0",
               algorithm="ring", link="NeuronLink", busbw=100.0, ranks=4):
    detail = {"collective": name.split("::")[1], "bytes": nbytes, "ranks": ranks,
              "group": group, "algorithm": algorithm, "link": link, "link_gbps": 128.0,
              "algbw_gbps": busbw / 1.5, "busbw_gbps": busbw}
    return {"name": name, "device": device, "queue": COLLECTIVE_STREAM, "start_ns": float(start),
            "duration_ns": float(duration), "engine_ns": {}, "flops": 0.0, "bytes": nbytes,
            "detail": json.dumps(detail)}


def test_merge_intervals():
    assert merge_intervals([]) == []
    assert merge_intervals([(5, 7), (0, 2), (1, 3), (3, 4), (6, 6), (9, 8)]) == [(0, 4), (5, 7)]
    assert merge_intervals([(0, 10), (2, 3)]) == [(0, 10)]  # nested
    assert covered_ns([(0, 10), (2, 3), (20, 25)]) == 15


@pytest.mark.parametrize("intervals,by,expected", [
    ([(0, 10)], [], 10),                          # nothing to hide behind
    ([(0, 10)], [(0, 10)], 0),                    # fully hidden
    ([(0, 10)], [(-5, 20)], 0),
    ([(0, 10)], [(2, 4), (6, 12)], 4),            # [0,2) and [4,6) exposed
    ([(0, 10), (20, 30)], [(5, 25)], 10),         # one compute interval over two collectives
    ([(0, 10), (5, 15)], [(12, 13)], 14),         # overlapping collectives count once
    ([(10, 20)], [(0, 5), (25, 30)], 10),         # compute entirely outside
    ([], [(0, 5)], 0),
])
def test_uncovered_ns(intervals, by, expected):
    assert uncovered_ns(intervals, by) == expected


def test_uncovered_ns_matches_a_brute_force_count():
    rng = random.Random(0)
    for _ in range(200):
        a, b = ([(s, s + rng.randint(0, 15))
                 for s in (rng.randint(0, 60) for _ in range(rng.randint(0, 6)))]
                for _ in range(2))
        in_a = {t for s, e in a for t in range(s, e)}
        in_b = {t for s, e in b for t in range(s, e)}
        assert uncovered_ns(a, b) == len(in_a - in_b), (a, b)
        assert covered_ns(a) == len(in_a)


def test_time_breakdown_of_overlapped_communication():
    # compute [0, 100) and [150, 200); a collective [80, 180) overlaps both ends: 50 ns exposed.
    records = [op(0, 100), op(150, 50), op(120, 10, queue=3), collective(80, 100)]
    t = time_breakdown(records)
    assert t == {"span_ns": 200.0, "compute_ns": 160.0, "communication_ns": 100.0,
                 "exposed_communication_ns": 40.0}  # [100,120) and [130,150)
    assert time_breakdown([]) == {"span_ns": 0.0, "compute_ns": 0.0, "communication_ns": 0.0,
                                  "exposed_communication_ns": 0.0}


@pytest.fixture
def profile_with_collectives():
    prof = profile()
    prof.records = sorted([
        op(0, 1000, flops=1e6, engine_ns={"TensorE": 900.0}),
        op(1000, 500, name="aten::add.Tensor", engine_ns={"VectorE": 400.0}),
        collective(1200, 800, name="c10d::all_gather", nbytes=4 << 20, busbw=90.0),
        collective(2000, 400, name="c10d::all_gather", nbytes=4 << 20, busbw=110.0),
        collective(2400, 600, name="c10d::reduce_scatter", nbytes=8 << 20, busbw=120.0),
        op(2100, 300, name="aten::mm", flops=1e6, engine_ns={"TensorE": 250.0}),
    ], key=lambda r: (r["device"], r["start_ns"]))
    prof.peak_hbm = {0: 3 << 20}
    return prof


def test_summary_lists_collectives_apart_from_ops(profile_with_collectives):
    prof = profile_with_collectives
    text = prof.summary()
    header, _, rest = text.partition("\n")
    assert "3 ops, 3 collectives, predicted time 3.0 us" in header
    op_table, _, after = rest.partition("\nneuron:0:")
    assert "c10d::" not in op_table  # collectives are not ops
    assert [row["name"] for row in prof.by_op()] == ["aten::mm", "aten::add.Tensor"]
    # The % column is over the ops' time only: 1300 + 500 ns.
    assert "aten::mm                                      2         1.3   72.2" in op_table
    # compute [0,1500) + [2100,2400) = 1800 ns; communication [1200,3000) = 1800 ns; exposed
    # [1500,2100) + [2400,3000) = 1200 ns.
    assert "compute 1.8 us, communication 1.8 us, exposed communication 1.2 us" in after
    t = prof.time_breakdown(0)
    assert t["exposed_communication_ns"] == 1200.0
    # Engines and MFU count the ops only; the span (3 us) is the denominator.
    assert prof.engine_utilization(0)["TensorE"] == pytest.approx(1150 / 3000)
    assert prof.engine_utilization(0)["DMA"] == 0
    collectives = after.split("\nCollectives\n")[1]
    lines = collectives.splitlines()
    assert lines[0].split()[:3] == ["collective", "calls", "bytes"]
    gather = next(line for line in lines if line.startswith("c10d::all_gather"))
    assert gather.split()[:4] == ["c10d::all_gather", "2", "8.0", "MiB"]  # total bytes
    assert "1.2" in gather.split() and "100.0" in gather.split()  # 1.2 us, mean busbw
    assert gather.endswith("ring / NeuronLink")
    assert any(line.startswith("c10d::reduce_scatter") for line in lines)
    assert text.endswith("CPU fallback ops: none")


def test_summary_without_collectives_has_no_collectives_section(training_profile):
    text = training_profile.summary()
    assert "Collectives" not in text and "communication" not in text
    assert "collectives," not in text.splitlines()[0]


def test_chrome_trace_names_the_collective_track(profile_with_collectives):
    trace = profile_with_collectives.chrome_trace()
    assert json.loads(json.dumps(trace)) == trace
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(0, 0)] == "stream 0"
    assert names[(0, COLLECTIVE_STREAM)] == "collectives (group 0)"
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == COLLECTIVE_STREAM]
    assert [e["name"] for e in spans] == ["c10d::all_gather", "c10d::all_gather",
                                          "c10d::reduce_scatter"]
    assert spans[0]["args"]["algorithm"] == "ring" and spans[0]["args"]["bytes"] == 4 << 20
    assert spans[0]["ts"] == 1.2 and spans[0]["dur"] == 0.8


def test_profiles_nest_and_the_outer_one_keeps_everything():
    x = torch.ones(64, 64, device="neuron")
    with torch_neuron.profiler.profile() as outer:
        x @ x
        with torch_neuron.profiler.profile() as inner:
            x + x
        x * x
    assert [r["name"] for r in inner.records] == ["aten::add.Tensor"]
    assert [r["name"] for r in outer.records] == ["aten::mm", "aten::add.Tensor",
                                                  "aten::mul.Tensor"]
    with torch_neuron.profiler.profile() as after:  # tracing was switched off and on again
        x - x
    assert [r["name"] for r in after.records] == ["aten::sub.Tensor"]
