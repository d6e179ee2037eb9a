"""The performance model as users see it: simulated time measured with torch.neuron events and
torch.neuron.simulated_time_ns() against the peak rates of the hardware table in
docs (ARCHITECTURE.md, "The hardware model", from the Neuron architecture pages).

Properties: no op is predicted faster than the peak (FLOPs and HBM bytes), a large bf16 matmul
comes within 70% of a logical core's peak, fp32 is about 4x slower than bf16, a large
elementwise op runs at HBM bandwidth, streams of one core share its engines (work overlaps
only where it uses different ones), and the numbers follow TORCH_NEURON_INSTANCE.

Inputs are made with torch.empty: creating them costs no device time, and only the op under
test sits between the events.

Every test here reads simulated time only, so everything runs predict-only (Note [Predict-only
execution]): the ops are charged exactly as when they compute, and a 4096^3 bf16 matmul costs
no host time (minutes on a host without AVX-512 BF16 support)."""

import pytest
import torch

import torch_neuron

from conftest import EVENT_RECORD_NS, catch_up, run_python_json

MiB = 1 << 20

# Subprocesses (run_python_json) start predict-only too.
PREDICT_ONLY = {"TORCH_NEURON_EXECUTE": "0"}


@pytest.fixture(autouse=True)
def predict_only():
    with torch_neuron.predict_only():
        yield

# Per chip, from the Neuron docs: HBM GB/s, TensorE clock (GHz), one DMA engine's rate (B/ns,
# NKI DMA bandwidth guide; 16 engines per physical core); and the logical NeuronCores (devices)
# and physical cores per chip of each instance.
CHIPS = {
    "Trainium1": {"hbm": 820.0, "tensor_ghz": 2.8, "dma_engine": 17.0},
    "Trainium2": {"hbm": 2900.0, "tensor_ghz": 2.4, "dma_engine": 23.0},
}
INSTANCES = {
    "trn1.2xlarge": ("Trainium1", 2, 2),  # chip, logical cores per chip, physical cores
    "trn1.32xlarge": ("Trainium1", 2, 2),
    "trn2.3xlarge": ("Trainium2", 4, 8),
    "trn2.48xlarge": ("Trainium2", 4, 8),
}


def core_rates(instance):
    """(bf16 FLOP/ns, fp32 FLOP/ns, HBM bytes/ns) of one logical NeuronCore of `instance`:
    a 128x128 multiply-add array per physical core at the TensorE clock, fp32 at a quarter of
    that; what the core streams is its DMA engines' rate bounded by its HBM share."""
    chip, logical, physical = INSTANCES[instance]
    c = CHIPS[chip]
    cores = physical // logical
    bf16 = 2 * 128 * 128 * c["tensor_ghz"] * cores
    stream = min(c["hbm"] / logical, 16 * c["dma_engine"] * cores)
    return bf16, bf16 / 4, stream


def current_instance():
    name = torch.neuron.get_device_properties(0).instance_type
    if name not in INSTANCES:
        pytest.fail(f"no table entry for instance {name}: add its documented figures above")
    return name


def timed_ns(fn, stream=None):
    """Simulated ns that `fn`'s work takes on `stream` (the current one by default): the time
    between two events, less the end event's own record."""
    stream = stream or torch.neuron.current_stream()
    catch_up(stream)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with torch.neuron.stream(stream):
        start.record(stream)
        out = fn()
        end.record(stream)
    return start.elapsed_time(end) * 1e6 - EVENT_RECORD_NS, out


def mm_ns(n, dtype):
    a = torch.empty(n, n, dtype=dtype, device="neuron")
    b = torch.empty(n, n, dtype=dtype, device="neuron")
    ns, _ = timed_ns(lambda: torch.mm(a, b))
    return ns


# Matmul --------------------------------------------------------------------------------------


