"""The differential fuzzer (test/fuzz): a bounded smoke run with fixed seeds must find no
unexplained difference between neuron and the CPU, and the fuzzer must really catch planted
differences (values, dtypes, strides, exceptions, mutated inputs, aliasing, gradients) and
shrink them to smaller programs."""

import os
import subprocess
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from fuzz import explained, known_open  # noqa: E402
from fuzz.generator import generate  # noqa: E402
from fuzz.program import Program, Step, reproducer  # noqa: E402
from fuzz.run import SMOKE_PROGRAMS, SMOKE_START, run_many  # noqa: E402
from fuzz.runner import run_program  # noqa: E402
from fuzz.shrink import shrink  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))  # the repository


def test_smoke_finds_no_unexplained_mismatch():
    # Exactly the seeds of the open bugs listed in fuzz/known_open.py mismatch: a new mismatch
    # fails, and so does a fixed bug whose seeds are still listed.
    log = []
    summary = run_many(range(SMOKE_START, SMOKE_START + SMOKE_PROGRAMS), do_shrink=False,
                       log=log.append)
    assert summary.programs == SMOKE_PROGRAMS
    assert not summary.errors, f"harness errors: {summary.errors}"
    new = [(seed, text) for seed, _, text in summary.mismatches if seed not in known_open.OPEN]
    details = "\n\n".join(f"seed {seed}:\n{text}" for seed, text in new[:5])
    assert not new, f"{len(new)} unexplained mismatches\n{summary.report()}\n\n{details}"
    fixed = set(known_open.OPEN) - {seed for seed, _, _ in summary.mismatches}
    assert not fixed, f"seeds that no longer mismatch (remove them from known_open.py): {fixed}"


def test_programs_are_reproducible_from_their_seed():
    for seed in (1, 17, 12345):
        assert generate(seed).text() == generate(seed).text()
    assert generate(1).text() != generate(2).text()


def test_explained_differences_have_reasons():
    ids = [e.id for e in explained.ENTRIES]
    assert len(ids) == len(set(ids))
    for entry in explained.ENTRIES:
        assert entry.reason and entry.source, entry.id


# --- planted differences -------------------------------------------------------------------

def _input(name, dtype, shape, seed, grad=False):
    return Step([name], "", (), kind="input", label="make",
                params={"dtype": dtype, "shape": shape, "seed": seed, "dist": "normal", "grad": grad})


def _program(target, grad=False):
    """Several unrelated steps around one call of `target` (on v2)."""
    steps = [
        _input("v0", "float32", (4, 5), 11, grad),
        _input("v1", "int64", (3,), 12),
        Step(["v2"], "{0}.exp()", ["v0"], label="exp"),
        Step(["v3"], "{0} * 2", ["v1"], label="mul.op"),
        Step(["v4"], "torch.cumsum({0}, 0)", ["v3"], label="cumsum"),
        Step(["v5"], target, ["v2"], label="target"),
        Step(["v6"], "{0}.sum()", ["v4"], label="sum"),
        Step(["v7"], "{0}[1:, ::2]", ["v0"], label="slice"),
        Step(["v8"], "torch.relu({0})", ["v7"], label="relu"),
    ]
    if grad:
        steps += [Step(["v9"], "{0}.float().square().sum()", ["v5"], label="loss"),
                  Step(["v10"], "torch.autograd.grad({0}, [{1}], allow_unused=True)", ["v9", "v0"],
                       kind="grad", label="grad")]
    return Program(0, steps, False)


def _on_neuron(t):
    return isinstance(t, torch.Tensor) and t.device.type == "neuron"


def _plant(kind):
    real_sigmoid, real_transpose = torch.sigmoid, torch.transpose

    def sigmoid(x, *args, **kwargs):
        out = real_sigmoid(x, *args, **kwargs)
        if not _on_neuron(x):
            return out
        if kind == "value":
            out = out.clone()
            out.view(-1)[3] += 1e-3
        elif kind == "dtype":
            out = out.double()
        elif kind == "stride":
            out = out.t().contiguous().t()
        elif kind == "exception":
            raise ValueError("planted")
        elif kind == "mutation":
            with torch.no_grad():
                x.view(-1)[0] = 0.0
        elif kind == "grad" and out.requires_grad:
            out.register_hook(lambda g: g * 2)  # same grad_fn, wrong gradient
        return out

    def transpose(x, *args):
        out = real_transpose(x, *args)
        return out.clone() if kind == "alias" and _on_neuron(x) else out

    return sigmoid, transpose


@pytest.mark.parametrize("kind,target,category", [
    ("value", "torch.sigmoid({0})", "value"),
    ("dtype", "torch.sigmoid({0})", "dtype"),
    ("stride", "torch.sigmoid({0})", "stride"),
    ("exception", "torch.sigmoid({0})", "exception"),
    ("mutation", "torch.sigmoid({0})", "value"),
    ("alias", "torch.transpose({0}, 0, 1)", "alias"),
    ("grad", "torch.sigmoid({0})", "grad"),
])
def test_a_planted_difference_is_caught_and_shrunk(monkeypatch, kind, target, category):
    program = _program(target, grad=kind == "grad")
    assert run_program(program).ok  # unpatched, the program runs the same on both devices

    sigmoid, transpose = _plant(kind)
    monkeypatch.setattr(torch, "sigmoid", sigmoid)
    monkeypatch.setattr(torch, "transpose", transpose)
    result = run_program(program)
    m = result.mismatch
    assert m is not None, f"planted {kind} difference not caught"
    assert m.category == category, str(m)
    assert m.explained_by is None
    if kind == "mutation":
        assert m.names == {"v2"}  # the argument the op changed on neuron only

    small, small_m = shrink(program, m, budget=200)
    assert small_m.signature() == m.signature()
    assert len(small.steps) < len(program.steps)
    assert "v5 = " + target.split("{")[0] in small.text()  # the planted op survives
    assert len(small.steps) <= (5 if kind == "grad" else 3), small.text()
    compile(reproducer(small, small_m), "<reproducer>", "exec")


def test_a_planted_difference_fails_the_smoke_loop(monkeypatch):
    real_add = torch.Tensor.__add__

    def add(a, b):
        out = real_add(a, b)
        if _on_neuron(out) and out.is_floating_point() and out.numel():
            out = out.clone()
            out.view(-1)[0] += 1.0
        return out

    monkeypatch.setattr(torch.Tensor, "__add__", add)
    summary = run_many(range(SMOKE_START, SMOKE_START + 60), do_shrink=False, log=lambda s: None)
    assert summary.mismatches, "a wrong `+` on neuron went unnoticed by 60 programs"


def test_an_unexplained_difference_is_not_explained_by_the_float64_policy(monkeypatch):
    # A float64 program whose neuron result is off by far more than float32 rounding.
    real_exp = torch.Tensor.exp

    def exp(x):
        out = real_exp(x)
        return out * 1.001 if _on_neuron(x) else out

    monkeypatch.setattr(torch.Tensor, "exp", exp)
    steps = [_input("v0", "float64", (3,), 5), Step(["v1"], "{0}.exp()", ["v0"], label="exp")]
    result = run_program(Program(0, steps, True))
    assert result.mismatch is not None and result.mismatch.category == "value"


def test_replay_command_line():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "test", "fuzz", "run.py"), "--programs", "3",
                          "--start-seed", str(SMOKE_START)], capture_output=True, text=True, timeout=300)
    assert "3 programs" in out.stdout, out.stdout + out.stderr
