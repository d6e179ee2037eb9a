"""Runs a program on the CPU and on neuron in lock step and compares, after every step, what the
step raised, its results (values, dtype, shape, strides, storage offset, aliasing, autograd
metadata) and the values it may have mutated (its arguments and everything sharing their
storage); at the end, every live value and every leaf's .grad.

Lanes: "cpu" (the reference) and "neuron". Programs that touch float64 run two neuron lanes:
"neuron/exact" (float64 mode "exact": compared with the CPU like any other dtype) and
"neuron/narrow" (the default mode: float64 computed in float32, compared as explained.py says,
against the CPU and against "cpu/f32", the same program with float64 replaced by float32)."""

import math
import re
import warnings

import torch

from . import explained
from .program import exec_globals

import torch_neuron  # noqa: F401  (registers the device)

TOLERANCES = {  # (rtol, atol), as torch.testing.assert_close
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
}


class Mismatch:
    def __init__(self, category, step_index, step, names, lane, detail):
        self.category = category
        self.step_index = step_index
        self.label = step.label if step is not None else "end"
        self.statement = step.render() if step is not None else ""
        self.names = set(names)
        self.lane = lane
        self.detail = detail
        self.explained_by = None
        self.values = None  # (cpu, neuron, cpu/f32 or None) of a value mismatch
        self.path = None    # the value compared: "v3", or "v3[1]" inside a tuple

    @property
    def name(self):
        return next(iter(self.names), None)

    def signature(self):
        # neuron and neuron/exact compare the same way; neuron/narrow has its own rules
        return (self.category, self.label, "narrow" if self.lane == "neuron/narrow" else "neuron")

    def __str__(self):
        where = f"step {self.step_index} [{self.label}]" if self.step_index is not None else "end"
        head = f"{self.category} mismatch ({self.lane}) at {where}"
        if self.statement:
            head += f": {self.statement}"
        return f"{head}\n{self.detail}"


class Lane:
    def __init__(self, name, dev, float64=None, f32_reference=False):
        self.name = name
        self.dev = dev
        self.float64 = float64
        self.f32_reference = f32_reference
        self.env = exec_globals(dev)
        self.codes = {}
        self.before = {}
        self.shapes_before = {}  # the step's tensor arguments' shapes before it ran
        self.before_shared = {}  # the plain tensors of `before`, sharing memory as they did
        self.error = None  # what the last step raised, or None

    def code(self, step):
        text = step.render()
        if self.f32_reference:
            text = (text.replace("torch.float64", "torch.float32").replace("'float64'", "'float32'")
                    .replace("torch.complex128", "torch.complex64"))
        c = self.codes.get(text)
        if c is None:
            c = self.codes[text] = compile(text, "<fuzz>", "exec")
        return c

    def run(self, step):
        if self.float64 == "narrow" or (self.dev == "cpu" and step.params.get("op") in explained.NEEDS_ARGUMENTS):
            # The arguments as they were before the step, for explained.py's check of a
            # narrowed step against the CPU (the step re-run on them in float32).
            self.before = {r: snapshot(self.env.get(r, _MISSING)) for r in step.refs}
            if self.float64 == "narrow":  # and what shares memory with them
                keys = set()
                for r in step.refs:
                    v = self.env.get(r)
                    for t in (v if isinstance(v, (tuple, list)) else [v]):
                        if isinstance(t, torch.Tensor) and storage_key(t) is not None:
                            keys.add(storage_key(t))
                for a in self.tensor_names():
                    if a not in self.before and storage_key(self.env[a]) in keys:
                        self.before[a] = snapshot(self.env[a])
                # One copy per storage of the plain tensors among them, so that the step can be
                # re-run on them with their aliasing (explained._step_in_float32).
                self.before_shared = snapshot_sharing(
                    {n: self.env[n] for n in self.before if isinstance(self.env.get(n), torch.Tensor)})
        self.shapes_before = {r: tuple(v.shape) for r in step.refs
                              if isinstance(v := self.env.get(r), torch.Tensor)}
        if self.float64:
            torch_neuron.set_float64_mode(self.float64)
        for out in step.outs:
            self.env.pop(out, None)
        self.error = None
        try:
            exec(self.code(step), self.env)
            return None
        except Exception as e:  # noqa: BLE001  (the exception is what is compared)
            for out in step.outs:
                self.env.pop(out, None)
            self.error = e
            return e
        finally:
            if self.float64:
                torch_neuron.set_float64_mode("narrow")

    def get(self, name):
        base, _, attr = name.partition(".")
        value = self.env.get(base, _MISSING)
        if attr and value is not _MISSING:
            value = getattr(value, attr)
        return value

    def tensor_names(self):
        return [k for k, v in self.env.items() if k[:1] == "v" and isinstance(v, torch.Tensor)]


