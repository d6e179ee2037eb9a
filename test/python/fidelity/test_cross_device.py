"""Clocks across devices (Note [Copies between devices] in csrc/aten/Copy.cpp): a copy from one
neuron device to another orders after the source stream's work and before the destination
stream's later work, as CUDA's peer copy does, so a model split across cores in one process is
predicted as the sum of its stages plus the transfers. References: each stage timed alone, and
the copy's time from trnsim's transfer model (third_party/trnsim/include/trnsim/transfer.h)
computed here from the instance's documented figures. Predict-only: only simulated time is
read."""

import pytest
import torch
import torch.nn as nn

import torch_neuron
from torch_neuron import _C

# trnsim/transfer.h: a DMA transfer's fixed setup cost (an assumption stated there), ns.
DMA_SETUP_NS = 2000.0


def same_chip_copy_ns(nbytes):
    """A copy between two cores of one chip (transfer.h): the bytes are read and written in HBM,
    so they move at half the chip's HBM bandwidth (Trainium2: 2,900 GB/s; its DMA engines'
    3,500 GB/s are not the limit), shared by the chip's logical cores."""
    info = _C._instance_info()
    assert info["chip"] == "Trainium2"
    gbps = min(3500.0, info["hbm_gbps_per_chip"] / 2) / info["logical_cores_per_chip"]
    return DMA_SETUP_NS + nbytes / gbps


def clock(device):
    return torch.neuron.simulated_time_ns(device)


def stage(device):
    with torch.device(device):
        return nn.Sequential(nn.Linear(4096, 4096), nn.GELU(), nn.Linear(4096, 4096)).bfloat16()


def elapsed_ms(fn, device):
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record(torch.neuron.current_stream(device))
    fn()
    end.record(torch.neuron.current_stream(device))
    return start.elapsed_time(end)


@pytest.fixture(autouse=True)
def _predict_only():
    with torch_neuron.predict_only():
        yield


def test_copy_waits_for_the_source_stream():
    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron:0")
    b = a @ a  # neuron:0 is busy for about a millisecond
    busy_until = clock(0)
    assert clock(1) < busy_until
    b.to("neuron:1")
    # The copy starts after the matmul, and neuron:1's later work after the copy.
    assert clock(1) == pytest.approx(busy_until + same_chip_copy_ns(b.nbytes), rel=1e-9)
    assert clock(0) == pytest.approx(clock(1), rel=1e-12)  # it ran on neuron:0's stream


def test_copy_waits_for_the_destination_stream():
    c = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron:2")
    # Whatever earlier tests left on the clocks, neuron:2 ends up busy past neuron:3: nothing may
    # overwrite its memory before it is done.
    torch.neuron.current_stream(2).wait_stream(torch.neuron.current_stream(3))
    c @ c
    busy_until = clock(2)
    x = torch.empty(1024, 1024, device="neuron:3")
    assert clock(3) < busy_until
    x.to("neuron:2")
    assert clock(3) == pytest.approx(busy_until + same_chip_copy_ns(x.nbytes), rel=1e-9)
    assert clock(2) == pytest.approx(clock(3), rel=1e-12)


def test_two_stage_model_is_the_sum_of_its_stages_and_the_transfer():
    first, second = stage("neuron:0"), stage("neuron:1")
    x = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron:0")
    with torch.no_grad():
        alone_first = elapsed_ms(lambda: first(x), 0)
        h = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron:1")
        alone_second = elapsed_ms(lambda: second(h), 1)
        transfer_ms = same_chip_copy_ns(h.nbytes) * 1e-6

        # The pipeline, timed the CUDA way: an event on the last stage's device that the first
        # device's stream waits for (elapsed_time needs both events on one device).
        start = torch.neuron.Event(enable_timing=True)
        done = torch.neuron.Event()
        end = torch.neuron.Event(enable_timing=True)
        start.record(torch.neuron.current_stream(0))
        out = second(first(x).to("neuron:1"))
        done.record(torch.neuron.current_stream(1))
        torch.neuron.current_stream(0).wait_event(done)
        end.record(torch.neuron.current_stream(0))
        total = start.elapsed_time(end)
    assert out.device == torch.device("neuron:1")
    # Each stage is about 1.4 ms of matmuls; the transfer about 0.1 ms. The sum, not the
    # longest stage (within two event records, 0.07 us each).
    assert min(alone_first, alone_second) > 10 * transfer_ms
    assert total == pytest.approx(alone_first + transfer_ms + alone_second, abs=2e-4)
    # neuron:0's stream waited for the event recorded on neuron:1 after the last stage.
    assert clock(0) >= clock(1)


def test_events_across_devices():
    # As with CUDA: another device's stream can wait for an event; elapsed_time cannot span two
    # devices.
    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="neuron:1")
    a @ a
    while clock(1) < clock(0) + 1e6:  # neuron:1 ahead of every stream of neuron:0
        a @ a
    on_one = torch.neuron.Event(enable_timing=True)
    on_one.record(torch.neuron.current_stream(1))
    on_zero = torch.neuron.Event(enable_timing=True)
    on_zero.record(torch.neuron.current_stream(0))
    with pytest.raises(RuntimeError, match="both events on one device"):
        on_zero.elapsed_time(on_one)
    fresh = torch.neuron.Stream(device=0)  # its clock starts behind neuron:1's work
    assert _C._stream_clock_ns(0, fresh.stream_id) < clock(1) - 1e5
    fresh.wait_event(on_one)
    assert _C._stream_clock_ns(0, fresh.stream_id) >= clock(1) - _C._EVENT_RECORD_NS
