"""The caching HBM allocator seen through torch.neuron.memory_* and torch.accelerator.memory_*:
statistics, the cache, mem_get_info, out-of-memory errors and the free-cache-and-retry path.

Big allocations use torch.empty and are never written: simulated HBM is committed by the OS only
when touched, so they cost no host RAM."""

import gc

import pytest
import torch

GiB = 1 << 30
ALIGN = 512  # every HBM block is a multiple of 512 bytes


def rounded(nbytes):
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


@pytest.fixture(autouse=True)
def clean_cache():
    # Earlier tests may leave neuron tensors in reference cycles (autograd graphs, compiled
    # functions); a collection during a test would free them between two readings.
    gc.collect()
    torch.neuron.empty_cache()
    yield
    torch.neuron.empty_cache()


@pytest.mark.parametrize("nbytes", [1, 511, 512, 513, 4000, 1 << 20, (1 << 20) + 3, 10 << 20])
def test_memory_allocated_grows_by_rounded_size_and_drops_on_free(nbytes):
    before = torch.neuron.memory_allocated()
    t = torch.empty(nbytes, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - before == rounded(nbytes)
    assert torch.neuron.memory_allocated(0) == torch.neuron.memory_allocated()
    del t
    assert torch.neuron.memory_allocated() == before


def test_zero_size_tensor_allocates_nothing():
    before = torch.neuron.memory_allocated()
    t = torch.empty(0, 5, device="neuron")
    assert torch.neuron.memory_allocated() == before
    del t


def test_allocation_is_per_device():
    before = [torch.neuron.memory_allocated(i) for i in range(4)]
    t = torch.empty(1000, device="neuron:2")
    after = [torch.neuron.memory_allocated(i) for i in range(4)]
    assert after[2] - before[2] == rounded(4000)
    assert [after[i] for i in (0, 1, 3)] == [before[i] for i in (0, 1, 3)]
    with torch.neuron.device(2):
        assert torch.neuron.memory_allocated() == after[2]
    assert torch.neuron.memory_allocated("neuron:2") == after[2]
    del t


def test_reserved_stays_cached_until_empty_cache():
    reserved0 = torch.neuron.memory_reserved()
    t = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() - reserved0 == 3 << 20
    del t
    # Freed, but the allocator keeps the block for reuse.
    assert torch.neuron.memory_reserved() - reserved0 == 3 << 20
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == reserved0
    # With the cache empty, every reserved byte belongs to a live tensor.
    assert torch.neuron.memory_reserved() == torch.neuron.memory_allocated()


def test_cached_block_is_reused():
    t = torch.empty(5 << 20, dtype=torch.uint8, device="neuron")
    ptr = t.data_ptr()
    del t
    stats0 = torch.neuron.memory_stats()
    u = torch.empty(5 << 20, dtype=torch.uint8, device="neuron")
    stats1 = torch.neuron.memory_stats()
    assert u.data_ptr() == ptr
    assert stats1["num_device_alloc"] == stats0["num_device_alloc"]  # no new HBM block
    assert stats1["reserved_bytes.all.current"] == stats0["reserved_bytes.all.current"]
    del u


MiB = 1 << 20


def segments():
    return torch.neuron.memory_stats()["num_device_alloc"]


def test_a_larger_cached_block_is_split_and_merged_again():
    """Note [Split blocks]: a 12 MiB request served by a cached 16 MiB block counts 12 MiB, the
    other 4 MiB stay cached for the next request, and the two merge again when freed."""
    t = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    base = t.data_ptr()
    del t
    allocated, reserved, segments0 = (torch.neuron.memory_allocated(),
                                      torch.neuron.memory_reserved(), segments())
    head = torch.empty(12 * MiB, dtype=torch.uint8, device="neuron")
    assert head.data_ptr() == base
    assert torch.neuron.memory_allocated() - allocated == 12 * MiB
    rest = torch.empty(4 * MiB, dtype=torch.uint8, device="neuron")
    assert rest.data_ptr() == base + 12 * MiB
    assert torch.neuron.memory_allocated() - allocated == 16 * MiB
    assert (torch.neuron.memory_reserved(), segments()) == (reserved, segments0)
    del rest  # cached, but part of a segment in use: CUDA's "non-releasable" memory
    split = torch.neuron.memory_stats()
    assert split["inactive_split_bytes.all.current"] == 4 * MiB
    assert split["inactive_split.large_pool.current"] == 1
    del head
    assert torch.neuron.memory_stats()["inactive_split_bytes.all.current"] == 0
    whole = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")  # merged: fits again
    assert whole.data_ptr() == base
    assert (torch.neuron.memory_reserved(), segments()) == (reserved, segments0)
    del whole


def test_a_small_rest_stays_part_of_the_allocation():
    """A large block's rest of at most 1 MiB is not split off (CUDA's threshold): the
    allocation counts the whole block. In the small pool any rest of 512 bytes is split."""
    t = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    del t
    allocated = torch.neuron.memory_allocated()
    u = torch.empty(15 * MiB + MiB // 2, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - allocated == 16 * MiB
    del u
    small = torch.empty(64 << 10, dtype=torch.uint8, device="neuron")
    del small
    segments0 = segments()
    a = torch.empty(1000, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - allocated == rounded(1000)
    b = torch.empty((64 << 10) - rounded(1000), dtype=torch.uint8, device="neuron")
    assert b.data_ptr() == a.data_ptr() + rounded(1000)
    assert segments() == segments0
    del a, b


def test_pools_do_not_share_blocks():
    """Small requests (up to 1 MiB) never split a large segment, nor large ones a small."""
    large = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    del large
    segments0, reserved = segments(), torch.neuron.memory_reserved()
    small = torch.empty(4096, dtype=torch.uint8, device="neuron")
    assert segments() == segments0 + 1
    assert torch.neuron.memory_reserved() - reserved == 4096
    del small


def test_empty_cache_releases_only_whole_segments():
    t = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    del t
    reserved = torch.neuron.memory_reserved()
    head = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    torch.neuron.empty_cache()  # the free 8 MiB belong to a segment still in use
    assert torch.neuron.memory_reserved() == reserved
    del head
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == reserved - 16 * MiB


def test_memory_snapshot_shows_segments_and_their_blocks():
    """torch.cuda.memory_snapshot()'s format: a split 16 MiB segment is one segment of two
    blocks, the allocated one and the cached rest; over all segments of a device the sizes
    add up to memory_reserved and memory_allocated."""
    t = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
    base = t.data_ptr()
    del t
    head = torch.empty(12 * MiB - 100, dtype=torch.uint8, device="neuron")
    (segment,) = [s for s in torch.neuron.memory_snapshot() if s["address"] == base]
    assert (segment["device"], segment["total_size"], segment["segment_type"]) == (
        torch.neuron.current_device(), 16 * MiB, "large")
    assert [(b["address"], b["size"], b["requested_size"], b["state"])
            for b in segment["blocks"]] == [
        (base, 12 * MiB, 12 * MiB - 100, "active_allocated"),
        (base + 12 * MiB, 4 * MiB, 0, "inactive")]
    assert (segment["allocated_size"], segment["requested_size"]) == (12 * MiB, 12 * MiB - 100)
    here = [s for s in torch.neuron.memory_snapshot()
            if s["device"] == torch.neuron.current_device()]
    assert sum(s["total_size"] for s in here) == torch.neuron.memory_reserved()
    assert sum(s["allocated_size"] for s in here) == torch.neuron.memory_allocated()
    del head


def test_memory_stats_as_nested_dict():
    t = torch.empty(1000, device="neuron")
    nested = torch.neuron.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.neuron.memory_allocated()
    assert nested["num_ooms"] == torch.neuron.memory_stats()["num_ooms"]
    del t


def test_caching_allocator_alloc_and_delete():
    before = torch.neuron.memory_allocated(1)
    side = torch.neuron.Stream(device="neuron:1")
    ptr = torch.neuron.caching_allocator_alloc(5000, device=1, stream=side)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.neuron.memory_allocated(1) - before == rounded(5000)
    torch.neuron.caching_allocator_delete(ptr)
    assert torch.neuron.memory_allocated(1) == before
    with pytest.raises(ValueError, match="caching_allocator_alloc returned"):
        torch.neuron.caching_allocator_delete(ptr)
    with pytest.raises(ValueError, match="non-negative int"):
        torch.neuron.caching_allocator_alloc(-1)


@pytest.mark.parametrize("old, new", [
    ("memory_cached", "memory_reserved"), ("max_memory_cached", "max_memory_reserved")])
def test_deprecated_names_warn_and_agree(old, new):
    t = torch.empty(1000, device="neuron")
    with pytest.warns(FutureWarning, match=new):
        assert getattr(torch.neuron, old)() == getattr(torch.neuron, new)()
    del t
    with pytest.warns(FutureWarning, match="reset_peak_memory_stats"):
        torch.neuron.reset_max_memory_allocated()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()


def check_segments(device):
    """The allocator's invariants, from memory_snapshot(): a segment's blocks tile it, no two
    free blocks sit side by side (a freed block merges with its free neighbours), and the
    statistics add up."""
    here = [s for s in torch.neuron.memory_snapshot() if s["device"] == device]
    for segment in here:
        address = segment["address"]
        previous_free = False
        for block in segment["blocks"]:
            assert block["address"] == address
            address += block["size"]
            free = block["state"] == "inactive"
            assert not (free and previous_free), segment
            previous_free = free
        assert address == segment["address"] + segment["total_size"]
    assert sum(s["total_size"] for s in here) == torch.neuron.memory_reserved(device)
    assert sum(s["allocated_size"] for s in here) == torch.neuron.memory_allocated(device)
    # Free blocks of split segments are the "non-releasable" (inactive split) bytes.
    assert sum(b["size"] for s in here if len(s["blocks"]) > 1 for b in s["blocks"]
               if b["state"] == "inactive") == (
        torch.neuron.memory_stats(device)["inactive_split_bytes.all.current"])


def test_random_allocations_from_threads_keep_the_allocator_consistent():
    """Four threads, each on a stream of its own (some blocks recorded on another stream),
    allocate and free random sizes in both pools; at the end everything is free again and the
    segments are consistent, before and after empty_cache."""
    import random
    import threading

    device = 2
    base = torch.neuron.memory_allocated(device)
    streams = [torch.neuron.Stream(device=f"neuron:{device}") for _ in range(4)]
    errors = []

    def work(seed):
        rng = random.Random(seed)
        live = []
        try:
            with torch.neuron.stream(streams[seed]):
                for _ in range(400):
                    if live and rng.random() < 0.45:
                        live.pop(rng.randrange(len(live)))
                        continue
                    size = rng.choice([rng.randrange(1, 1 << 20), rng.randrange(1, 24 << 20)])
                    t = torch.empty(size, dtype=torch.uint8, device=f"neuron:{device}")
                    if rng.random() < 0.1:
                        t.record_stream(streams[(seed + 1) % 4])
                    live.append(t)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert torch.neuron.memory_allocated(device) == base
    check_segments(device)
    torch.neuron.empty_cache()
    check_segments(device)
    if base == 0:  # nothing else lives on the device: every segment is whole and released
        stats = torch.neuron.memory_stats(device)
        assert stats["inactive_split_bytes.all.current"] == 0
        assert stats["reserved_bytes.all.current"] == 0


def test_peak_and_reset_peak_memory_stats():
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    t = torch.empty(8 << 20, dtype=torch.uint8, device="neuron")
    u = torch.empty(2 << 20, dtype=torch.uint8, device="neuron")
    del t, u
    assert torch.neuron.max_memory_allocated() == base + (10 << 20)
    assert torch.neuron.max_memory_reserved() >= base + (10 << 20)
    assert torch.neuron.memory_allocated() == base
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    assert torch.accelerator.max_memory_allocated() == base


def test_memory_stats_keys_and_consistency():
    t = torch.empty(1000, device="neuron")
    stats = torch.neuron.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                "allocated_bytes.all.allocated", "allocated_bytes.all.freed",
                "reserved_bytes.all.current", "active_bytes.all.current",
                "requested_bytes.all.current", "allocation.all.current", "segment.all.current",
                "allocated_bytes.small_pool.current", "allocated_bytes.large_pool.current",
                "num_alloc_retries", "num_ooms"):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved()
    assert stats["allocated_bytes.all.peak"] == torch.neuron.max_memory_allocated()
    assert (stats["allocated_bytes.all.allocated"] - stats["allocated_bytes.all.freed"]
            == stats["allocated_bytes.all.current"])
    assert stats == torch.accelerator.memory_stats(0)
    del t


def test_requested_bytes_are_not_rounded():
    before = torch.neuron.memory_stats()["requested_bytes.all.current"]
    t = torch.empty(1000, device="neuron")  # 4000 bytes, in a 4096-byte block
    assert torch.neuron.memory_stats()["requested_bytes.all.current"] - before == 4000
    del t


def test_small_and_large_pool_split():
    stats0 = torch.neuron.memory_stats()
    small = torch.empty(1000, dtype=torch.uint8, device="neuron")
    large = torch.empty(4 << 20, dtype=torch.uint8, device="neuron")
    stats1 = torch.neuron.memory_stats()

    def delta(key):
        return stats1[key] - stats0[key]

    assert delta("allocated_bytes.small_pool.current") == 1024
    assert delta("allocated_bytes.large_pool.current") == 4 << 20
    assert delta("allocated_bytes.all.current") == 1024 + (4 << 20)
    del small, large


def test_reset_accumulated_memory_stats():
    t = torch.empty(1000, device="neuron")
    del t
    assert torch.neuron.memory_stats()["allocated_bytes.all.allocated"] > 0
    torch.neuron.reset_accumulated_memory_stats()
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.allocated"] == 0
    assert stats["allocated_bytes.all.freed"] == 0
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()


def test_mem_get_info():
    free, total = torch.neuron.mem_get_info()
    assert total == 24 * GiB
    # Memory the allocator holds, live or cached, is not free.
    assert free == total - torch.neuron.memory_reserved()
    t = torch.empty(64 << 20, dtype=torch.uint8, device="neuron")
    free1, _ = torch.neuron.mem_get_info()
    assert free - free1 == 64 << 20
    del t
    assert torch.neuron.mem_get_info()[0] == free1  # cached
    torch.neuron.empty_cache()
    assert torch.neuron.mem_get_info() == (free, total)
    assert torch.accelerator.get_memory_info(0) == (free, total)
    assert torch.neuron.mem_get_info(3)[1] == 24 * GiB


def test_memory_summary():
    summary = torch.neuron.memory_summary()
    assert isinstance(summary, str)
    assert "neuron:0" in summary
    assert "neuron:1" in torch.neuron.memory_summary(1)
    assert "neuron:3" in torch.neuron.memory_summary("neuron:3", abbreviated=True)


def test_agrees_with_torch_accelerator():
    t = torch.empty(12345, device="neuron:1")
    for i in range(4):
        assert torch.accelerator.memory_allocated(i) == torch.neuron.memory_allocated(i)
        assert torch.accelerator.memory_reserved(i) == torch.neuron.memory_reserved(i)
        assert torch.accelerator.max_memory_allocated(i) == torch.neuron.max_memory_allocated(i)
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    del t


def test_resize_is_accounted():
    t = torch.empty(256, device="neuron")  # 1 KiB
    before = torch.neuron.memory_allocated()
    t.resize_(1 << 20)  # 4 MiB: a new block replaces the old one
    assert torch.neuron.memory_allocated() - before == (4 << 20) - 1024
    del t


# Out of memory ------------------------------------------------------------------------------


def test_out_of_memory_error_and_recovery():
    ooms = torch.neuron.memory_stats()["num_ooms"]
    allocated = torch.neuron.memory_allocated()
    # torch.neuron.OutOfMemoryError is torch.OutOfMemoryError, as torch.cuda's is.
    with pytest.raises(torch.neuron.OutOfMemoryError) as info:
        torch.empty(30 * GiB, dtype=torch.uint8, device="neuron")
    message = str(info.value)
    assert "30.00 GiB" in message  # requested
    assert "24.00 GiB" in message  # capacity
    assert "neuron:0" in message
    assert isinstance(info.value, RuntimeError)
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    assert torch.neuron.memory_allocated() == allocated
    # The device still allocates and computes.
    x = torch.randn(1000)
    n = x.to("neuron")
    assert torch.equal(n.cpu(), x)


def test_out_of_memory_on_other_device_names_it():
    with pytest.raises(torch.OutOfMemoryError, match="neuron:3"):
        torch.empty(25 * GiB, dtype=torch.uint8, device="neuron:3")


# The tests below fill a device; they use neuron:3, which the other tests leave empty, so that
# no live tensor splits its HBM into pieces.
BIG = "neuron:3"


def test_allocation_fills_device_exactly_then_fails():
    free, _ = torch.neuron.mem_get_info(BIG)
    big = torch.empty(free, dtype=torch.uint8, device=BIG)  # every free byte
    assert torch.neuron.mem_get_info(BIG)[0] == 0
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(1, dtype=torch.uint8, device=BIG)
    # Other devices are unaffected.
    assert torch.equal(torch.ones(4, device="neuron:1").cpu(), torch.ones(4))
    del big
    assert torch.equal(torch.ones(4, device=BIG).cpu(), torch.ones(4))


def test_retry_after_freeing_the_cache():
    retries = torch.neuron.memory_stats(BIG)["num_alloc_retries"]
    # ~20 GiB of freed blocks stay cached...
    blocks = [torch.empty(5 * GiB, dtype=torch.uint8, device=BIG) for _ in range(4)]
    del blocks
    assert torch.neuron.memory_reserved(BIG) >= 20 * GiB
    assert torch.neuron.memory_allocated(BIG) < GiB
    # ... so a 20 GiB request that no cached block fits exceeds the free HBM; the allocator
    # releases its cache and tries again.
    big = torch.empty(20 * GiB + 4096, dtype=torch.uint8, device=BIG)
    assert big.numel() == 20 * GiB + 4096
    assert torch.neuron.memory_stats(BIG)["num_alloc_retries"] == retries + 1
    assert torch.neuron.memory_reserved(BIG) < 21 * GiB  # the 5 GiB blocks are gone
    del big


@pytest.fixture
def full_fraction_after():
    yield
    for i in range(torch.neuron.device_count()):
        torch.neuron.set_per_process_memory_fraction(1.0, i)


def test_per_process_memory_fraction_limits_what_the_allocator_reserves(full_fraction_after):
    capacity = torch.neuron.mem_get_info(1)[1]
    # Whatever earlier tests still hold on neuron:1 counts toward the limit too.
    base = torch.neuron.memory_reserved(1)
    fraction = (base + capacity // 4) / capacity
    torch.neuron.set_per_process_memory_fraction(fraction, "neuron:1")
    assert torch.neuron.get_per_process_memory_fraction(1) == fraction
    assert torch.neuron.get_per_process_memory_fraction(0) == 1.0
    limit = capacity // 4
    a = torch.empty(limit - (1 << 20), dtype=torch.uint8, device="neuron:1")
    with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
        torch.empty(2 << 20, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.mem_get_info(1)[1] == capacity  # as with CUDA: the device is unchanged
    b = torch.empty(limit - (1 << 20), dtype=torch.uint8, device="neuron:0")  # other device: free
    del a
    # The freed block is cached (still reserved); a request larger than it makes the allocator
    # release its cache and retry, which now fits under the limit.
    c = torch.empty(limit - (1 << 19), dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_reserved(1) == base + rounded(limit - (1 << 19))
    del b, c
    torch.neuron.set_per_process_memory_fraction(1.0, 1)
    d = torch.empty(2 * limit, dtype=torch.uint8, device="neuron:1")
    del d


@pytest.mark.parametrize("fraction, error", [(1.5, ValueError), (-0.1, ValueError),
                                             (1, TypeError), ("0.5", TypeError)])
def test_per_process_memory_fraction_rejects_bad_values(fraction, error, full_fraction_after):
    with pytest.raises(error, match="fraction"):
        torch.neuron.set_per_process_memory_fraction(fraction)
    assert torch.neuron.get_per_process_memory_fraction() == 1.0