_MISSING = object()


def unchanged_by(step, lane, name, path):
    """Whether the step only read `name` and left its neuron value (`path` inside it: "v3" or
    "v3[1]") as it was. The neuron/narrow lane keeps the step's arguments as they were before
    it; the other lanes do not, so this is False there."""
    if name in step.outs or name in explained.written(step) or name not in lane.before:
        return False
    old, new = lane.before[name], lane.env.get(name)
    for index in re.findall(r"\[(\d+)\]", (path or name)[len(name):]):
        if not (isinstance(old, (tuple, list)) and isinstance(new, (tuple, list))):
            return False
        old, new = old[int(index)], new[int(index)]
    return (isinstance(old, torch.Tensor) and isinstance(new, torch.Tensor)
            and old.shape == new.shape and same_bits(host_values(old), host_values(new)))


def snapshot_sharing(tensors):
    """CPU copies of `tensors` (name -> tensor) that share memory as the originals do: one copy
    per storage. Tensors with conj/neg bits are left out."""
    copies, out = {}, {}
    for name, t in tensors.items():
        if t.is_conj() or t.is_neg() or storage_key(t) is None:
            continue
        storage = copies.get(storage_key(t))
        if storage is None:
            storage = copies[storage_key(t)] = t.untyped_storage().cpu().clone()
        out[name] = torch.empty(0, dtype=t.dtype).set_(storage, t.storage_offset(), t.shape, t.stride())
    return out


def snapshot(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().clone()
    if isinstance(v, (tuple, list)):
        return type(v)(snapshot(x) for x in v) if type(v) in (tuple, list) else v
    return v


def storage_key(t):
    try:
        s = t.untyped_storage()
        return (s.data_ptr(), t.device.type) if s.nbytes() else None
    except Exception:  # noqa: BLE001
        return None


def aliases(lane, name):
    t = lane.env.get(name)
    if not isinstance(t, torch.Tensor):
        return frozenset()
    key = storage_key(t)
    if key is None:
        return frozenset()
    return frozenset(n for n in lane.tensor_names() if n != name and storage_key(lane.env[n]) == key)


def autograd_flags(t):
    try:
        return (t.requires_grad, t.is_leaf)
    except Exception as e:  # noqa: BLE001
        return (t.requires_grad, f"<{type(e).__name__}>")


def grad_fn_name(t):
    try:
        return type(t.grad_fn).__name__
    except Exception as e:  # noqa: BLE001  (e.g. a multi-output view whose base changed in place)
        return f"<{type(e).__name__}>"


def host_values(t):
    # A copy on both sides: copies normalize bool bytes (a bool view of other data).
    t = t.detach()
    t = t.cpu() if t.device.type != "cpu" else t.clone()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


def same_bits(a, b):
    if a.numel() == 0:
        return True
    try:
        a = torch.empty_like(a, memory_format=torch.contiguous_format).copy_(a)
        b = torch.empty_like(b, memory_format=torch.contiguous_format).copy_(b)
        return torch.equal(a.view(-1).view(torch.uint8), b.view(-1).view(torch.uint8))
    except Exception:  # noqa: BLE001
        return False


def close(a, b, tol):
    """a, b: CPU tensors of one dtype and shape. NaN equals NaN."""
    if a.dtype != b.dtype:
        b = b.to(a.dtype)
    if same_bits(a, b):
        return True
    if a.dtype.is_floating_point or a.dtype.is_complex:
        rtol, atol = tol or TOLERANCES.get(a.dtype, (1.3e-6, 1e-5))
        if a.dtype in (torch.float16, torch.bfloat16):
            a, b = a.float(), b.float()
        return bool(torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True).all())
    return torch.equal(a, b)


