"""torch.autograd.profiler.profile(use_device="neuron"): PyTorch's profiler times each op's
device work through neuron's profiler stubs (Note [torch.profiler on neuron]), so its device
columns are simulated Trainium time, its host times are sane, and it costs what the CPU
profiler costs."""

import pytest
import torch


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10)).to("neuron")


def profile_forwards(model, x, n=20):
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        for _ in range(n):
            model(x)
    return prof


def test_device_time_is_the_simulated_time_of_each_op():
    model, x = mlp(), torch.randn(32, 64, device="neuron")
    model(x)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    prof = profile_forwards(model, x)
    end.record()
    simulated_us = start.elapsed_time(end) * 1e3
    averages = {e.key: e for e in prof.key_averages()}
    addmm = averages["aten::addmm"]
    assert addmm.count == 40
    assert addmm.self_device_time_total > 0
    # The ops' self device times add up to the simulated time of the whole loop. PyTorch
    # reports whole microseconds per op event, so each event may lose up to 1 us. Once a
    # torch.profiler session in this process has started neuron's Kineto plugin, the device
    # activities are rows of their own beside the ops (as CUDA's kernels are), and PyTorch's
    # table totals those rows: so does this sum.
    rows = prof.key_averages()
    device_rows = [e for e in rows if e.device_type != torch.autograd.DeviceType.CPU]
    self_total = sum(e.self_device_time_total for e in device_rows or rows)
    assert self_total <= simulated_us + 1e-6
    assert self_total >= simulated_us - len(prof.function_events)


def test_host_times_are_sane_and_the_device_stays_usable():
    model, x = mlp(), torch.randn(32, 64, device="neuron")
    prof = profile_forwards(model, x)
    for event in prof.function_events:
        assert event.cpu_time_total >= 0, event
        assert event.time_range.end >= event.time_range.start, event
    assert "NEURON" in prof.key_averages().table(row_limit=3)
    assert torch.equal((torch.ones(2, device="neuron") * 2).cpu(), torch.full((2,), 2.0))


def assert_mm_device_time_is_its_simulated_time(a):
    """Profiles one torch.mm(a, a) with the autograd profiler: its device time must be the
    simulated time it took."""
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        start.record()
        torch.mm(a, a)
        end.record()
    mm = next(e for e in prof.key_averages() if e.key == "aten::mm")
    assert mm.self_device_time_total == pytest.approx(start.elapsed_time(end) * 1e3, abs=1.0)


def test_matmul_device_time_matches_the_cost_model():
    a = torch.randn(1024, 1024, device="neuron")
    torch.mm(a, a)  # warm up
    assert_mm_device_time_is_its_simulated_time(a)


def test_device_time_is_counted_once_after_a_torch_profiler_session():
    # A torch.profiler session starts neuron's Kineto plugin; later autograd-profiler sessions
    # then see its device activities beside the stubs' clock readings (Note [torch.profiler on
    # neuron]): each op's device time must still be its simulated time, once.
    a = torch.randn(1024, 1024, device="neuron")
    with torch.profiler.profile():
        torch.mm(a, a)
    assert_mm_device_time_is_its_simulated_time(a)


# torch.profiler with ProfilerActivity.PrivateUse1: device activities from neuron's Kineto
# plugin (Note [torch.profiler device activities]).
def kineto_profile(fn):
    import torch.profiler as tp

    with tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.PrivateUse1]) as p:
        fn()
    return p


def test_torch_profiler_device_time_is_the_simulated_time():
    model, x = mlp(), torch.randn(32, 64, device="neuron")
    model(x)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)

    def forwards():
        start.record()
        for _ in range(20):
            model(x)
        end.record()

    prof = kineto_profile(forwards)
    cpu_ops = {e.key: e for e in prof.key_averages() if e.cpu_time_total > 0}
    assert cpu_ops["aten::addmm"].count == 40
    assert cpu_ops["aten::addmm"].self_device_time_total > 0
    # Each op's device time is its own launches: linear contains its addmm.
    assert cpu_ops["aten::linear"].device_time_total == pytest.approx(
        cpu_ops["aten::addmm"].device_time_total)
    total_us = sum(e.self_device_time_total for e in cpu_ops.values())
    assert total_us == pytest.approx(start.elapsed_time(end) * 1e3, rel=1e-3)
    for event in prof.events():
        assert event.cpu_time_total >= 0, event


def test_torch_profiler_trace_has_neuron_kernels_linked_to_ops(tmp_path):
    import json

    a = torch.randn(512, 512, device="neuron")
    prof = kineto_profile(lambda: torch.mm(a, a).relu())
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    ops = {e["args"]["External id"]: e["name"] for e in events
           if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    assert sorted(k["name"] for k in kernels) == ["aten::mm", "aten::relu"]
    for k in kernels:
        assert ops[k["args"]["External id"]] == k["name"]  # linked to the op that launched it
        assert k["dur"] > 0