def test_large_bf16_matmul_is_within_70_percent_of_peak():
    bf16_per_ns, _, hbm_per_ns = core_rates(current_instance())
    n = 4096
    flops = 2 * n**3
    peak_ns = flops / bf16_per_ns  # 2 * 4096^3 / (667e12 / 4) s on trn2.3xlarge
    ns = mm_ns(n, torch.bfloat16)
    assert ns >= peak_ns  # never faster than the peak
    assert ns >= 3 * n * n * 2 / hbm_per_ns  # nor than reading A, B and writing C
    assert ns <= peak_ns / 0.7, f"{flops / ns / bf16_per_ns:.1%} of peak"


def test_fp32_matmul_is_about_four_times_slower_than_bf16():
    instance = current_instance()
    bf16_per_ns, fp32_per_ns, _ = core_rates(instance)
    n = 2048
    bf16, fp32 = mm_ns(n, torch.bfloat16), mm_ns(n, torch.float32)
    assert fp32 >= 2 * n**3 / fp32_per_ns
    assert 3.0 <= fp32 / bf16 <= 4.5, fp32 / bf16
    # FP32 matmul instructions cost 4x the BF16 ones (NKI architecture guide).
    assert fp32 / bf16 == pytest.approx(bf16_per_ns / fp32_per_ns, rel=0.1)


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (129, 257, 513), (1, 4096, 1),
                                   (1000, 999, 1001)], ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_no_matmul_beats_the_peak(shape, dtype):
    bf16_per_ns, fp32_per_ns, hbm_per_ns = core_rates(current_instance())
    m, k, n = shape
    a = torch.empty(m, k, dtype=dtype, device="neuron")
    b = torch.empty(k, n, dtype=dtype, device="neuron")
    ns, _ = timed_ns(lambda: torch.mm(a, b))
    peak = bf16_per_ns if dtype == torch.bfloat16 else fp32_per_ns
    assert ns >= 2 * m * k * n / peak
    assert ns >= (m * k + k * n + m * n) * a.element_size() / hbm_per_ns


def test_batched_matmul_never_beats_the_peak():
    bf16_per_ns, _, hbm_per_ns = core_rates(current_instance())
    b, m, k, n = 16, 256, 512, 384
    x = torch.empty(b, m, k, dtype=torch.bfloat16, device="neuron")
    y = torch.empty(b, k, n, dtype=torch.bfloat16, device="neuron")
    ns, _ = timed_ns(lambda: torch.bmm(x, y))
    assert ns >= 2 * b * m * k * n / bf16_per_ns
    assert ns >= b * (m * k + k * n + m * n) * 2 / hbm_per_ns
    # Batching does not make a matmul cheaper than running its pieces one by one (apart from
    # the launch overhead of each piece).
    one, _ = timed_ns(lambda: torch.mm(x[0], y[0]))
    assert ns >= b * (one - 1500) * 0.99


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_attention_never_beats_the_peak(causal, dtype):
    # Fused attention is QK^T and PV on TensorE (4 * L^2 * D FLOPs per head forward, 2.5x that
    # backward); a causal mask at best halves it.
    bf16_per_ns, fp32_per_ns, _ = core_rates(current_instance())
    peak = bf16_per_ns if dtype == torch.bfloat16 else fp32_per_ns
    b, h, length, d = 1, 4, 1024, 64
    q, k, v = (torch.empty(b, h, length, d, dtype=dtype, device="neuron", requires_grad=True)
               for _ in range(3))
    forward_flops = 4 * b * h * length**2 * d * (0.5 if causal else 1.0)
    with torch_neuron.profiler.profile() as prof:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out.backward(torch.empty_like(out))
    records = {r["name"]: r for r in prof.records if "attention" in r["name"]}
    assert len(records) == 2, [r["name"] for r in prof.records]
    for name, r in records.items():
        flops = forward_flops * (2.5 if name.endswith("backward") else 1.0)
        assert "TensorE" in r["engine_ns"], r
        assert r["duration_ns"] >= flops / peak, name
        assert r["flops"] >= flops * (1 - 1e-9), name


