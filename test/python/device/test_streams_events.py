"""Streams and events on the simulated clock: stream selection, event timing of copies, the
independence of streams, cross-stream waits, record_stream, and synchronize.

Expected copy times come from the documented model (trnsim/transfer.h): a host <-> device copy
takes 2 us of DMA setup plus bytes / 25 GB/s."""

import pytest
import torch
import torch_neuron

from conftest import EVENT_RECORD_NS, run_python_json, catch_up

MiB = 1 << 20
HOST_LINK_BYTES_PER_S = 25e9
DMA_SETUP_MS = 2e-3
RECORD_MS = EVENT_RECORD_NS * 1e-6  # one event record: the least gap between two events


def upload_ms(nbytes):
    return DMA_SETUP_MS + nbytes / HOST_LINK_BYTES_PER_S * 1e3


def timed_event():
    return torch.neuron.Event(enable_timing=True)


def align(a, b):
    """Brings two streams' clocks to the device's time (streams from the pool may carry earlier
    tests' work, and the device's engines may be busy with it)."""
    catch_up(a)
    catch_up(b)


# Streams ------------------------------------------------------------------------------------


def test_new_streams():
    a, b = torch.neuron.Stream(), torch.neuron.Stream()
    for s in (a, b):
        assert isinstance(s, torch.Stream)
        assert s.device == torch.device("neuron", 0)
        assert s.device.type == "neuron"
        assert 1 <= s.stream_id <= 32  # 0 is the default stream
    assert a.stream_id != b.stream_id
    assert a != b
    s = torch.neuron.Stream(device=2)
    assert s.device_index == 2
    assert torch.neuron.Stream("neuron:1").device == torch.device("neuron", 1)
    with torch.neuron.device(3):
        assert torch.neuron.Stream().device_index == 3


def test_stream_priority_maps_into_a_range_of_one():
    # As torch.cuda.Stream maps a priority outside its range to the nearest one: the simulated
    # core's streams take its engines in issue order, one priority (FSDP2 asks for -1).
    assert torch.neuron.Stream.priority_range() == (0, 0)
    for priority in (-5, -1, 0, 3):
        s = torch.neuron.Stream(priority=priority)
        assert s.priority == 0 and s.device.type == "neuron"
    with pytest.raises(TypeError, match="priority must be an int"):
        torch.neuron.Stream(priority="high")


def test_pool_gives_32_distinct_streams():
    # Like CUDA, new streams come round-robin from a pool of 32 per device; asking for the
    # default stream does not use one up.
    ids = set()
    for _ in range(32):
        ids.add(torch.neuron.Stream().stream_id)
        torch.neuron.default_stream()
    assert ids == set(range(1, 33))


def test_default_and_current_stream():
    for i in range(4):
        d = torch.neuron.default_stream(i)
        assert d.stream_id == 0 and d.device_index == i
        assert torch.neuron.current_stream(i) == d
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    assert torch.accelerator.current_stream() == torch.neuron.current_stream()
    assert torch.neuron.current_stream("neuron:2").device_index == 2


def test_set_stream():
    s = torch.neuron.Stream()
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    assert torch.accelerator.current_stream() == s
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)  # per device
    torch.neuron.set_stream(torch.neuron.default_stream())
    assert torch.neuron.current_stream() == torch.neuron.default_stream()


def test_stream_context_manager():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1) as entered:
        assert entered == s1
        assert torch.neuron.current_stream() == s1
        assert torch.accelerator.current_stream() == s1
        with torch.neuron.stream(s2):
            assert torch.neuron.current_stream() == s2
        assert torch.neuron.current_stream() == s1
        with torch.neuron.stream(None):  # no-op
            assert torch.neuron.current_stream() == s1
    assert torch.neuron.current_stream() == torch.neuron.default_stream()


def test_stream_context_on_other_device():
    s = torch.neuron.Stream(device=1)
    with torch.neuron.stream(s):
        assert torch.neuron.current_device() == 1
        assert torch.neuron.current_stream() == s
        assert torch.ones(2, device="neuron").device == torch.device("neuron", 1)
    assert torch.neuron.current_device() == 0
    assert torch.neuron.current_stream(1) == torch.neuron.default_stream(1)


def test_torch_stream_context():
    s = torch.neuron.Stream()
    with s:
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream() == torch.neuron.default_stream()


def test_stream_query_and_synchronize():
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        x = torch.randn(100).to("neuron")
    s.synchronize()
    assert s.query()
    assert torch.equal(x.cpu(), x.cpu())


# Events and timing --------------------------------------------------------------------------


