"""0-dim CPU tensors beside neuron tensors, as CUDA allows: a 0-dim CPU tensor may stand in any
tensor position of an elementwise op (it is read as a scalar), in the functional, in-place and
out= forms (as the tensor an in-place op writes it is refused, as with CUDA, or gives the CPU's
answer), and the result is a neuron tensor; a CPU tensor with dimensions still raises the
usual device-mismatch error. Every binary and ternary elementwise op of PyTorch's op database
is run with the CPU scalar in each position and compared with the same call on the CPU."""

import warnings

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_unflatten

from conftest import on_shallow_stack

# Elementwise ops of more than one tensor that are not BinaryUfuncInfo entries.
TERNARY_AND_OTHERS = {"where", "lerp", "addcmul", "addcdiv", "clamp", "pow", "float_power",
                      "atan2", "polar", "complex", "xlogy", "nextafter", "hypot", "ldexp",
                      "copysign", "heaviside", "logaddexp", "logaddexp2", "gcd", "lcm"}
DTYPES = (torch.float32, torch.int64, torch.bool)
SAMPLES_PER_DTYPE = 2


def elementwise_ops():
    return [op for op in op_db
            if type(op).__name__ == "BinaryUfuncInfo" or op.name in TERNARY_AND_OTHERS]


def cases(op):
    """(sample, index of the tensor that becomes a CPU scalar) over the dtypes the op has."""
    for dtype in DTYPES:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        for sample in list(op.sample_inputs("cpu", dtype))[:SAMPLES_PER_DTYPE]:
            flat, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
            tensors = [i for i, t in enumerate(flat) if isinstance(t, torch.Tensor)]
            if len(tensors) < 2:
                continue
            for i in tensors:
                if flat[i].numel() > 0:
                    yield flat, spec, i


def arguments(flat, spec, scalar_index, device):
    """Fresh arguments: the chosen tensor as a 0-dim CPU tensor, the others on `device`."""
    def place(i, t):
        if not isinstance(t, torch.Tensor):
            return t
        if i == scalar_index:
            return t.detach().flatten()[0].clone()
        return t.detach().clone().to(device)
    return tree_unflatten([place(i, t) for i, t in enumerate(flat)], spec)


def same(got, want):
    got, want = tree_flatten(got)[0], tree_flatten(want)[0]
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
                return False
            if w.numel() and not torch.allclose(g.cpu().double(), w.double(), rtol=1e-4,
                                                atol=1e-4, equal_nan=True):
                return False
    return True


def call(fn, args, **extra):
    inp, a, kw = args
    return fn(inp, *a, **kw, **extra)


def check_form(form, fn, flat, spec, i):
    """None if the form matches the CPU (or the CPU itself refuses it), else what went wrong."""
    cpu_args = arguments(flat, spec, i, "cpu")
    try:
        if form == "out":
            want = call(fn, cpu_args)
            if not isinstance(want, torch.Tensor):
                return None
            cpu_out = torch.empty_like(want)
            call(fn, cpu_args, out=cpu_out)
        else:
            want = call(fn, cpu_args)
    except Exception:
        return None  # the CPU refuses this combination too
    args = arguments(flat, spec, i, "neuron")
    if form == "inplace" and i == 0:
        # The CPU scalar is the tensor written in place. CUDA refuses that (an argument an op
        # writes must be on the device) and so does the boxed path; the typed kernels of the
        # most frequent ops (add_, mul_, ...) still give the CPU's answer (issue 17, P3).
        try:
            got = call(fn, args)
        except RuntimeError as e:
            return None if "same device" in str(e) else f"unexpected error: {e}"
        return None if same(got, want) and same(args, cpu_args) else "differs from the CPU"
    try:
        if form == "out":
            out = torch.empty_like(cpu_out, device="neuron")
            got = call(fn, args, out=out)
            ok = got is out and same(out, cpu_out)
        else:
            got = call(fn, args)
            ok = same(got, want) and same(args, cpu_args)  # mutated arguments too
            results = [t for t in tree_flatten(got)[0] if isinstance(t, torch.Tensor)]
            if form == "functional" and any(t.device.type != "neuron" for t in results):
                return "result not on neuron"
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return None if ok else "differs from the CPU"