def describe_difference(c, n):
    try:
        if c.shape != n.shape or c.numel() == 0:
            return f"cpu {c}\nneuron {n}"
        if c.dtype == torch.bool or not (c.dtype.is_floating_point or c.dtype.is_complex):
            bad = c != n
        else:
            cc, nn = c.to(torch.complex128 if c.dtype.is_complex else torch.float64), n.to(
                torch.complex128 if c.dtype.is_complex else torch.float64)
            bad = ~torch.isclose(cc, nn, rtol=1e-7, atol=1e-7, equal_nan=True)
        idx = bad.nonzero()[:4].tolist()
        parts = [f"{int(bad.sum())} of {c.numel()} elements differ"]
        for i in idx:
            parts.append(f"  at {tuple(i)}: cpu {c[tuple(i)].item()!r} neuron {n[tuple(i)].item()!r}")
        if c.numel() <= 64:
            parts.append(f"cpu    {c.tolist()}\nneuron {n.tolist()}")
        return "\n".join(parts)
    except Exception as e:  # noqa: BLE001
        return f"(could not describe: {e})"


class Comparison:
    """Compares one neuron lane with the CPU lane (and, for the narrow lane, cpu/f32)."""

    def __init__(self, lane, ref, alt=None):
        self.lane = lane
        self.ref = ref
        self.alt = alt
        self.bitdiffs = []
        self.hits = []  # ids of explained differences met inside a comparison
        self.label = ""  # label of the step being compared (explained.equivalent_grad_fn)
        self.grad_fn_ok = {}
        self.path = None  # the name (element path) of the last value compared

    def compare_value(self, name, c, n, a=_MISSING, device=None):
        """Returns (category, detail, values) of the first difference, or None. `device`: where
        a neuron-lane tensor result must live ("neuron", "cpu"), or None for no check."""
        if c is _MISSING or n is _MISSING:
            if (c is _MISSING) != (n is _MISSING):
                return "structure", f"{name}: defined on {'neuron' if c is _MISSING else 'cpu'} only", None
            return None
        if isinstance(c, torch.Tensor) or isinstance(n, torch.Tensor):
            if not (isinstance(c, torch.Tensor) and isinstance(n, torch.Tensor)):
                return "structure", f"{name}: cpu {type(c).__name__}, neuron {type(n).__name__}", None
            return self.compare_tensor(name, c, n, a if isinstance(a, torch.Tensor) else None, device)
        if isinstance(c, (tuple, list)):
            if type(c) is not type(n) or len(c) != len(n):
                return "structure", (f"{name}: cpu {type(c).__name__} of {len(c)}, neuron "
                                     f"{type(n).__name__} {n!r}"[:400]), None
            alts = a if isinstance(a, (tuple, list)) and len(a) == len(c) else [_MISSING] * len(c)
            for i, (ci, ni, ai) in enumerate(zip(c, n, alts)):
                r = self.compare_value(f"{name}[{i}]", ci, ni, ai, device)
                if r:
                    return r
            return None
        self.path = name
        if type(c) is not type(n):
            return "python", f"{name}: cpu {c!r} ({type(c).__name__}), neuron {n!r} ({type(n).__name__})", None
        if isinstance(c, float):
            if c == n or (math.isnan(c) and math.isnan(n)) or math.isclose(c, n, rel_tol=1.3e-6, abs_tol=1e-7):
                return None
        elif isinstance(c, complex):
            if c == n or abs(c - n) <= 1e-7 + 1.3e-6 * abs(c):
                return None
        elif c == n:
            return None
        return "python", f"{name}: cpu {c!r}, neuron {n!r}", (c, n, None if a is _MISSING else a)

    def compare_tensor(self, name, c, n, a, device):
        self.path = name
        if device is not None and n.device.type != device:
            return "device", f"{name}: result on {n.device}, expected a {device} tensor", None
        if c.dtype != n.dtype:
            return "dtype", f"{name}: cpu {c.dtype}, neuron {n.dtype}", None
        if c.shape != n.shape:
            return "shape", f"{name}: cpu {tuple(c.shape)}, neuron {tuple(n.shape)}", None
        if c.stride() != n.stride():
            return "stride", f"{name}: shape {tuple(c.shape)}: cpu strides {c.stride()}, neuron {n.stride()}", None
        if c.storage_offset() != n.storage_offset():
            return "storage_offset", f"{name}: cpu {c.storage_offset()}, neuron {n.storage_offset()}", None
        if (c.is_conj(), c.is_neg()) != (n.is_conj(), n.is_neg()):
            return "conj_neg", f"{name}: cpu conj/neg {c.is_conj(), c.is_neg()}, neuron {n.is_conj(), n.is_neg()}", None
        ca, na = autograd_flags(c), autograd_flags(n)
        if ca != na:
            return "autograd", f"{name}: cpu requires_grad/is_leaf {ca}, neuron {na}", None
        cg, ng = grad_fn_name(c), grad_fn_name(n)
        if cg != ng:
            # Once accepted, the pair stays accepted: later values with these grad_fns are that
            # value again (compared after later steps) or views returning it (x.real of a real x).
            entry = self.grad_fn_ok.get((cg, ng)) or explained.equivalent_grad_fn(cg, ng, self.label)
            if entry is None:
                return "autograd", f"{name}: cpu grad_fn {cg}, neuron {ng}", None
            self.grad_fn_ok[(cg, ng)] = entry
            self.hits.append(entry)
        cv, nv = host_values(c), host_values(n)
        if same_bits(cv, nv):
            return None
        if close(cv, nv, None):
            self.bitdiffs.append((name, f"{self.lane.name}:{str(c.dtype).replace('torch.', '')}"))
            return None
        av = host_values(a) if a is not None else None
        return "value", f"{name}: {c.dtype} {tuple(c.shape)}\n{describe_difference(cv, nv)}", (cv, nv, av)