def test_elapsed_time_of_a_4_mib_upload():
    nbytes = 4 * MiB
    host = torch.empty(nbytes // 4)
    dst = torch.empty(nbytes // 4, device="neuron")  # allocate outside the timed region
    start, end = timed_event(), timed_event()
    start.record()
    dst.copy_(host)
    end.record()
    ms = start.elapsed_time(end)
    assert ms > nbytes / HOST_LINK_BYTES_PER_S * 1e3  # never faster than the host link
    assert ms == pytest.approx(upload_ms(nbytes), rel=0.05)


def test_elapsed_time_of_to_neuron():
    # As users write it: the allocation inside the timed region costs no device time of its own.
    host = torch.randn(MiB)
    start, end = timed_event(), timed_event()
    start.record()
    n = host.to("neuron")
    end.record()
    assert start.elapsed_time(end) >= upload_ms(4 * MiB) * 0.999
    assert torch.equal(n.cpu(), host)


def test_elapsed_time_scales_with_bytes():
    def time_upload(nbytes):
        host = torch.empty(nbytes // 4)
        dst = torch.empty(nbytes // 4, device="neuron")
        start, end = timed_event(), timed_event()
        start.record()
        dst.copy_(host)
        end.record()
        return start.elapsed_time(end)

    small, big = time_upload(4 * MiB), time_upload(12 * MiB)
    # Same setup cost, three times the bytes.
    assert big - small == pytest.approx(8 * MiB / HOST_LINK_BYTES_PER_S * 1e3, rel=0.05)


def test_download_is_timed_too():
    n = torch.empty(MiB, device="neuron")
    out = torch.empty(MiB)
    start, end = timed_event(), timed_event()
    start.record()
    out.copy_(n)
    end.record()
    assert start.elapsed_time(end) == pytest.approx(upload_ms(4 * MiB), rel=0.05)


def test_events_recorded_back_to_back_are_a_record_apart():
    # Recording is itself work on the stream (Note [Event records]): as on CUDA, two events
    # recorded back to back are a small positive time apart, one record's 100 cycles.
    start, end = timed_event(), timed_event()
    start.record()
    end.record()
    gap = start.elapsed_time(end)
    assert gap > 0
    assert gap == pytest.approx(RECORD_MS)
    # Records are not ops: between two events lies the op's own time and one record.
    a = torch.ones(1 << 20, device="neuron")
    with torch_neuron.profiler.profile() as prof:
        start.record()
        a.add_(1)
        end.record()
    assert [r["name"] for r in prof.records] == ["aten::add_.Tensor"]
    op_ms = prof.records[0]["duration_ns"] * 1e-6
    assert start.elapsed_time(end) == pytest.approx(op_ms + gap, rel=1e-9)


def test_events_without_timing_refuse_elapsed_time():
    a, b = torch.neuron.Event(), torch.neuron.Event()
    a.record()
    b.record()
    with pytest.raises((RuntimeError, ValueError)):
        a.elapsed_time(b)
    t = timed_event()
    t.record()
    with pytest.raises((RuntimeError, ValueError)):
        t.elapsed_time(b)


def test_unrecorded_event_refuses_elapsed_time():
    a, b = timed_event(), timed_event()
    a.record()
    with pytest.raises((RuntimeError, ValueError)):
        a.elapsed_time(b)


def test_events_on_different_devices_refuse_elapsed_time():
    a, b = timed_event(), timed_event()
    a.record()
    b.record(torch.neuron.current_stream(1))
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)


def test_event_query_synchronize_and_record_on_stream():
    s = torch.neuron.Stream()
    e = torch.neuron.Event()
    e.record(s)
    assert e.query()
    e.synchronize()
    e2 = s.record_event()
    assert e2.query()
    e3 = torch.Event(device="neuron", enable_timing=True)  # torch's own Event on neuron
    e3.record()
    e3.synchronize()


# Independent streams ------------------------------------------------------------------------


def test_each_stream_clock_advances_with_its_own_work_and_the_shared_dma():
    nbytes = 4 * MiB
    host = torch.arange(nbytes // 4, dtype=torch.float32)  # (empty() may hold NaN bit patterns)
    s_a, s_b = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s_a):
        dst_a = torch.empty(nbytes // 4, device="neuron")
    with torch.neuron.stream(s_b):
        dst_b = torch.empty(nbytes // 4, device="neuron")
    align(s_a, s_b)
    a0, b0 = timed_event(), timed_event()
    a0.record(s_a)
    b0.record(s_b)
    t0 = torch.neuron.simulated_time_ns()

    with torch.neuron.stream(s_a):
        dst_a.copy_(host)
    a1, b1 = timed_event(), timed_event()
    a1.record(s_a)
    b1.record(s_b)
    t1 = torch.neuron.simulated_time_ns()
    assert a0.elapsed_time(a1) == pytest.approx(upload_ms(nbytes), rel=0.05)
    assert b0.elapsed_time(b1) == pytest.approx(RECORD_MS)
    assert t0 <= t1 <= t0 + upload_ms(nbytes) * 1e6 * 1.05

    with torch.neuron.stream(s_b):
        dst_b.copy_(host)
        dst_b.copy_(host)
    a2, b2 = timed_event(), timed_event()
    a2.record(s_a)
    b2.record(s_b)
    assert a1.elapsed_time(a2) == pytest.approx(RECORD_MS)
    # s_b's first copy waits for the core's DMA queues, busy with s_a's copy (Note [Shared
    # engines]), then both run: three uploads from b1.
    assert b1.elapsed_time(b2) == pytest.approx(3 * upload_ms(nbytes), rel=0.05)
    assert torch.equal(dst_a.cpu(), host) and torch.equal(dst_b.cpu(), host)


def test_copies_on_two_streams_share_the_dma_queues():
    # In a fresh process every clock starts at 0, so absolute device times can be checked.
    # Uploads on two streams take turns on the core's DMA queues (Note [Shared engines]).
    out = run_python_json("""
        import json, torch
        host = torch.empty(1 << 20)                     # 4 MiB
        s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
        with torch.neuron.stream(s1):
            d1 = torch.empty(1 << 20, device="neuron")
        with torch.neuron.stream(s2):
            d2 = torch.empty(1 << 20, device="neuron")
        t = [torch.neuron.simulated_time_ns()]
        with torch.neuron.stream(s1):
            d1.copy_(host)
        t.append(torch.neuron.simulated_time_ns())
        with torch.neuron.stream(s2):
            d2.copy_(host)
        t.append(torch.neuron.simulated_time_ns())
        with torch.neuron.stream(s2):
            d2.copy_(host)
        t.append(torch.neuron.simulated_time_ns())
        t.append(torch.neuron.simulated_time_ns(1))     # another device saw no work
        print(json.dumps(t))
    """)
    one = upload_ms(4 * MiB) * 1e6
    assert out[0] == 0
    assert out[1] == pytest.approx(one, rel=1e-6)
    assert out[2] == pytest.approx(2 * one, rel=1e-6)   # waited for the first copy's DMA
    assert out[3] == pytest.approx(3 * one, rel=1e-6)
    assert out[4] == 0


def test_simulated_time_is_per_device_and_monotonic():
    before = [torch.neuron.simulated_time_ns(i) for i in range(4)]
    torch.randn(MiB).to("neuron:2")
    after = [torch.neuron.simulated_time_ns(i) for i in range(4)]
    assert after[2] > before[2]
    assert [after[i] for i in (0, 1, 3)] == [before[i] for i in (0, 1, 3)]
    assert torch.neuron.simulated_time_ns("neuron:2") == after[2]


# Cross-stream dependencies ------------------------------------------------------------------


def busy_stream_pair(nbytes=4 * MiB):
    """Two streams where `ahead` has just done one upload that `behind` has not waited for.
    Returns (ahead, behind, an event at the end of ahead's work, a host tensor, and a neuron
    destination allocated on `behind` for more work)."""
    host = torch.empty(nbytes // 4)
    ahead, behind = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(ahead):
        dst_a = torch.empty(nbytes // 4, device="neuron")
    with torch.neuron.stream(behind):
        dst_b = torch.empty(nbytes // 4, device="neuron")
    align(ahead, behind)
    with torch.neuron.stream(ahead):
        dst_a.copy_(host)
    done, before_wait = timed_event(), timed_event()
    done.record(ahead)
    before_wait.record(behind)
    assert before_wait.elapsed_time(done) == pytest.approx(upload_ms(nbytes), rel=0.05)
    return ahead, behind, done, host, dst_b


def test_wait_event_orders_later_work_after_the_event():
    ahead, behind, done, host, dst_b = busy_stream_pair()
    behind.wait_event(done)
    after_wait = timed_event()
    after_wait.record(behind)
    assert done.elapsed_time(after_wait) == pytest.approx(RECORD_MS)
    with torch.neuron.stream(behind):
        dst_b.copy_(host)
    end = timed_event()
    end.record(behind)
    assert done.elapsed_time(end) == pytest.approx(upload_ms(4 * MiB), rel=0.05)


def test_event_wait_is_stream_wait_event():
    ahead, behind, done, host, dst_b = busy_stream_pair()
    done.wait(behind)
    after = timed_event()
    after.record(behind)
    assert done.elapsed_time(after) >= 0


def test_wait_stream_orders_later_work_after_the_other_stream():
    ahead, behind, done, host, dst_b = busy_stream_pair()
    behind.wait_stream(ahead)
    with torch.neuron.stream(behind):
        dst_b.copy_(host)
    end = timed_event()
    end.record(behind)
    assert done.elapsed_time(end) == pytest.approx(upload_ms(4 * MiB), rel=0.05)


def test_waiting_never_moves_a_clock_backwards():
    ahead, behind, done, host, dst_b = busy_stream_pair()
    early = timed_event()
    early.record(behind)      # earlier than `done`
    ahead.wait_event(early)   # ahead is already later: no change
    later = timed_event()
    later.record(ahead)
    assert done.elapsed_time(later) == pytest.approx(RECORD_MS)


# record_stream ------------------------------------------------------------------------------


def test_record_stream_delays_reuse_of_the_block():
    torch.neuron.empty_cache()
    nbytes = 3 * MiB + 7 * 512   # a size no other test caches
    side = torch.neuron.Stream()
    host = torch.empty(MiB)
    with torch.neuron.stream(side):
        side_dst = torch.empty(MiB, device="neuron")
    x = torch.empty(nbytes, dtype=torch.uint8, device="neuron")  # on the default stream
    x.record_stream(side)
    align(side, torch.neuron.current_stream())
    start = timed_event()
    start.record()
    with torch.neuron.stream(side):
        side_dst.copy_(host)   # work on `side` that (pretend) uses x
        side_dst.copy_(host)
    ptr = x.data_ptr()
    del x
    y = torch.empty(nbytes, dtype=torch.uint8, device="neuron")  # reuses x's cached block
    assert y.data_ptr() == ptr
    end = timed_event()
    end.record()
    # The default stream did no work itself, but may only reuse the block after `side` is done.
    assert start.elapsed_time(end) == pytest.approx(2 * upload_ms(4 * MiB), rel=0.05)


def test_cached_blocks_are_kept_per_stream():
    """Note [Caching HBM allocator]: as CUDA's, a block freed on one stream serves later
    allocations on that stream only: another stream gets a new segment and does not wait for
    the first stream's work; the first stream reuses the block (split: Note [Split blocks])."""
    torch.neuron.empty_cache()
    side = torch.neuron.Stream()
    host = torch.empty(MiB)
    x = torch.empty(6 * MiB + 11 * 512, dtype=torch.uint8, device="neuron")
    dst = torch.empty(MiB, device="neuron")
    align(side, torch.neuron.current_stream())
    start = timed_event(), timed_event()
    start[0].record()
    start[1].record(side)
    dst.copy_(host)  # work on the default stream, queued before x is freed
    ptr = x.data_ptr()
    del x
    segments = torch.neuron.memory_stats()["num_device_alloc"]
    with torch.neuron.stream(side):
        y = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
        end = timed_event()
        end.record()
    assert y.data_ptr() != ptr
    assert torch.neuron.memory_stats()["num_device_alloc"] == segments + 1
    assert start[1].elapsed_time(end) == pytest.approx(RECORD_MS)  # no wait
    z = torch.empty(3 * MiB, dtype=torch.uint8, device="neuron")
    assert z.data_ptr() == ptr
    assert torch.neuron.memory_stats()["num_device_alloc"] == segments + 1
    del y, z


def test_without_record_stream_reuse_does_not_wait():
    torch.neuron.empty_cache()
    nbytes = 3 * MiB + 9 * 512
    side = torch.neuron.Stream()
    host = torch.empty(MiB)
    with torch.neuron.stream(side):
        side_dst = torch.empty(MiB, device="neuron")
    x = torch.empty(nbytes, dtype=torch.uint8, device="neuron")
    align(side, torch.neuron.current_stream())
    start = timed_event()
    start.record()
    with torch.neuron.stream(side):
        side_dst.copy_(host)
    del x
    y = torch.empty(nbytes, dtype=torch.uint8, device="neuron")
    end = timed_event()
    end.record()
    assert start.elapsed_time(end) == pytest.approx(RECORD_MS)
    del y


def test_record_stream_on_other_device_stream_raises():
    x = torch.empty(10, device="neuron:0")
    with pytest.raises(RuntimeError):
        x.record_stream(torch.neuron.Stream(device=1))


# synchronize --------------------------------------------------------------------------------


def test_synchronize():
    x = torch.randn(1000).to("neuron:1")
    torch.neuron.synchronize()
    torch.neuron.synchronize(1)
    torch.neuron.synchronize("neuron:2")
    torch.neuron.synchronize(torch.device("neuron", 3))
    torch.accelerator.synchronize()
    torch.accelerator.synchronize(1)
    assert x.cpu().shape == (1000,)