# Elementwise ---------------------------------------------------------------------------------


def test_large_elementwise_add_runs_at_hbm_bandwidth():
    _, _, hbm_per_ns = core_rates(current_instance())
    n = 64 * MiB  # 256 MiB of float32 per tensor
    a = torch.empty(n, device="neuron")
    b = torch.empty(n, device="neuron")
    ns, out = timed_ns(lambda: a + b)
    ideal = 3 * n * 4 / hbm_per_ns  # read a and b, write the sum
    assert ns >= ideal
    assert ns == pytest.approx(ideal, rel=0.1)
    del out


@pytest.mark.parametrize("numel", [1, 1000, 1 << 20])
def test_no_elementwise_op_beats_hbm_bandwidth(numel):
    _, _, hbm_per_ns = core_rates(current_instance())
    a = torch.empty(numel, device="neuron")
    b = torch.empty(numel, device="neuron")
    for op, tensors in [(lambda: a + b, 3), (lambda: torch.exp(a), 2), (lambda: a * 2, 2)]:
        ns, _ = timed_ns(op)
        assert ns >= tensors * numel * 4 / hbm_per_ns


def test_out_variants_cost_what_the_functional_ops_cost():
    # An out= argument is only written: its bytes are traffic once, not read and then written.
    a = torch.empty(1 << 20, device="neuron")
    b = torch.empty(1 << 20, device="neuron")
    c = torch.empty(1 << 20, device="neuron")
    functional, _ = timed_ns(lambda: a + b)
    out, _ = timed_ns(lambda: torch.add(a, b, out=c))
    assert out == pytest.approx(functional, rel=1e-9)
    # An HBM-bound matmul (a 32 MiB output from a contraction over 16).
    m = torch.empty(4096, 16, dtype=torch.bfloat16, device="neuron")
    w = torch.empty(16, 4096, dtype=torch.bfloat16, device="neuron")
    o = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron")
    functional, _ = timed_ns(lambda: torch.mm(m, w))
    out, _ = timed_ns(lambda: torch.mm(m, w, out=o))
    assert out == pytest.approx(functional, rel=1e-9)
    # In-place ops do read what they overwrite: a.add_(b) moves as many bytes as a + b.
    inplace, _ = timed_ns(lambda: a.add_(b))
    assert inplace == pytest.approx(timed_ns(lambda: a + b)[0], rel=1e-9)


# Streams -------------------------------------------------------------------------------------


def on_streams(streams, fns):
    """Runs fns[i] on streams[i], all starting together; returns the simulated ns until the
    device is done."""
    for s in streams:
        catch_up(s)
    for s in streams[1:]:
        s.wait_stream(streams[0])
    t0 = torch.neuron.simulated_time_ns()
    outs = []
    for s, fn in zip(streams, fns):
        with torch.neuron.stream(s):
            outs.append(fn())
    return torch.neuron.simulated_time_ns() - t0


def test_streams_of_a_core_share_its_engines():
    # Note [Shared engines] (trnsim/queue.h): two TensorE-bound matmuls on two streams of one
    # NeuronCore take turns on its one TensorE; nothing runs faster than the hardware.
    n = 1024
    a = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
    b = torch.empty(n, n, dtype=torch.bfloat16, device="neuron")
    one, _ = timed_ns(lambda: torch.mm(a, b))
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    two = on_streams([s1, s2], [lambda: torch.mm(a, b)] * 2)
    assert 1.8 * one < two <= 2 * one + 1e-6

    # Work on different engines overlaps: a matmul beside a small ScalarE op.
    x = torch.empty(64, 64, device="neuron")
    exp_alone, _ = timed_ns(lambda: torch.exp(x))
    both = on_streams([s1, s2], [lambda: torch.mm(a, b), lambda: torch.exp(x)])
    assert both < one + exp_alone

    # The same two matmuls on one stream add up.
    assert on_streams([s1], [lambda: (torch.mm(a, b), torch.mm(a, b))]) == pytest.approx(
        2 * one, rel=1e-6)


