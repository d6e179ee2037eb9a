"""core_barrier and sendrecv between the two programs of kernel[2] (Note [Programs that wait for
each other] in torch_neuron/nki/cores.py), as the release's docstrings use them."""

import inspect
import threading

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

RNG = np.random.default_rng(5)


def exchange_halves(x):
    """sendrecv's ring example with two cores: each loads its half and swaps it with the
    other's, then stores what it received into the other half of a shared output."""
    rank = nl.program_id()
    other = (rank + 1) % 2
    rows = x.shape[0] // 2
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    mine = nl.ndarray((rows, x.shape[1]), nl.float32)
    nisa.dma_copy(dst=mine, src=x[rank * rows:(rank + 1) * rows])
    received = nl.ndarray((rows, x.shape[1]), nl.float32)
    nisa.sendrecv(src=mine, dst=received, send_to_rank=other, recv_from_rank=other, pipe_id=0)
    nisa.dma_copy(dst=out[rank * rows:(rank + 1) * rows], src=received)
    return out


def barrier_then_read(x):
    """core_barrier's example: each core writes half of a shared tensor, waits at the barrier,
    then reads the whole tensor (and returns its sum on every row)."""
    rank = nl.program_id()
    rows = x.shape[0] // 2
    shared = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    half = nl.ndarray((rows, x.shape[1]), nl.float32)
    nisa.dma_copy(dst=half, src=x[rank * rows:(rank + 1) * rows])
    nisa.tensor_scalar(dst=half, data=half, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=shared[rank * rows:(rank + 1) * rows], src=half)
    nisa.core_barrier(data=shared, cores=(0, 1))
    whole = nl.ndarray(x.shape, nl.float32)
    nisa.dma_copy(dst=whole, src=shared)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    total = nl.ndarray(x.shape, nl.float32)
    nisa.tensor_scalar(dst=total, data=whole, op0=nl.add, operand0=0.0)
    nisa.dma_copy(dst=out[rank * rows:(rank + 1) * rows],
                  src=total[(1 - rank) * rows:(2 - rank) * rows])
    return out


def test_sendrecv_swaps_the_two_cores_tiles():
    x = RNG.uniform(-1, 1, size=(64, 32)).astype(np.float32)
    run = nki.jit(exchange_halves, platform_target="trn2")[2].run(x)
    np.testing.assert_array_equal(run.result, np.concatenate([x[32:], x[:32]]))
    exchanges = [r for r in run.records if r.name == "sendrecv"]
    assert sorted(r.core for r in exchanges) == [0, 1] and all(r.engine == "DMA"
                                                               for r in exchanges)
    # Each core's exchange starts a phase (Note [Core barriers]): a wait record per core.
    assert sorted(r.core for r in run.records if r.name == "sendrecv_wait") == [0, 1]


def test_sendrecv_carries_unwritten_padding_as_unwritten():
    # AWS's attention_tkg exchanges a buffer padded to 32 rows of which it wrote 20 and reads
    # back only those (Note [Results of unwritten memory]).
    x = RNG.uniform(-1, 1, size=(2, 20, 1)).astype(np.float32)

    def kernel(x, read_padding):
        pid = nl.program_id(0)
        out = nl.ndarray((2, 20, 1), nl.float32, buffer=nl.shared_hbm)
        mine = nl.ndarray((32, 1), nl.float32)
        nisa.dma_copy(dst=mine[0:20, :], src=x[pid])
        theirs = nl.ndarray((32, 1), nl.float32)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid,
                      pipe_id=0)
        nisa.dma_copy(dst=out[pid], src=theirs[8:28, :] if read_padding else theirs[0:20, :])
        return out

    np.testing.assert_array_equal(nki.jit(kernel, platform_target="trn2")[2](x, False),
                                  x[::-1])
    with pytest.raises(nki.UninitializedReadError):
        nki.jit(kernel, platform_target="trn2")[2](x, True)


def test_core_barrier_lets_each_core_read_the_others_writes():
    x = RNG.uniform(-1, 1, size=(64, 32)).astype(np.float32)
    kernel = nki.jit(barrier_then_read, platform_target="trn2")[2]
    # Each core returns the other core's half, which it could read only after the barrier.
    np.testing.assert_array_equal(kernel(x), np.concatenate([2 * x[32:], 2 * x[:32]]))


def slow_writer(x):
    """Core 0 works on its tile before storing it; core 1 reads it after the barrier."""
    rank = nl.program_id()
    shared = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, nl.float32)
    nisa.dma_copy(dst=t, src=x)
    if rank == 0:
        for _ in range(20):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=1.5)
        nisa.dma_copy(dst=shared, src=t)
    nisa.core_barrier(data=shared, cores=(0, 1))
    seen = nl.ndarray(x.shape, nl.float32)
    nisa.dma_copy(dst=seen, src=shared)
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    if rank == 1:
        nisa.dma_copy(dst=out, src=seen)
    return out


def test_a_barrier_starts_both_cores_next_work_after_the_slower_one():
    # Note [Core barriers] (trnsim kernel_schedule.h): core 1's read of the shared tensor waits
    # for core 0's store, 20 multiplies later; each core has one core_barrier record there.
    x = np.ones((64, 512), np.float32)
    kernel = nki.jit(slow_writer, platform_target="trn2")[2]
    np.testing.assert_allclose(kernel(x), np.full(x.shape, 1.5 ** 20), rtol=1e-5)
    p = nki.profile(kernel, x)
    lines, first = inspect.getsourcelines(slow_writer)
    line = {text.strip(): first + n for n, text in enumerate(lines)}
    at = {(r.core, int(r.source.rsplit(":", 1)[1])): p.instruction(i)
          for i, r in enumerate(p.records)}
    store = at[(0, line["nisa.dma_copy(dst=shared, src=t)"])]
    read = at[(1, line["nisa.dma_copy(dst=seen, src=shared)"])]
    assert store.end_us > 10 and read.start_us >= store.end_us
    assert sorted(r.core for r in p.records if r.name == "core_barrier") == [0, 1]


def test_programs_that_never_meet_are_an_error_not_a_hang():
    def lopsided(x):
        shared = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=shared, src=x)
        if nl.program_id() == 0:
            nisa.core_barrier(data=shared, cores=(0, 1))
        return shared

    x = np.ones((4, 4), np.float32)
    before = threading.active_count()
    with pytest.raises(nki.NkiValidationError, match="ended without reaching"):
        nki.jit(lopsided, platform_target="trn2")[2](x)
    with pytest.raises(nki.NkiValidationError, match=r"kernel\[2\]"):
        nki.jit(barrier_then_read, platform_target="trn2")(np.ones((8, 4), np.float32))
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v3"):
        nki.jit(barrier_then_read, platform_target="trn1")(np.ones((8, 4), np.float32))
    assert threading.active_count() == before   # no program thread left behind
