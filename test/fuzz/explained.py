"""Every known, intended difference between neuron and the CPU that the fuzzer accepts, with its
reason. A difference that no entry here explains is a mismatch.

An entry must be rooted in a documented policy of the project (README.md, docs/design.md, or a
Note in the sources) or in PyTorch's own CPU behaviour (nondeterminism, or a CPU bug that
neuron, like CUDA, does not have). Each entry checks the difference, not just the op: the
neuron value must be what the policy says it is. `taints`: values computed from an explained
difference differ too, so later differences in them are explained by the same entry.
"""

import math
import re

import torch


class Entry:
    def __init__(self, id, reason, source, match, taints):
        self.id = id
        self.reason = reason
        self.source = source
        self.match = match
        self.taints = taints

    def __repr__(self):
        return f"Entry({self.id!r})"


FLOAT32_TOL = (1.3e-6, 1e-5)
DTYPE_TOL = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: FLOAT32_TOL,
    torch.complex64: FLOAT32_TOL,
    torch.float64: FLOAT32_TOL,      # narrowed: float32 precision is what the policy promises
    torch.complex128: FLOAT32_TOL,
}


def _close(expected, actual, tol):
    if expected.shape != actual.shape:
        return False
    if expected.dtype != actual.dtype:
        expected = expected.to(actual.dtype)
    if actual.dtype.is_floating_point or actual.dtype.is_complex:
        rtol, atol = tol
        e, a = expected, actual
        if a.dtype in (torch.float16, torch.bfloat16):
            e, a = e.float(), a.float()
        return bool(torch.isclose(e, a, rtol=rtol, atol=atol, equal_nan=True).all())
    return torch.equal(expected, actual)


def _float_power_in_float32(step, cpu):
    """torch.float_power computes in float64 whatever its inputs; narrowed, that is pow in
    float32 (complex64) cast back. Returns that result for the step, or None."""
    text = step.template
    if step.params.get("op") not in ("float_power", "float_power_") or text.startswith("with"):
        return None
    env = cpu.env
    if text.startswith("{0}.float_power_("):
        # In place: self's value before the step, raised to the power, written back.
        text = "torch.float_power({0}, " + text[len("{0}.float_power_("):]
        env = cpu.before
    if text.startswith("{0}.float_power("):
        text = "torch.float_power({0}, " + text[len("{0}.float_power("):]
    if not text.startswith("torch.float_power("):
        return None

    def narrowed(a, b, out=None):  # out=: the same value, written into out (broadcast shape)
        def cast(v):
            if isinstance(v, torch.Tensor):
                return v.detach().to(torch.complex64 if v.is_complex() else torch.float32)
            return v
        a, b = cast(a), cast(b)
        out = torch.pow(a, b)
        return out.to(torch.complex128 if out.is_complex() else torch.float64)

    names = {r: env.get(r) for r in step.refs}
    return eval(text.format(*step.refs)[len("torch."):], {"float_power": narrowed, "inf": math.inf,
                                                          "nan": math.nan, "torch": torch}, names)


def _narrow(v):
    if isinstance(v, torch.Tensor):
        if v.dtype == torch.float64:
            return v.to(torch.float32)
        if v.dtype == torch.complex128:
            return v.to(torch.complex64)
        return v
    if type(v) in (tuple, list):
        return type(v)(_narrow(x) for x in v)
    return v


def _lookup(env, name):
    """env value of "v3", "v3[1]" or "v3.grad"."""
    base = re.match(r"\w+", name).group(0)
    v = env.get(base)
    for idx in re.findall(r"\[(\d+)\]", name[len(base):]):
        v = v[int(idx)]
    if name.endswith(".grad"):
        v = v.grad
    return v