def test_every_elementwise_op_takes_a_cpu_scalar_in_every_position():
    checked, failures = on_shallow_stack(check_every_elementwise_op)
    assert checked > 1000  # the enumeration really ran
    assert not failures, "\n".join(failures)


def check_every_elementwise_op():
    """(cases checked, what went wrong)."""
    warnings.filterwarnings("ignore")
    checked, failures = 0, []
    for op in elementwise_ops():
        forms = [("functional", op.op)]
        if op.inplace_variant is not None:
            forms.append(("inplace", op.inplace_variant))
        if op.supports_out:
            forms.append(("out", op.op))
        for flat, spec, i in cases(op):
            for form, fn in forms:
                problem = check_form(form, fn, flat, spec, i)
                checked += 1
                if problem:
                    failures.append(f"{op.name} {form} scalar at tensor {i} "
                                    f"({flat[i].dtype}): {problem}")
    return checked, failures


@pytest.mark.parametrize("formula", [
    lambda s, x: s ** x,
    lambda s, x: x.abs() ** s,
    lambda s, x: torch.atan2(s, x),
    lambda s, x: torch.where(x > 0, s, x),
    lambda s, x: torch.lerp(s, x, s),
    lambda s, x: torch.addcmul(s, x, x, value=0.5),
    lambda s, x: torch.maximum(s, x) * torch.xlogy(s, x.abs()),
], ids=["rpow", "pow", "atan2", "where", "lerp", "addcmul", "maximum_xlogy"])
def test_backward_through_a_cpu_scalar_matches_cpu(formula):
    x_cpu = torch.randn(5, generator=torch.Generator().manual_seed(0)).requires_grad_()
    x = x_cpu.detach().to("neuron").requires_grad_()
    s_cpu, s = torch.tensor(1.5, requires_grad=True), torch.tensor(1.5, requires_grad=True)
    formula(s_cpu, x_cpu).sum().backward()
    out = formula(s, x)
    assert out.device.type == "neuron"
    out.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(s.grad, s_cpu.grad)  # the scalar's gradient stays on the CPU
    assert s.grad.device.type == "cpu"


@pytest.mark.parametrize("call_op", [
    lambda c, n: torch.add(c, n),
    lambda c, n: torch.add(n, c),
    lambda c, n: torch.logical_and(c > 0, n > 0),
    lambda c, n: torch.where(n > 0, c, n),
    lambda c, n: torch.add(n, n, out=c),
    lambda c, n: n.mul_(c),
], ids=["first", "second", "logical_first", "where", "out", "inplace"])
def test_cpu_tensors_with_dimensions_still_raise(call_op):
    cpu, neuron = torch.ones(3), torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="same device"):
        call_op(cpu, neuron)
    assert torch.equal(neuron.cpu(), torch.ones(3))  # nothing was written


# Ops of the typed fast path (csrc/aten/UnboxedHostKernels.cpp), each with its tensor count.
TYPED = {
    "add": (torch.add, 2), "sub": (torch.sub, 2), "mul": (torch.mul, 2), "div": (torch.div, 2),
    "pow": (torch.pow, 2), "maximum": (torch.maximum, 2), "minimum": (torch.minimum, 2),
    "eq": (torch.eq, 2), "lt": (torch.lt, 2), "bitwise_and": (lambda a, b: (a > 0) & (b > 0), 2),
    "where": (lambda a, b, c: torch.where(a > 0, b, c), 3),
    "addcmul": (torch.addcmul, 3),
}


@pytest.mark.parametrize("name", sorted(TYPED))
@pytest.mark.parametrize("shared_storage", [False, True], ids=["typed_path", "boxed_path"])
def test_cpu_scalar_on_the_typed_and_the_boxed_path(name, shared_storage):
    # Neuron operands in one storage send the call to the boxed kernel; separate storages to
    # the typed one (see test_unboxed_kernels.py).
    fn, count = TYPED[name]
    values = torch.rand(count, 6, generator=torch.Generator().manual_seed(0)) + 0.5
    for position in range(count):
        cpu = [values[i].clone() if i != position else values[i, 0].clone()
               for i in range(count)]
        base = values.to("neuron")
        neuron = [base[i] if shared_storage else base[i].clone() for i in range(count)]
        neuron[position] = values[position, 0].clone()
        got = fn(*neuron)
        assert got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), fn(*cpu))
