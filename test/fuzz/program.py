"""The program model of the differential fuzzer: a program is a list of steps, each one Python
statement over named values (v0, v1, ...). The same statements run on the CPU and on neuron, so a
program prints as a standalone reproducer exactly as it ran."""

import inspect
import math

import torch

# `make` builds an input from its seed, identically on every device: the values are drawn on the
# CPU and moved. Its source is copied into every reproducer, so it must stay self-contained.


def make(dtype, shape, seed, dev, dist="normal", grad=False):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    if dist.startswith("range:"):  # integers in [lo, hi), in any dtype
        lo, hi = (int(s) for s in dist[6:].split(":"))
        t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dt)
    elif dt == torch.bool:
        t = torch.rand(shape, generator=g) < 0.5
    elif dt.is_complex:
        t = torch.complex(torch.randn(shape, generator=g), torch.randn(shape, generator=g)).to(dt)
        if dist == "small":
            t = (t * 3).round()
    elif dt.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float64)  # not float32-representable
        if dist == "small":  # small integers: exact in every float dtype
            t = (t * 3).round()
        elif dist == "pos":
            t = t.abs() + 0.25
        elif dist == "wide":
            t = t * 10.0 ** torch.randint(-6, 7, shape, generator=g, dtype=torch.int64)
        elif dist == "special":
            specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-30, 65504.0,
                                     -1.0, 1.0, 0.5], dtype=torch.float64)
            pick = torch.randint(0, 10, shape, generator=g)
            use = torch.rand(shape, generator=g) < 0.4
            t = torch.where(use, specials[pick], t)
        t = t.to(dt)
    else:  # integers
        if dist == "big":
            info = torch.iinfo(dt)
            lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
            t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dt)
        else:
            t = torch.randint(-4, 6, shape, generator=g, dtype=torch.int64).to(dt)
    t = t.to(dev)
    if grad:
        t.requires_grad_()
    return t


MAKE_SOURCE = inspect.getsource(make)


class Step:
    """One statement. `template` is formatted with the names in `refs` ({0}, {1}, ...) and
    assigned to `outs` (none, one name, or several unpacked). Input steps (kind "input") render
    from `params` instead, so that the shrinker can change their shape."""

    __slots__ = ("outs", "template", "refs", "kind", "label", "params")

    def __init__(self, outs, template, refs=(), kind="op", label="", params=None):
        self.outs = list(outs)
        self.template = template
        self.refs = list(refs)
        self.kind = kind
        self.label = label
        self.params = dict(params or {})

    def copy(self):
        return Step(self.outs, self.template, self.refs, self.kind, self.label, self.params)

    def expression(self):
        if self.kind == "input":
            p = self.params
            extra = ""
            if p.get("dist", "normal") != "normal":
                extra += f", {p['dist']!r}"
            if p.get("grad"):
                extra += ", grad=True"
            return f"make({p['dtype']!r}, {tuple(p['shape'])!r}, {p['seed']}, dev{extra})"
        return self.template.format(*self.refs)

    def render(self):
        expr = self.expression()
        if not self.outs:
            return expr
        if expr.startswith("with "):  # "with torch.no_grad(): {out} = ..."
            return expr.replace("{out}", ", ".join(self.outs))
        return f"{', '.join(self.outs)} = {expr}"

    def __repr__(self):
        return f"Step({self.render()!r})"


class Program:
    def __init__(self, seed, steps, uses_float64=False):
        self.seed = seed
        self.steps = steps
        self.uses_float64 = uses_float64

    def copy(self, steps=None):
        return Program(self.seed, [s.copy() for s in (self.steps if steps is None else steps)],
                       self.uses_float64)

    def source_lines(self):
        return [s.render() for s in self.steps]

    def __len__(self):
        return len(self.steps)

    def size(self):
        """Steps plus the elements of the inputs: what the shrinker makes smaller."""
        return len(self.steps) * 1000 + sum(
            math.prod(s.params["shape"]) for s in self.steps if s.kind == "input")

    def text(self):
        return "\n".join(self.source_lines())


def exec_globals(dev):
    return {"torch": torch, "F": torch.nn.functional, "make": make, "dev": dev,
            "inf": math.inf, "nan": math.nan, "__builtins__": __builtins__}


def reproducer(program, mismatch=None, float64_mode=None):
    """A standalone Python snippet that runs `program` on the CPU and on neuron and prints what
    differs (`mismatch` is a Mismatch from the comparator)."""
    lines = ["# torch_neuron differential fuzzer reproducer",
             f"# seed {program.seed}: python test/fuzz/run.py --seed {program.seed}"]
    if mismatch is not None:
        for text in str(mismatch).splitlines():
            lines.append(f"# {text}")
    lines += ["import math", "import torch", "import torch_neuron", "from math import inf, nan",
              "F = torch.nn.functional", ""]
    if float64_mode:
        lines += [f"torch_neuron.set_float64_mode({float64_mode!r})", ""]
    lines += MAKE_SOURCE.rstrip().splitlines() + ["", "", "def run(dev):", "    r = {}"]
    for step in program.steps:
        lines.append("    try:")
        lines.append(f"        {step.render()}")
        for out in step.outs:
            lines.append(f"        r[{out!r}] = {out}")
        label = repr("error in: " + step.render()[:60])
        lines.append("    except Exception as e:")
        lines.append(f"        r[{label}] = type(e).__name__ + ': ' + str(e).splitlines()[0]")
    lines += ["    return r", "", "", 'cpu, neuron = run("cpu"), run("neuron")',
              "names = " + repr(sorted(mismatch.names) if mismatch is not None and mismatch.names else None),
              "for name in sorted(set(cpu) | set(neuron), key=str):",
              "    if names and name not in names and not name.startswith('error'):",
              "        continue",
              "    c, n = cpu.get(name), neuron.get(name)",
              "    if isinstance(c, torch.Tensor) and isinstance(n, torch.Tensor):",
              "        print(name, 'cpu   ', c.dtype, tuple(c.shape), c.stride(), c.detach())",
              "        print(name, 'neuron', n.dtype, tuple(n.shape), n.stride(), n.detach().cpu())",
              "    else:",
              "        print(name, 'cpu   ', c)",
              "        print(name, 'neuron', n)"]
    return "\n".join(lines) + "\n"