def _narrow_sharing(tensors):
    """_narrow for tensors that share memory (name -> tensor): float64 tensors over one storage
    become float32 tensors over one float32 copy of it, so that a step writing one of them
    changes the others, as it does on neuron. Storages that other dtypes share are left out."""
    groups = {}
    for name, t in tensors.items():
        groups.setdefault(t.untyped_storage().data_ptr(), []).append(name)
    out = {}
    for names in groups.values():
        if len(names) < 2 or any(tensors[n].dtype != torch.float64 for n in names):
            continue
        storage = tensors[names[0]].untyped_storage()
        flat = torch.empty(0, dtype=torch.float64).set_(storage, 0, (storage.nbytes() // 8,), (1,))
        narrowed = flat.float().untyped_storage()
        for n in names:
            t = tensors[n]
            out[n] = torch.empty(0, dtype=torch.float32).set_(narrowed, t.storage_offset(), t.shape, t.stride())
    return out


def _step_in_float32(m, step, comp, cpu):
    """The step run on the CPU on the neuron lane's own arguments (as they were before it) with
    float64 narrowed to float32, as the policy computes it; None if that cannot be done."""
    if step is None or step.kind == "grad" or not comp.lane.before:
        return None
    base = re.match(r"\w+", m.name).group(0)
    shares_written = base in getattr(comp.lane, "before_shared", {}) and any(
        w in comp.lane.before_shared and comp.lane.before_shared[w].untyped_storage().data_ptr()
        == comp.lane.before_shared[base].untyped_storage().data_ptr() for w in written(step))
    if base not in step.outs and base not in written(step) and not shares_written:
        return None  # an argument the step only read: its difference is older than the step
    from .program import exec_globals
    env = exec_globals("cpu")
    env.update({r: _narrow(v) for r, v in comp.lane.before.items()})
    env.update(_narrow_sharing(getattr(comp.lane, "before_shared", {})))
    exec(compile(step.render(), "<narrowed>", "exec"), env)
    return _lookup(env, m.path or m.name)


def _float_power_narrowed(m, step, comp, cpu):
    if (comp.lane.float64 != "narrow" or m.category != "value" or step is None
            or (m.name not in step.outs and m.name not in written(step))):
        return False
    ref = _float_power_in_float32(step, cpu)
    return isinstance(ref, torch.Tensor) and _close(ref, m.values[1], FLOAT32_TOL)


def _float64_narrowed(m, step, comp, cpu):
    """The neuron/narrow lane (float64 mode "narrow", the default): float64 ops compute in
    float32. Accepted when the neuron value is, at float32 precision, the CPU's float64 value or
    the value of the same program with float64 replaced by float32 (for values whose computation
    went through float32: integers and booleans derived from narrowed float64, discontinuous
    functions of rounded values)."""
    if comp.lane.float64 == "narrow" and m.category == "shape":
        return _narrowed_shape(m, step, comp, cpu)
    if comp.lane.float64 != "narrow" or m.category not in ("value", "grad", "python") or not m.values:
        return False
    c, n, a = m.values
    if isinstance(c, torch.Tensor):
        tol = DTYPE_TOL.get(c.dtype, (0, 0))
        if c.dtype in (torch.float64, torch.complex128):
            # at float32 precision, including float32's range (overflow to inf, underflow to 0)
            rounded = c.to(torch.complex64 if c.is_complex() else torch.float32).to(c.dtype)
            if _close(c, n, FLOAT32_TOL) or _close(rounded, n, FLOAT32_TOL):
                return True
        elif _close(c, n, tol):
            return True
        if a is not None and _close(a, n, tol):
            return True
        ref = _step_in_float32(m, step, comp, cpu)
        return isinstance(ref, torch.Tensor) and _close(ref.to(c.dtype), n, tol if c.dtype not in (
            torch.float64, torch.complex128) else FLOAT32_TOL)
    if isinstance(c, float) and isinstance(n, float):
        if math.isclose(c, n, rel_tol=1.3e-6, abs_tol=1e-5) or (math.isnan(c) and math.isnan(n)):
            return True
        return isinstance(a, float) and (a == n or math.isclose(a, n, rel_tol=1.3e-6, abs_tol=1e-5)
                                         or (math.isnan(a) and math.isnan(n)))
    return a is not None and a == n


def _narrowed_shape(m, step, comp, cpu):
    """A result whose shape depends on values (unique, nonzero, masked_select) of narrowed
    float64 data: accepted when the step re-run on neuron's own arguments in float32 gives
    neuron's result (two values float32 rounds to one, or overflows to inf, merge)."""
    ref = _step_in_float32(m, step, comp, cpu)
    n = _lookup(comp.lane.env, m.path or m.name)
    if not (isinstance(ref, torch.Tensor) and isinstance(n, torch.Tensor)) or ref.shape != n.shape:
        return False
    n = n.detach().cpu()
    tol = FLOAT32_TOL if n.dtype in (torch.float64, torch.complex128) else DTYPE_TOL.get(n.dtype, (0, 0))
    return _close(ref.to(n.dtype), n, tol)


def _shares_narrowed_float64(m, step, comp, cpu):
    """A value that is not float64 but shares memory with float64 data a narrowed op wrote
    (a float32 tensor seen as float64 through .view(torch.float64), then changed in place):
    the float64 elements were computed in float32, so the other dtype's bits differ. Accepted
    when every float64 tensor sharing that memory matches the CPU at float32 precision."""
    if comp.lane.float64 != "narrow" or m.category != "value" or not m.values:
        return False
    name = re.match(r"\w+", m.name).group(0)
    c = cpu.env.get(name)
    if not isinstance(c, torch.Tensor) or c.dtype in (torch.float64, torch.complex128):
        return False
    from .runner import aliases
    wide = [a for a in aliases(cpu, name) if cpu.env[a].dtype in (torch.float64, torch.complex128)]
    if not wide:
        return False
    for a in wide:
        ca, na = cpu.env[a].detach().clone(), comp.lane.env.get(a)
        if not isinstance(na, torch.Tensor) or ca.shape != na.shape:
            return False
        na = na.detach().cpu()
        rounded = ca.to(torch.complex64 if ca.is_complex() else torch.float32).to(ca.dtype)
        if _close(ca, na, FLOAT32_TOL) or _close(rounded, na, FLOAT32_TOL):
            continue
        # or it is what the step computes in float32 from neuron's own arguments (float32
        # flushes values like 1e-300, which float32 bits seen as float64 often are)
        ref = _step_in_float32(_Named(a), step, comp, cpu)
        if not (isinstance(ref, torch.Tensor) and _close(ref.to(ca.dtype), na, FLOAT32_TOL)):
            return False
    return True


class _Named:
    """A stand-in for a Mismatch when an entry checks another value than the mismatching one."""

    def __init__(self, name):
        self.name = self.path = name


def _narrowed_size_one_stride(m, step, comp, cpu):
    """On the neuron/narrow lane, a float64 result computed from a float32 copy of a view that
    is not dense: the copy is laid out anew, and the result's strides differ from the CPU's only
    along dimensions of size 1, where a stride addresses no other element (PyTorch's contiguity
    checks ignore them too)."""
    if comp.lane.float64 != "narrow" or m.category != "stride":
        return False
    c, n = _lookup(cpu.env, m.name), _lookup(comp.lane.env, m.name)
    if not (isinstance(c, torch.Tensor) and isinstance(n, torch.Tensor)) or c.shape != n.shape:
        return False
    if c.dtype not in (torch.float64, torch.complex128):
        return False
    return all(size == 1 or a == b for size, a, b in zip(c.shape, c.stride(), n.stride()))


def _write_to_overlapping_memory(m, step, comp, cpu):
    """A step that writes into a tensor whose elements overlap in memory (an expanded or
    unfolded view): PyTorch leaves the result undefined ("in-place operations on such tensors
    may result in incorrect behavior", torch.Tensor.expand), and it depends on the order in
    which a kernel writes. Accepted for differences in that memory (values, or whether the op
    raises)."""
    if step is None or m.category not in ("value", "exception"):
        return False
    if m.category == "exception":
        # The same kernel runs on both devices (float64 with overlapping memory runs exactly,
        # Note [Float64 narrowing checks]): it must raise the same way.
        return False
    targets = written(step)
    for r in targets:
        t = cpu.env.get(r)
        if isinstance(t, torch.Tensor) and _overlaps(t):
            return True
    return False


def _overlaps(t):
    """Whether two elements of t share memory (exact, for the fuzzer's small tensors)."""
    if t.numel() <= 1:
        return False
    if any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride())):
        return True
    span = 1 + sum((sz - 1) * abs(st) for sz, st in zip(t.shape, t.stride()))
    offsets = torch.arange(span).as_strided(t.shape, [abs(st) for st in t.stride()])
    return offsets.unique().numel() < t.numel()


