"""Virtual registers and dynamic loops (torch_neuron/nki/registers.py), run with the examples of
the release's docstrings (aws-neuron-sdk nki/api/nki/language and isa stubs) against NumPy."""

import numpy as np
import pytest
import torch

import torch_neuron
import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

N = 16


def copy_prefix(data, ub_input):
    """fori_loop's docstring example: copy the first ub elements one by one, the bound loaded
    from memory into a register, each element addressed through the loop register."""
    output = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.shared_hbm)
    ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ub_sb, src=ub_input)
    ub_reg = nisa.register_alloc()
    nisa.register_load(ub_reg, ub_sb)
    nisa.dma_copy(dst=output, src=nl.zeros((1, N), dtype=nl.float32, buffer=nl.sbuf))
    temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1),
                      src=temp)

    nl.fori_loop(0, ub_reg, body)
    return output


def count_down(data, count_input):
    """while_loop's docstring example: add data to an accumulator `count` times."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    count_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_sb, src=count_input)
    one_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one_sb, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
        nisa.register_load(r, count_sb)
        return r

    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_fori_loop_with_a_bound_loaded_into_a_register():
    data = np.arange(N, dtype=np.float32).reshape(1, N) * 1.5
    for bound in (0, 5, N):
        want = np.zeros((1, N), np.float32)
        want[0, :bound] = data[0, :bound]
        run = nki.run(copy_prefix, data, np.array([[bound]], np.int32))
        np.testing.assert_array_equal(run.result, want)
        assert sum(r.name == "dma_copy" for r in run.records) == 2 + 2 * bound
    # Each element's load reads the register's source tile: it waits for the bound's load.
    p = nki.profile(copy_prefix, data, np.array([[3]], np.int32))
    bound_load = p.instruction(0)
    assert all(p.instruction(i).start_us >= bound_load.end_us
               for i, r in enumerate(p.records) if i > 1 and r.name == "dma_copy"
               and r.reads and r.reads[0].space != "sbuf")


def test_while_loop_and_register_moves_and_stores():
    out = nki.simulate(count_down)(np.array([[2.5]], np.float32), np.array([[4]], np.int32))
    np.testing.assert_array_equal(out, [[10.0]])
    assert nki.simulate(count_down)(np.array([[2.5]], np.float32),
                                    np.array([[0]], np.int32))[0, 0] == 0.0

    def moves():
        a = nisa.register_alloc(7)
        b = nisa.register_alloc()
        nisa.register_move(b, a)
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(t, b)
        nisa.dma_copy(dst=out, src=t)
        total = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        for _ in nl.dynamic_range(b):   # seven iterations
            nisa.tensor_scalar(dst=total, data=total, op0=nl.add, operand0=1.0)
        out2 = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out2, src=total)
        return out, out2

    stored, total = nki.simulate(moves)()
    assert stored[0, 0] == 7 and total[0, 0] == 7.0


def test_registers_refuse_python_numbers_and_endless_loops(monkeypatch):
    def python_int():
        return int(nisa.register_alloc(1))

    with pytest.raises(TypeError, match="not as a number"):
        nki.simulate(python_int)()

    # The stub's bare `while reg:` (its VirtualRegister example): the body reloads the
    # register from a tile it counts down.
    def bare_while():
        cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=cond, value=3)
        passes = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=passes, value=0.0)
        reg = nisa.register_alloc()
        nisa.register_load(reg, cond)
        while reg:
            nisa.tensor_scalar(dst=passes, data=passes, op0=nl.add, operand0=1.0)
            nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
            nisa.register_load(reg, cond)
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=passes)
        return out

    np.testing.assert_array_equal(nki.simulate(bare_while)(), [[3.0]])

    def endless_bare():
        reg = nisa.register_alloc(1)
        while reg:
            pass

    from torch_neuron.nki.virtual_register import VirtualRegister
    monkeypatch.setattr(VirtualRegister, "TESTS_LIMIT", 50)
    with pytest.raises(nki.UnsupportedError, match="tested 50 times"):
        nki.simulate(endless_bare)()

    def endless():
        nl.while_loop(nisa.register_alloc(1), lambda r: r)

    from torch_neuron.nki import registers
    monkeypatch.setattr(registers, "WHILE_LOOP_LIMIT", 50)
    with pytest.raises(nki.UnsupportedError, match="50 iterations"):
        nki.simulate(endless)()


def test_predict_only_runs_immediate_bounds_and_refuses_loaded_ones():
    data = torch.zeros(1, N).to("neuron")
    bound = torch.tensor([[4]], dtype=torch.int32).to("neuron")
    with torch_neuron.predict_only(), pytest.raises(nki.UnsupportedError,
                                                    match="predict-only"):
        nki.simulate(copy_prefix)(data, bound)

    def immediate(d):
        out = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=d)
        nl.fori_loop(0, nisa.register_alloc(3), lambda i: nisa.tensor_scalar(
            dst=t, data=t, op0=nl.multiply, operand0=2.0))
        nisa.dma_copy(dst=out, src=t)
        return out

    with torch_neuron.predict_only():
        assert nki.simulate(immediate)(data).shape == (1, N)
    np.testing.assert_array_equal(nki.simulate(immediate)(np.ones((1, N), np.float32)),
                                  np.full((1, N), 8.0))


def test_dynamic_loop_indices_address_and_no_reorder_cannot_wrap_the_loop():
    # nki-dynamic-loops.rst: the loop index as a scalar_offset, and no_reorder around a
    # dynamic_range "is NOT supported and will error" (inside the body it is fine).
    x = np.arange(4 * N, dtype=np.float32).reshape(4, N)

    def gather_rows(a):
        out = nl.ndarray((4, N), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.dynamic_range(nisa.register_alloc(4)):
            t = nl.ndarray((1, N), dtype=nl.float32, buffer=nl.sbuf)
            with nl.no_reorder():
                nisa.dma_copy(dst=t, src=a.ap([[N, 1], [1, N]], scalar_offset=i,
                                              indirect_dim=0))
                nisa.dma_copy(dst=out[i:i + 1, :], src=t)
        return out

    np.testing.assert_array_equal(nki.simulate(gather_rows)(x), x)

    def wrapped(a):
        with nl.no_reorder():
            for _ in nl.dynamic_range(nisa.register_alloc(2)):
                pass

    with pytest.raises(nki.NkiValidationError, match="inside nl.no_reorder"):
        nki.simulate(wrapped)(x)