def test_mfu_and_engine_busy_never_exceed_the_hardware():
    # Four 4096^3 bf16 matmuls on four streams of neuron:0 used to report MFU 396%.
    out = run_python_json("""
        import json, re, torch, torch_neuron
        a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron")
        streams = [torch.neuron.Stream() for _ in range(4)]
        with torch_neuron.profiler.profile() as prof:
            for s in streams:
                with torch.neuron.stream(s):
                    a @ a
        text = prof.summary()
        mfu = float(re.search(r"MFU ([0-9.]+)%", text).group(1))
        busy = float(re.search(r"TensorE ([0-9.]+)%", text).group(1))
        print(json.dumps([mfu, busy]))
    """, env=PREDICT_ONLY)
    mfu, tensor_busy = out
    assert 0 < mfu <= 100
    assert 90 <= tensor_busy <= 100  # TensorE-bound work back to back


# Instances -----------------------------------------------------------------------------------

# Runs in a fresh process on the instance it is given; prints the simulated ns of a bf16 matmul
# and of a large elementwise add.
MEASURE = """
    import json, torch
    def timed(fn):
        start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        start.record(); out = fn(); end.record()
        return start.elapsed_time(end) * 1e6
    a = torch.empty(2048, 2048, dtype=torch.bfloat16, device="neuron")
    x = torch.empty(16 << 20, device="neuron")
    y = torch.empty(16 << 20, device="neuron")
    print(json.dumps({
        "instance": torch.neuron.get_device_properties(0).instance_type,
        "devices": torch.neuron.device_count(),
        "mm": timed(lambda: torch.mm(a, a)),
        "add": timed(lambda: x + y),
    }))
"""


@pytest.fixture(scope="module")
def measured():
    """MEASURE's output per instance, each measured once in its own process."""
    cache = {}

    def get(instance):
        if instance not in cache:
            env = {"TORCH_NEURON_INSTANCE": instance} if instance else {}
            env.update(PREDICT_ONLY)
            cache[instance] = run_python_json(MEASURE, env=env)
        return cache[instance]

    return get


def test_numbers_follow_the_instance_table(measured):
    trn1 = measured("trn1.2xlarge")
    trn2 = measured(None)  # the default instance
    assert (trn1["instance"], trn1["devices"]) == ("trn1.2xlarge", 2)
    assert (trn2["instance"], trn2["devices"]) == ("trn2.3xlarge", 4)
    # A Trn2 logical core (2 TensorEs at 2.4 GHz) has 1.71x the bf16 rate of a Trn1 core ...
    bf16_1, _, hbm_1 = core_rates("trn1.2xlarge")
    bf16_2, _, hbm_2 = core_rates("trn2.3xlarge")
    assert trn1["mm"] / trn2["mm"] == pytest.approx(bf16_2 / bf16_1, rel=0.05)
    # ... and 725 / 272 = 2.67x its streaming bandwidth (Trn1's DMA engines are its limit).
    assert trn1["add"] / trn2["add"] == pytest.approx(hbm_2 / hbm_1, rel=0.05)
    # Both against their own table rows.
    for row, name in ((trn1, "trn1.2xlarge"), (trn2, "trn2.3xlarge")):
        bf16, _, hbm = core_rates(name)
        assert bf16 * 0.7 <= 2 * 2048**3 / row["mm"] <= bf16
        assert row["add"] == pytest.approx(3 * (16 << 20) * 4 / hbm, rel=0.1)


def test_large_instance_has_the_same_cores(measured):
    # trn2.48xlarge is 16 of the trn2.3xlarge's chips: more devices, the same per-core numbers.
    out, ref = measured("trn2.48xlarge"), measured(None)
    assert (out["instance"], out["devices"]) == ("trn2.48xlarge", 64)
    assert out["mm"] == pytest.approx(ref["mm"], rel=1e-9)
    assert out["add"] == pytest.approx(ref["add"], rel=1e-9)