def written(step):
    """Names of the arguments a step writes: out= tensors, and the target of an in-place op."""
    out = set()
    for pair in re.findall(r"out=\(?\{(\d+)\}(?:[^,)]*)(?:, \{(\d+)\})?", step.template):
        out.update(step.refs[int(k)] for k in pair if k != "" and int(k) < len(step.refs))
    text = step.template
    inplace = re.match(r"(with torch.no_grad\(\): )?\{0\}(\[[^\]]*\])?(\.\w+_\(| [-+*/%&|^<>]+= |\[.*\] = )", text)
    if step.refs and (inplace or "inplace=True" in text):
        out.add(step.refs[0])
    return out


def _dense(t):
    """Whether t's elements fill its memory without gaps or overlap (in some dim order)."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.shape, t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _uninitialized_after_failed_resize(m, step, comp, cpu):
    """A step that raised on both devices after resizing an argument it writes (cat(out=x)
    with x among the inputs resizes x, then finds the overlap): the elements the resize added
    are uninitialized memory (torch.Tensor.resize_), so only the elements x had before may be
    compared; they must agree."""
    if m.category != "value" or step is None or not m.values:
        return False
    base = re.match(r"\w+", m.name).group(0)
    old_shape = cpu.shapes_before.get(base)
    c, n, _ = m.values
    if base not in written(step) or old_shape is None or not isinstance(c, torch.Tensor):
        return False
    old = math.prod(old_shape)
    if (c.shape == old_shape or c.numel() <= old or c.stride() != n.stride()
            or not _dense(c)):
        return False
    # The elements kept are the first ones in memory (the result may be laid out permuted).
    tol = DTYPE_TOL.get(c.dtype, (0, 0))
    first = lambda t: t.as_strided((old,), (1,), t.storage_offset())  # noqa: E731
    return _close(first(c), first(n), tol)


def _float64_bits_reinterpreted(m, step, comp, cpu):
    """Reinterpreting the bits of narrowed float64 data (`x.view(torch.int32)` of a float64 x):
    the narrowed values are float32 values stored as float64, so their low mantissa bits are
    zero where the CPU's are not. Accepted when the float64 source itself matches the CPU's at
    float32 precision; what is computed from the reinterpreted bits differs too (taints)."""
    if comp.lane.float64 != "narrow" or step is None or step.label != "view_dtype":
        return False
    if m.category not in ("value", "python") or not step.refs:
        return False
    src_c, src_n = cpu.env.get(step.refs[0]), comp.lane.env.get(step.refs[0])
    if not isinstance(src_c, torch.Tensor) or src_c.dtype not in (torch.float64, torch.complex128):
        return False
    return src_c.shape == src_n.shape and _close(src_c.detach().clone(), src_n.detach().cpu(), FLOAT32_TOL)


def _median_of_expanded(m, step, comp, cpu):
    """median/nanmedian with dim on an input with a zero stride along that dim: neuron makes the
    input dense first, as CUDA does; accepted when neuron's result is the CPU's result on a dense
    copy of the input (on the neuron/narrow lane, of neuron's input, computed in float32)."""
    if step is None or step.params.get("op") not in ("median", "nanmedian") or m.category != "value":
        return False
    x = cpu.env.get(step.refs[0])
    dim = step.params.get("dim")
    if not isinstance(x, torch.Tensor) or dim is None or x.dim() == 0 or x.stride(dim) != 0:
        return False
    if comp.lane.float64 == "narrow":  # its input holds float32 values: neuron's own input
        x = comp.lane.env.get(step.refs[0]).detach().cpu()
    fn = getattr(torch, step.params["op"])
    dense = fn(x.detach().contiguous(), dim, keepdim=step.params.get("keepdim", False))
    got = [comp.lane.env.get(o) for o in step.outs]
    return len(got) == 2 and all(isinstance(g, torch.Tensor) and _close(d, g.detach().cpu(), (0, 0))
                                 for g, d in zip(got, dense))  # exactly, NaN medians included


def _reaches(tensor, grad_fn_name):
    """Whether `tensor`'s autograd graph has a node named `grad_fn_name`."""
    seen, todo = set(), [getattr(tensor, "grad_fn", None)]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if type(fn).__name__ == grad_fn_name:
            return True
        todo += [next_fn for next_fn, _ in getattr(fn, "next_functions", ())]
    return False


def _sdpa_gradient_layout(m, step, comp, cpu):
    """Gradients through scaled_dot_product_attention: the CPU's flash kernel returns them laid
    out as it computes them ([B, L, H, D] memory), neuron's overrideable attention lays them out
    like their inputs, as that op's meta function promises torch.compile
    (torch/_meta_registrations.py, empty_like). Accepted for the strides of a gradient step
    whose loss goes through attention on both devices; values are compared as usual."""
    if m.category != "stride" or step is None or step.kind != "grad" or not step.refs:
        return False
    loss = step.refs[0]
    return (_reaches(cpu.env.get(loss), "ScaledDotProductFlashAttentionForCpuBackward0")
            and _reaches(comp.lane.env.get(loss),
                         "ScaledDotProductFusedAttentionOverrideableBackward0"))


def _integer_histc(m, step, comp, cpu):
    """torch.histc of an integer tensor: ATen's CPU kernel refuses it (NotImplementedError),
    neuron computes it as CUDA does. Accepted when neuron's result is the CPU's histc of the
    same values as float32, cast to the input's dtype (the project's own reference)."""
    if step is None or step.params.get("op") != "histc" or m.category != "exception":
        return False
    cpu_error, neuron_error, _ = m.values
    if not isinstance(cpu_error, NotImplementedError) or neuron_error is not None:
        return False
    x = cpu.env.get(step.refs[0])
    if not isinstance(x, torch.Tensor) or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        return False
    got = comp.lane.env.get(step.outs[0])
    want = eval(step.expression(), {"torch": torch}, {step.refs[0]: x.detach().float()})
    return isinstance(got, torch.Tensor) and got.dtype == x.dtype and torch.equal(got.cpu(), want.to(x.dtype))


def _one_hot_range_check(m, step, comp, cpu):
    """F.one_hot with a class value out of range: PyTorch's one_hot (ATen Onehot.cpp) checks the
    range itself only on the CPU; for CUDA, MPS and PrivateUse1 devices it skips the check (it
    would synchronize) and relies on scatter_'s index check. So the CPU raises RuntimeError
    ("Class values must be non-negative." / "... smaller than num_classes.") and neuron raises
    scatter_'s IndexError, or, with num_classes=-1 and a huge value, OutOfMemoryError for the
    max + 1 classes. Both must raise."""
    if step is None or step.params.get("op") != "one_hot" or m.category != "exception":
        return False
    cpu_error, neuron_error, _ = m.values
    if not (isinstance(cpu_error, RuntimeError) and "Class values must be" in str(cpu_error)):
        return False
    # num_classes=-1 is max + 1 without the range check: a huge value asks for more memory
    # than the device has (CUDA raises its OutOfMemoryError the same way).
    return ((isinstance(neuron_error, IndexError) and "out of range" in str(neuron_error))
            or isinstance(neuron_error, torch.OutOfMemoryError))


# Ops that write an argument and check their indices (_index_checked_before_writing).
INDEX_WRITES = {"scatter_add_", "scatter_", "index_add_", "index_copy_", "index_fill_",
                "index_select"}
# ops whose arguments the CPU lane keeps a copy of before the step (for the checks below)
NEEDS_ARGUMENTS = {"ldexp", "ldexp_", "float_power_"} | INDEX_WRITES


def _index_checked_before_writing(m, step, comp, cpu):
    """A scatter or index op that writes an argument (in place, or index_select's out=), with
    an index out of range: both devices raise, but ATen's CPU kernels check each index as they
    reach it, so they have already written the elements before it (or resized out=); neuron
    checks every index first (csrc/aten/IndexChecks.h) and leaves the argument as it was.
    Accepted when the CPU raised an out-of-range error and neuron's value of that argument is
    exactly what it was before the step."""
    if step is None or step.params.get("op") not in INDEX_WRITES:
        return False
    if m.category not in ("value", "shape", "stride"):
        return False
    error = cpu.error
    if error is None or not re.search(r"out of (bounds|range)", str(error)):
        return False
    base = re.match(r"\w+", m.name).group(0)
    before = cpu.before.get(base)
    n = comp.lane.get(base)  # the neuron lane's argument now
    if base not in written(step) or not isinstance(before, torch.Tensor) or not isinstance(n, torch.Tensor):
        return False
    n = n.cpu()
    return n.dtype == before.dtype and _close(before, n, (0, 0))  # exact, NaN equal to NaN


def _ldexp_as_on_other_devices(step, before):
    """The step with torch.ldexp computed as PyTorch computes it for devices other than the
    CPU (self * 2.0 ** other), on the CPU, from the arguments as they were before the step.
    Returns the value of every name the step binds or writes, or None."""
    text = step.template
    if text.startswith("{0}.ldexp_("):
        text = "{0}.copy_(torch.ldexp({0}, " + text[len("{0}.ldexp_("):] + ")"
    elif text.startswith("{0}.ldexp("):
        text = "torch.ldexp({0}, " + text[len("{0}.ldexp("):]
    if not text.startswith(("torch.ldexp(", "{0}.copy_(torch.ldexp(")):
        return None
    from .program import exec_globals
    env = exec_globals("cpu")
    env.update({r: v.clone() if isinstance(v, torch.Tensor) else v for r, v in before.items()})

    class Torch:
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def ldexp(x, e, out=None):  # ATen's ldexp_out: mul_out(out, self, pow(2.0, other))
            power = torch.pow(2.0, e)
            return torch.mul(x, power) if out is None else torch.mul(x, power, out=out)

    env["torch"] = Torch()
    outs = ", ".join(step.outs)
    exec(compile((outs + " = " if outs else "") + text.format(*step.refs), "<ldexp>", "exec"), env)
    return env


def _cpu_ldexp_kernel(m, step, comp, cpu):
    """torch.ldexp: on CPU tensors PyTorch runs its CPU kernel ("ldexp_cpu_exp"), which wraps an
    integer exponent outside the int32 range to 32 bits (ldexp(1., 2**39 + 1) == 2.) and refuses
    bool exponents; for other devices PyTorch's composite computes self * 2.0 ** other (as on
    CUDA). Accepted when neuron's result (value, or strides) is that product computed on the
    CPU."""
    if step is None or step.params.get("op") not in ("ldexp", "ldexp_") or step.kind != "op":
        return False
    if m.category == "exception" and step.label == "ldexp.scalar_first":
        # ldexp(CPU 0-dim tensor, device tensor): PyTorch picks the int-exponent kernel by
        # self's device (ldexp_stub.is_device_supported(self.device().type()), BinaryOps.cpp),
        # so a CPU self takes the CPU kernel, whose TensorIterator refuses the device exponent
        # (with a CUDA exponent too); with both on the CPU it runs.
        cpu_error, neuron_error, _ = m.values
        return (cpu_error is None and isinstance(neuron_error, RuntimeError)
                and "Expected all tensors to be on the same device" in str(neuron_error))
    if m.category == "exception":
        cpu_error, neuron_error, _ = m.values
        if not (isinstance(cpu_error, NotImplementedError) and "ldexp" in str(cpu_error) and neuron_error is None):
            return False
    elif m.category not in ("value", "stride"):
        return False
    try:
        env = _ldexp_as_on_other_devices(step, cpu.before)
    except Exception:  # noqa: BLE001
        return False
    if env is None:
        return False
    names = [m.name] if m.category != "exception" else list(step.outs) or step.refs[:1]
    for name in names:
        want, got = _lookup(env, name), _lookup(comp.lane.env, name)
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            return False
        if m.category == "stride":
            if want.stride() != got.stride():
                return False
        elif not _close(want.detach(), got.detach().cpu(), DTYPE_TOL.get(want.dtype, (0, 0))):
            return False
    return True


def _oom_error_type(m, step, comp, cpu):
    """An allocation that cannot be satisfied: the CPU allocator raises RuntimeError ("can't
    allocate memory"), neuron raises torch.OutOfMemoryError (a RuntimeError subclass, as CUDA
    does) naming the requested, free and total HBM."""
    if m.category != "exception":
        return False
    cpu_error, neuron_error, _ = m.values
    return (type(cpu_error) is RuntimeError and "allocate" in str(cpu_error)
            and isinstance(neuron_error, torch.OutOfMemoryError))


def _circular_pad_beyond_input(m, step, comp, cpu):
    """F.pad(mode="circular") with a negative pad on one side and, on the other, a pad wider
    than what is left of the input: PyTorch's kernel (CPU and other devices) leaves those output
    elements unwritten, so they hold whatever the memory held (different run to run on the CPU
    alone). Accepted when the elements copied from the input agree."""
    if step is None or step.label != "pad.circular" or m.category != "value" or m.name not in step.outs:
        return False
    left, right = step.params.get("pad", (0, 0))
    x = cpu.env.get(step.refs[0])
    width = x.shape[-1] - max(-left, 0) - max(-right, 0)
    if not (min(left, right) < 0 and max(left, right) > width):
        return False
    c, n, _ = m.values
    start = max(left, 0)
    return _close(c[..., start:start + width], n[..., start:start + width], DTYPE_TOL.get(c.dtype, (0, 0)))


def _repeated_ellipsis(m, step, comp, cpu):
    """An index with more than one Ellipsis (x[..., ..., 0]): PyTorch's CPU indexing accepts it,
    on other devices PyTorch raises IndexError ("Dimension out of range"). Accepted when the
    meta device raises the same exception type as neuron."""
    if step is None or m.category != "exception" or step.expression().count("...") < 2:
        return False
    cpu_error, neuron_error, _ = m.values
    if cpu_error is not None or neuron_error is None:
        return False
    from .program import exec_globals
    env = exec_globals("meta")
    for r in step.refs:
        v = cpu.env.get(r)
        env[r] = v.detach().to("meta") if isinstance(v, torch.Tensor) else v
    try:
        exec(compile(step.render(), "<meta>", "exec"), env)
    except Exception as e:  # noqa: BLE001
        return type(e) is type(neuron_error)
    return False


def unsafe_step(step, lanes):
    """The id of the entry below if running `step` would crash the process in PyTorch's own CPU
    kernel on one of the lanes (the runner then skips the step on every lane), else None."""
    if step.params.get("op", "").rstrip("_") in ("gcd", "lcm"):
        for lane in lanes:
            for r in step.refs:
                v = lane.env.get(r)
                if isinstance(v, torch.Tensor) and v.dtype in (torch.int32, torch.int64, torch.int16, torch.int8) \
                        and v.numel() and bool((v.detach().cpu() == torch.iinfo(v.dtype).min).any()):
                    return "pytorch-lcm-int-min-crash"
    return None


# grad_fn names that differ while values and gradients agree (they are still compared):
# (cpu name, neuron name) -> (entry id, the steps it applies to: a label prefix, or None for any)
EQUIVALENT_GRAD_FNS = {
    ("ScaledDotProductFlashAttentionForCpuBackward0",
     "ScaledDotProductFusedAttentionOverrideableBackward0"): ("sdpa-overrideable-attention", None),
    ("FillBackward3", "CopyBackwards"): ("setitem-scalar-on-device", "setitem"),
}


def equivalent_grad_fn(cpu_name, neuron_name, label=""):
    """The id of the entry that explains two different grad_fn names, or None."""
    entry = EQUIVALENT_GRAD_FNS.get((cpu_name, neuron_name))
    if entry is None or (entry[1] is not None and not (label or "").startswith(entry[1])):
        return None
    return entry[0]


ENTRIES = [
    Entry("float64-narrowed",
          "float64 is computed in float32 on the device (Trainium has no float64 arithmetic). "
          "On the neuron/narrow lane a value is accepted when it matches, at float32 precision "
          "(float32's range included: overflow to inf, flush to 0), the CPU's float64 value, "
          "or the value of the same program run with float64 replaced by float32, or the step "
          "re-run on the CPU on neuron's own arguments with float64 cast to float32 (for "
          "integers and booleans derived from narrowed values, and shapes that depend on "
          "values, such as unique's). Dtypes, strides and exceptions are compared as usual; "
          "the neuron/exact lane compares float64 exactly.",
          "README.md 'Dtypes'; docs/design.md 'Ops' (Dtypes); csrc/aten/DtypePolicy.h",
          _float64_narrowed, taints=False),
    Entry("float64-narrowed-float-power",
          "torch.float_power computes in float64 whatever its inputs' dtypes; narrowed, it is "
          "pow in float32 (an int64 exponent beyond 2**24 rounds, so (-1)**odd can become 1). "
          "Accepted when the result is torch.pow of the inputs cast to float32, cast back.",
          "README.md 'Dtypes'",
          _float_power_narrowed, taints=True),
    Entry("float64-narrowed-bits",
          "A dtype view of narrowed float64 data exposes the float32 rounding in the bits "
          "(the low mantissa bits are zero on neuron); accepted when the float64 source matches "
          "the CPU at float32 precision. Values computed from those bits differ too.",
          "README.md 'Dtypes' (float64 computed in float32 and cast back)",
          _float64_bits_reinterpreted, taints=True),
    Entry("float64-narrowed-shared-memory",
          "A tensor of another dtype that shares memory with float64 data written by a "
          "narrowed op sees the float32 rounding in its bits; accepted when the float64 "
          "tensors sharing that memory match the CPU at float32 precision, or the step re-run "
          "in float32 on neuron's own arguments.",
          "README.md 'Dtypes'",
          _shares_narrowed_float64, taints=True),
    Entry("float64-narrowed-size-one-stride",
          "A narrowed float64 op on a view that is not dense computes from a float32 copy laid "
          "out anew, so its result's strides can differ from the CPU's along dimensions of size "
          "1, where a stride addresses no other element; accepted when every other stride "
          "agrees.",
          "README.md 'Dtypes'; PyTorch c10/core/Contiguity.h (size-1 dimensions are skipped)",
          _narrowed_size_one_stride, taints=False),
    Entry("write-to-overlapping-memory",
          "Writing into a tensor whose elements overlap in memory (expand, unfold with a step "
          "smaller than the size) is undefined in PyTorch; the result depends on the order in "
          "which a kernel writes.",
          "PyTorch docs, torch.Tensor.expand ('in-place operations ... may result in incorrect "
          "behavior')",
          _write_to_overlapping_memory, taints=True),
    Entry("index-checked-before-writing",
          "A scatter or index op with an index out of range raises on both devices, but the "
          "CPU kernel has already written the elements before that index (or resized out=), "
          "where neuron checks every index first and leaves the argument as it was. Later "
          "values computed from it differ too.",
          "csrc/aten/IndexChecks.h; PyTorch's CPU scatter/index kernels check indices per "
          "element (aten/src/ATen/native/cpu/ScatterGatherKernel.cpp, IndexKernel.cpp)",
          _index_checked_before_writing, taints=True),
    Entry("uninitialized-after-failed-resize",
          "An op that resizes an argument it writes and then raises (on the CPU as on neuron) "
          "leaves the added elements uninitialized; the elements the argument had before must "
          "agree. Values computed from it are undefined too.",
          "PyTorch docs, torch.Tensor.resize_ ('new elements are uninitialized')",
          _uninitialized_after_failed_resize, taints=True),
    Entry("cpu-median-expanded-dim",
          "PyTorch's CPU median/nanmedian kernel misreads an input with a zero stride along the "
          "reduced dim (it returns garbage); neuron makes such an input dense first, as CUDA's "
          "kernels do, and returns the right median.",
          "csrc/aten/HostExecution.cpp (OpInfo::dense_first_argument)",
          _median_of_expanded, taints=True),
    Entry("integer-histc",
          "torch.histc of integer tensors: ATen's CPU kernel raises NotImplementedError, neuron "
          "bins integers as CUDA does (transformers' MoE routing relies on it); the result must "
          "equal the CPU's histc of the values as float32. Values computed from it exist on "
          "neuron only.",
          "csrc/aten/Histogram.cpp; test/python/ops/test_integer_histc.py",
          _integer_histc, taints=True),
    Entry("one-hot-accelerator-range-check",
          "PyTorch's one_hot checks class values against [0, num_classes) only for CPU tensors; "
          "for CUDA, MPS and PrivateUse1 (neuron) it leaves the check to scatter_, which raises "
          "IndexError where the CPU raises RuntimeError (or, with num_classes=-1 and a huge "
          "value, OutOfMemoryError for max + 1 classes). Both must raise.",
          "PyTorch aten/src/ATen/native/Onehot.cpp (device check includes kPrivateUse1)",
          _one_hot_range_check, taints=True),
    Entry("cpu-ldexp-kernel",
          "torch.ldexp runs a CPU-only kernel on CPU tensors that wraps integer exponents "
          "outside the int32 range to 32 bits and refuses bool exponents; on other devices "
          "PyTorch computes self * 2.0 ** other (neuron's result, and its strides, must be "
          "those of that product). PyTorch picks the kernel by self's device, so a CPU 0-dim "
          "self with a neuron exponent takes the CPU kernel, which refuses the device tensor "
          "(as with a CUDA exponent) where two CPU tensors run.",
          "PyTorch CPU kernel behaviour (ldexp(x, 2**39 + 1) == 2 * x on the CPU; "
          "NotImplementedError \"ldexp_cpu_exp\" for Bool); aten/src/ATen/native/BinaryOps.cpp "
          "ldexp_out (ldexp_stub.is_device_supported(self.device().type()))",
          _cpu_ldexp_kernel, taints=True),
    Entry("out-of-memory-error-type",
          "An allocation beyond the device's memory raises torch.OutOfMemoryError on neuron "
          "(with the requested, free and total sizes, as CUDA does) where the CPU allocator "
          "raises a plain RuntimeError.",
          "README.md ('an allocation beyond a NeuronCore's HBM raises torch.OutOfMemoryError')",
          _oom_error_type, taints=True),
    Entry("pytorch-circular-pad-unwritten",
          "F.pad(mode='circular') with a negative pad on one side and a pad wider than the "
          "cropped input on the other leaves output elements unwritten in PyTorch's kernel "
          "(their values change from run to run on the CPU alone); the elements taken from "
          "the input must agree.",
          "PyTorch bug (uninitialized memory in circular padding)",
          _circular_pad_beyond_input, taints=True),
    Entry("repeated-ellipsis-index",
          "PyTorch's CPU indexing accepts several Ellipsis in one index; for other devices "
          "PyTorch raises IndexError (checked against the meta device).",
          "PyTorch indexing behaviour (torch/csrc/autograd/python_variable_indexing.cpp)",
          _repeated_ellipsis, taints=True),
    Entry("setitem-scalar-on-device",
          "x[...] = scalar: PyTorch's Python indexing fills a CPU tensor (grad_fn FillBackward3) "
          "but, for devices other than the CPU and CUDA, makes the scalar a device tensor and "
          "copies it (grad_fn CopyBackwards; the meta device does the same). Values and "
          "gradients are compared as usual.",
          "PyTorch torch/csrc/autograd/python_variable_indexing.cpp (valueToTensor, copy_to)",
          lambda *args: False, taints=False),
    Entry("pytorch-lcm-int-min-crash",
          "torch.lcm of the integer type's minimum and an odd number kills the process with "
          "SIGFPE in PyTorch's CPU kernel (gcd overflows to -1, then INT_MIN / -1), on the CPU "
          "as on neuron; the runner skips gcd/lcm steps whose inputs hold that value on any "
          "lane (on neuron/narrow, float64 bits seen as int32 can hold it where the CPU's do "
          "not: -0.0 from a flushed denormal).",
          "PyTorch CPU bug: torch.lcm(torch.tensor([-2**31], dtype=torch.int32), "
          "torch.tensor([5], dtype=torch.int32)) raises SIGFPE",
          lambda *args: False, taints=True),
    Entry("sdpa-overrideable-attention",
          "scaled_dot_product_attention runs the overrideable fused attention on neuron where the "
          "CPU runs its fused flash kernel, so the result's grad_fn is "
          "ScaledDotProductFusedAttentionOverrideableBackward0 instead of "
          "ScaledDotProductFlashAttentionForCpuBackward0; values and gradients are compared as "
          "usual.",
          "README.md 'Ops on the device'; docs/design.md 'Ops' (Dedicated kernels); csrc/aten/Attention.cpp",
          lambda *args: False, taints=False),
    Entry("sdpa-gradient-layout",
          "Gradients through scaled_dot_product_attention have the strides the overrideable "
          "fused attention's meta function gives them (laid out like their inputs), where the "
          "CPU's flash kernel returns its own layout; values are compared as usual.",
          "docs/design.md 'torch.compile' (Layouts); csrc/aten/Attention.cpp (with_layout_of)",
          _sdpa_gradient_layout, taints=False),
]

BY_ID = {e.id: e for e in ENTRIES}


def silent_taints(step, cpu, lane, cpu_error, lane_error):
    """Names whose later values an entry explains although the step's own values agree, with
    that entry's id:
    - an argument a step resized and then raised on both devices holds uninitialized elements
      (uninitialized-after-failed-resize), also where they happen to agree now;
    - float_power with an integer exponent float32 cannot hold (beyond 2**24) on the narrow
      lane: the result may agree (inf or 0 on both) while its gradient, which uses the rounded
      exponent, does not (float64-narrowed-float-power)."""
    out = {}
    if cpu_error is not None and lane_error is not None:
        for r in written(step):
            old, new = cpu.shapes_before.get(r), cpu.env.get(r)
            if old is not None and isinstance(new, torch.Tensor) and new.numel() > math.prod(old):
                out[r] = "uninitialized-after-failed-resize"
    if lane.float64 == "narrow" and step.params.get("op") == "float_power" and cpu_error is None:
        for r in step.refs:
            t = cpu.env.get(r)
            if (isinstance(t, torch.Tensor) and not t.dtype.is_floating_point and not t.is_complex()
                    and t.dtype != torch.bool and t.numel()
                    and t.double().abs().max().item() > 2 ** 24):
                out.update({n: "float64-narrowed-float-power" for n in list(step.outs) + list(written(step))})
    return out


def classify(mismatch, step, comparison, cpu_lane):
    """The entry that explains `mismatch`, or None."""
    for entry in ENTRIES:
        try:
            if entry.match(mismatch, step, comparison, cpu_lane):
                return entry
        except Exception:  # noqa: BLE001  (an entry that cannot decide explains nothing)
            continue
    return None