class RunResult:
    def __init__(self):
        self.mismatch = None        # first unexplained Mismatch
        self.explained = []         # explained Mismatches
        self.bitdiffs = []          # (name, dtype) within tolerance but not bit-identical
        self.hits = []              # explained differences found inside comparisons (ids)
        self.steps_run = 0
        self.exceptions = 0         # steps that raised on the CPU
        self.fallback_ops = {}

    @property
    def ok(self):
        return self.mismatch is None


def result_device(step, lane):
    """Where the neuron lane's results of `step` must live: on neuron if the step made them from
    a neuron tensor or for the device, on the CPU if it only touched CPU tensors (a literal)."""
    if "dev" in step.expression():
        return "neuron"
    for r in step.refs:
        v = lane.env.get(r)
        vs = v if isinstance(v, (tuple, list)) else [v]
        if any(isinstance(x, torch.Tensor) and x.device.type == "neuron" for x in vs):
            return "neuron"
    if step.kind == "grad":
        return None
    return "cpu"


def fmt_error(e):
    if e is None:
        return "no exception"
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


def run_program(program, stop_at_first=True, neuron_hook=None):
    """Runs `program` on every lane and returns a RunResult. `neuron_hook(step, env)`, if given,
    runs after each step on the neuron lanes (the tests plant differences with it)."""
    warnings.simplefilter("ignore")
    cpu = Lane("cpu", "cpu")
    if program.uses_float64:
        cpu32 = Lane("cpu/f32", "cpu", f32_reference=True)
        comparisons = [Comparison(Lane("neuron/exact", "neuron", "exact"), cpu),
                       Comparison(Lane("neuron/narrow", "neuron", "narrow"), cpu, cpu32)]
        refs = [cpu, cpu32]
    else:
        comparisons = [Comparison(Lane("neuron", "neuron"), cpu)]
        refs = [cpu]
    result = RunResult()
    tainted = {comp.lane.name: {} for comp in comparisons}  # lane -> value name -> explanation
    explained_names = {comp.lane.name: {} for comp in comparisons}
    torch_neuron.clear_op_tracking()

    def report(m, comp, step):
        """Records a mismatch; returns True when the run should stop."""
        taint = tainted[comp.lane.name]
        hit = [taint.get(n) or taint[n.split(".")[0].split("[")[0]] for n in m.names
               if n in taint or n.split(".")[0].split("[")[0] in taint]
        if step is None and not hit:  # final state: a value whose difference was explained
            hit = [explained_names[comp.lane.name][n] for n in m.names if n in explained_names[comp.lane.name]]
        if step is not None and not hit and m.category in ("value", "grad"):
            # An argument the step only read, unchanged on neuron: its difference is the one
            # explained when it was computed.
            hit = [explained_names[comp.lane.name][n] for n in m.names
                   if n in explained_names[comp.lane.name] and unchanged_by(step, comp.lane, n, m.path)]
        if hit:
            m.explained_by = hit[0]
        else:
            entry = explained.classify(m, step, comp, cpu)
            if entry is not None:
                m.explained_by = entry.id
        if m.explained_by is None:
            if result.mismatch is None:
                result.mismatch = m
            return stop_at_first
        result.explained.append(m)
        for n in m.names:
            explained_names[comp.lane.name][n] = m.explained_by
        entry = explained.BY_ID.get(m.explained_by)
        if entry is None or entry.taints:
            # What is computed from an explained difference differs too.
            touched = set(m.names) | set(step.outs if step else [])
            if m.category == "exception" and step is not None:  # what the step may have written
                touched |= set(step.refs)
            for n in touched:
                base = n.split(".")[0].split("[")[0]
                taint[base] = m.explained_by
                for a in aliases(cpu, base):
                    taint[a] = m.explained_by
        return False

    stop = False
    all_lanes = refs + [comp.lane for comp in comparisons]
    for i, step in enumerate(program.steps):
        unsafe = explained.unsafe_step(step, all_lanes)
        if unsafe is not None:  # would kill the process in PyTorch's CPU kernel: skip it
            result.hits.append(unsafe)
            for lane in all_lanes:
                for out in step.outs:
                    lane.env.pop(out, None)
            continue
        errors = [lane.run(step) for lane in refs]
        cpu_error = errors[0]
        result.steps_run = i + 1
        if cpu_error is not None:
            result.exceptions += 1
        for comp in comparisons:
            lane = comp.lane
            taint = tainted[lane.name]
            source = next((taint[r] for r in step.refs if r in taint), None)
            if source is not None:  # explained differences flow into what the step touches
                for n in set(step.outs) | set(step.refs) | {a for r in step.refs for a in aliases(cpu, r)}:
                    taint.setdefault(n, source)
                if step.kind == "grad" or step.label == "backward":  # and into the gradients
                    for n in cpu.tensor_names():
                        taint.setdefault(n + ".grad", source)
            n_error = lane.run(step)
            comp.label = step.label
            # Values an explained difference makes unreliable although they agree now.
            for n, entry_id in explained.silent_taints(step, cpu, lane, cpu_error, n_error).items():
                for a in {n} | aliases(cpu, n):
                    taint[a] = entry_id
            if neuron_hook is not None:
                neuron_hook(step, lane.env)
            if (cpu_error is None) != (n_error is None) or (
                    cpu_error is not None and type(cpu_error) is not type(n_error)):
                m = Mismatch("exception", i, step, step.outs, lane.name,
                             f"cpu: {fmt_error(cpu_error)}\nneuron: {fmt_error(n_error)}")
                m.values = (cpu_error, n_error, None)
                stop = report(m, comp, step) or stop
                continue
            # What the step may have changed: its results and arguments (also when it raised on
            # both devices: an op can change an out= argument before it raises).
            names = ([] if cpu_error is not None else list(step.outs)) + [
                r for r in step.refs if r not in step.outs]
            for r in list(names):
                names += [a for a in aliases(cpu, r) if a not in names]
            device = result_device(step, lane)
            for name in names:
                c, n = cpu.get(name), lane.get(name)
                a = comp.alt.get(name) if comp.alt is not None else _MISSING
                diff = comp.compare_value(name, c, n, a, device if name in step.outs else None)
                if diff:
                    category, detail, values = diff
                    if step.kind == "grad" and category == "value":
                        category = "grad"
                    m = Mismatch(category, i, step, [name], lane.name, detail)
                    m.values = values
                    m.path = comp.path
                    stop = report(m, comp, step) or stop
                    if stop:
                        break
            if stop:
                break
            for out in step.outs if cpu_error is None else ():
                ca, na = aliases(cpu, out), aliases(lane, out)
                if ca != na:
                    m = Mismatch("alias", i, step, [out], lane.name,
                                 f"{out} shares storage with: cpu {sorted(ca)}, neuron {sorted(na)}")
                    stop = report(m, comp, step) or stop
                    if stop:
                        break
            if stop:
                break
        if stop:
            break
    if not stop:
        # Everything live at the end, and the gradients accumulated in leaves.
        for comp in comparisons:
            lane = comp.lane
            comp.label = ""
            names = sorted(set(cpu.tensor_names()) | set(lane.tensor_names()))
            for name in list(names):
                c = cpu.get(name)
                if isinstance(c, torch.Tensor) and autograd_flags(c)[1] is True and c.grad is not None:
                    names.append(name + ".grad")
            for name in names:
                c, n = cpu.get(name), lane.get(name)
                a = comp.alt.get(name) if comp.alt is not None else _MISSING
                diff = comp.compare_value(name, c, n, a, None)
                if diff:
                    category, detail, values = diff
                    if name.endswith(".grad") and category == "value":
                        category = "grad"
                    m = Mismatch(category, None, None, [name], lane.name, "final state: " + detail)
                    m.values = values
                    m.path = comp.path
                    if report(m, comp, None):
                        break
    for comp in comparisons:
        result.bitdiffs += comp.bitdiffs
        result.hits += comp.hits
    result.fallback_ops = dict(torch_neuron.get_fallback_ops())
    return result
