"""Random programs from a seed. The generator runs each step on the CPU as it writes it, so it
knows every value's dtype, shape and strides when it picks the next step. A step the CPU
rejects is kept now and then (both devices must raise the same exception type) and otherwise
dropped."""

import math
import random
import re
import warnings

import torch

from .program import Program, Step, exec_globals

DTYPES = ["float32", "bfloat16", "float16", "float64", "int64", "int32", "bool", "complex64"]
DTYPE_WEIGHTS = [8, 2, 2, 2.5, 3, 2, 2, 1.2]
FLOATS = ("float32", "bfloat16", "float16", "float64")
TORCH_DTYPE = {d: getattr(torch, d) for d in DTYPES}
NAME_OF = {v: k for k, v in TORCH_DTYPE.items()}
NAME_OF[torch.complex128] = "complex128"
NAME_OF[torch.uint8] = "uint8"
NAME_OF[torch.int16] = "int16"
NAME_OF[torch.int8] = "int8"

MAX_NUMEL = 4096
KEEP_ERROR = 0.08  # share of steps the CPU rejects that stay in the program

UNARY_FLOAT = ["exp", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
               "sigmoid", "erf", "erfc", "erfinv", "expm1", "log1p", "asin", "acos", "atan",
               "sinh", "cosh", "asinh", "acosh", "atanh", "lgamma", "digamma", "reciprocal",
               "frac", "trunc", "floor", "ceil", "round", "exp2", "sinc", "i0", "deg2rad",
               "logit", "nan_to_num", "signbit", "isnan", "isinf", "isfinite", "isposinf",
               "angle", "sgn"]
UNARY_ANY = ["abs", "neg", "sign", "square", "relu", "positive", "logical_not", "bitwise_not",
             "conj_physical", "isreal"]
UNARY_F = ["F.gelu", "F.silu", "F.mish", "F.softplus", "F.elu", "F.selu", "F.leaky_relu",
           "F.hardswish", "F.hardsigmoid", "F.logsigmoid", "F.softsign", "F.relu6",
           "F.tanhshrink", "F.hardtanh", "F.celu", "F.hardshrink", "F.softshrink"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2",
          "maximum", "minimum", "fmax", "fmin", "hypot", "copysign", "eq", "ne", "lt", "le", "gt",
          "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
          "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "xlogy", "nextafter",
          "heaviside", "gcd", "lcm", "float_power", "true_divide", "mul", "add", "sub", "ldexp"]
OPERATORS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floor_divide": "//",
             "remainder": "%", "pow": "**", "bitwise_and": "&", "bitwise_or": "|",
             "bitwise_xor": "^", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">",
             "ge": ">=", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>"}
# ops whose out= may alias an input (same positions: in-place semantics), and ops that check
# the overlap themselves
ELEMENTWISE = set(UNARY_FLOAT + UNARY_ANY + BINARY + ["where", "clamp", "addcmul", "addcdiv", "lerp", "cat",
                                                      "stack", "index_select", "cumsum", "cummax", "ternary",
                                                      "unary", "sort"])
SCALARS = ["2", "-1", "0", "3", "0.5", "-2.25", "1e-3", "True", "False", "1e4", "inf", "nan",
           "-0.0", "7", "2.5", "(1+2j)", "torch.tensor(2.5)", "torch.tensor(3)",
           "torch.tensor(True)", "torch.tensor(-1.5, dtype=torch.float64)"]


def storage_ptr(v):
    if isinstance(v, torch.Tensor):
        s = v.untyped_storage()
        return s.data_ptr() if s.nbytes() else None
    return None


def used_refs(template, refs):
    """Drops the references a template does not use (the shrinker follows references)."""
    used = sorted({int(k) for k in re.findall(r"(?<!\{)\{(\d+)\}", template)})
    if used == list(range(len(refs))):
        return template, list(refs)
    mapping = {old: new for new, old in enumerate(used)}
    template = re.sub(r"(?<!\{)\{(\d+)\}", lambda m: "{%d}" % mapping[int(m.group(1))], template)
    return template, [refs[k] for k in used]


def is_expression(text):
    try:
        compile(text, "<gen>", "eval")
        return True
    except SyntaxError:
        return False


def rshape(r, rank=None, zero=0.04):
    if rank is None:
        rank = r.choices([0, 1, 2, 3, 4], [0.08, 0.25, 0.35, 0.22, 0.10])[0]
    return tuple(0 if r.random() < zero else r.choices([1, 2, 3, 4, 5, 6], [2, 3, 3, 3, 2, 1])[0]
                 for _ in range(rank))


class Gen:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.env = exec_globals("cpu")
        self.steps = []
        self.count = 0
        self.input_seed = (seed * 7919) % 1_000_003
        self.uses_float64 = False
        self.autograd = self.r.random() < 0.35
        self.ops = 0

    # --- values -----------------------------------------------------------------------------

    def tensors(self, pred=None):
        def ok(v):
            try:
                return pred is None or bool(pred(v))
            except Exception:  # noqa: BLE001  (e.g. grad_fn of a view invalidated in place)
                return False
        return [k for k, v in self.env.items() if k[:1] == "v" and isinstance(v, torch.Tensor) and ok(v)]

    def pick(self, pred=None, new=0.25, **make_kwargs):
        """A live tensor satisfying `pred`, or (sometimes, or when there is none) a new input."""
        names = self.tensors(pred)
        if names and self.r.random() > new:
            # Prefer recent values: programs become chains.
            weights = [1 + i for i in range(len(names))]
            return self.r.choices(names, weights)[0]
        name = self.new_input(**make_kwargs)
        if name is not None and (pred is None or pred(self.env[name])):
            return name
        return None

    def t(self, name):
        return self.env[name]

    def fresh(self):
        name = f"v{self.count}"
        self.count += 1
        return name

    def dtype(self, choices=None):
        if choices is None:
            return self.r.choices(DTYPES, DTYPE_WEIGHTS)[0]
        return self.r.choice(choices)

    def new_input(self, dtype=None, shape=None, dist=None, grad=None):
        r = self.r
        dtype = dtype or self.dtype()
        shape = rshape(r) if shape is None else tuple(shape)
        if dist is None:
            if dtype in FLOATS or dtype == "complex64":
                dist = r.choices(["normal", "small", "pos", "special", "wide"], [6, 2, 1, 1, 0.5])[0]
            elif dtype in ("int64", "int32"):
                dist = r.choices(["small", "big"], [6, 1])[0]
            else:
                dist = "normal"
        if grad is None:
            grad = self.autograd and dtype in FLOATS and r.random() < 0.6
        self.input_seed += 1
        params = {"dtype": dtype, "shape": shape, "seed": self.input_seed, "dist": dist, "grad": grad}
        step = Step([self.fresh()], "", (), kind="input", label="make", params=params)
        if not self.run(step, keep_error=0):
            return None
        return step.outs[0]

    def index(self, size, n=None, dtype="int64", negative=True, bad=0.03, shape=None):
        """An index tensor (on the device) with values valid for a dim of `size`."""
        r = self.r
        if shape is None:
            shape = (r.choice([0, 1, 2, 3, 4, 5]) if n is None else n,)
        lo, hi = (-size if negative and r.random() < 0.3 else 0), max(size, 1)
        if r.random() < bad:
            hi += 2
        return self.new_input(dtype=dtype, shape=shape, dist=f"range:{lo}:{hi}", grad=False)

    def literal_index(self, size, n):
        vals = [self.r.randrange(-size, size) if size else 0 for _ in range(n)]
        return f"torch.tensor({vals!r}, dtype=torch.int64)"

    def dim(self, t, allow_none=False):
        if allow_none and self.r.random() < 0.15:
            return None
        nd = t.dim()
        if nd == 0:
            return self.r.choice([0, -1])
        return self.r.randrange(-nd, nd)

    def scalar(self, t=None):
        s = self.r.choice(SCALARS)
        return s

    # --- steps ------------------------------------------------------------------------------

    def run(self, step, keep_error=KEEP_ERROR):
        """Runs `step` on the CPU; appends it if it ran (or, sometimes, if it raised)."""
        out_refs = self.out_refs(step)
        before = {r: (storage_ptr(self.env.get(r)), tuple(getattr(self.env.get(r), "shape", ())))
                  for r in step.refs}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(compile(step.render(), "<gen>", "exec"), self.env)
        except Exception:  # noqa: BLE001
            for out in step.outs:
                self.env.pop(out, None)
            if self.r.random() < keep_error:
                self.steps.append(step)
            return False
        if out_refs and self.undefined_out(step, out_refs, before):
            return False
        for out in step.outs:
            v = self.env.get(out)
            vs = v if isinstance(v, (tuple, list)) else [v]
            for x in vs:
                if isinstance(x, torch.Tensor):
                    if x.numel() > MAX_NUMEL or x.untyped_storage().nbytes() > 64 * MAX_NUMEL:
                        for o in step.outs:
                            self.env.pop(o, None)
                        return False
                    if x.dtype in (torch.float64, torch.complex128):
                        self.uses_float64 = True
        if "float64" in step.render() or "complex128" in step.render():
            self.uses_float64 = True
        self.steps.append(step)
        return True

    @staticmethod
    def out_refs(step):
        found = re.findall(r"out=\(?\{(\d+)\}(?:[^,)]*)(?:, \{(\d+)\})?", step.template)
        return {step.refs[int(k)] for pair in found for k in pair if k != "" and int(k) < len(step.refs)}

    def undefined_out(self, step, out_refs, before):
        """An out= argument that shares memory with another argument makes the result undefined
        (PyTorch does not check) unless the op is elementwise and the out keeps its shape: such
        steps are not generated."""
        others = {before[r][0] for r in step.refs if r not in out_refs and before[r][0] is not None}
        for o in out_refs:
            ptr, shape = before.get(o, (None, ()))
            k = step.refs.index(o)
            also_input = step.refs.count(o) > 1 or len(  # out= is also an input
                re.findall(r"(?<!\{)\{%d\}" % k, step.template)) > 1
            if not also_input and (ptr is None or ptr not in others):
                continue
            now = self.env.get(o)
            if tuple(getattr(now, "shape", ())) != shape or step.params.get("op") not in ELEMENTWISE:
                return True
        return False

    def emit(self, template, refs, label, nouts=1, keep_error=KEEP_ERROR, kind="op", **params):
        template, refs = used_refs(template, refs)
        params.setdefault("op", label.split(".")[0])
        step = Step([self.fresh() for _ in range(nouts)], template, refs, kind=kind, label=label,
                    params=params)
        ok = self.run(step, keep_error)
        self.ops += 1
        return step.outs if ok else None

    def emit_stmt(self, template, refs, label, keep_error=KEEP_ERROR, bind=True, **params):
        """An in-place statement: bound to a new name (which aliases its target) or not."""
        if bind and self.r.random() < 0.5 and is_expression(template.format(*refs)):
            return self.emit(template, refs, label, keep_error=keep_error, **params)
        template, refs = used_refs(template, refs)
        params.setdefault("op", label.split(".")[0])
        step = Step([], template, refs, label=label, params=params)
        self.ops += 1
        return self.run(step, keep_error)

    # --- op families ------------------------------------------------------------------------

    def op_input(self):
        self.new_input()

    def op_factory(self):
        r = self.r
        dt = self.dtype()
        shape = rshape(r)
        choice = r.randrange(8)
        if choice == 0:
            n = r.randint(0, 8)
            self.emit(f"torch.arange({n}, dtype=torch.{dt}, device=dev)", [], "arange")
        elif choice == 1:
            self.emit(f"torch.arange({r.randint(-3, 2)}, {r.randint(2, 7)}, {r.choice([1, 2, 0.5])}, device=dev)", [], "arange")
        elif choice == 2:
            self.emit(f"torch.zeros({shape!r}, dtype=torch.{dt}, device=dev)", [], "zeros")
        elif choice == 3:
            self.emit(f"torch.ones({shape!r}, dtype=torch.{dt}, device=dev)", [], "ones")
        elif choice == 4:
            self.emit(f"torch.full({shape!r}, {self.scalar()}, dtype=torch.{dt}, device=dev)", [], "full")
        elif choice == 5:
            self.emit(f"torch.eye({r.randint(0, 5)}, {r.randint(1, 5)}, dtype=torch.{dt}, device=dev)", [], "eye")
        elif choice == 6:
            self.emit(f"torch.linspace({r.choice([-2, 0, 1.5])}, {r.choice([3, 10, -1])}, {r.randint(0, 7)}, device=dev, dtype=torch.{r.choice(FLOATS)})", [], "linspace")
        else:
            x = self.pick()
            if x:
                fn = r.choice(["zeros_like", "ones_like", "full_like"])
                extra = f", {self.scalar()}" if fn == "full_like" else ""
                mf = r.choice(["", ", dtype=torch." + self.dtype(), ", memory_format=torch.preserve_format"])
                self.emit(f"torch.{fn}({{0}}{extra}{mf})", [x], fn)

    def op_view(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        nd, shape = t.dim(), list(t.shape)
        c = r.randrange(24)
        if c == 0:
            self.emit("{0}.t()", [x], "t")
        elif c == 1 and nd:
            self.emit(f"{{0}}.transpose({self.dim(t)}, {self.dim(t)})", [x], "transpose")
        elif c == 2:
            perm = list(range(nd))
            r.shuffle(perm)
            self.emit(f"{{0}}.permute({', '.join(map(str, perm))}{',' if nd == 1 else ''})" if nd else "{0}.permute(())", [x], "permute")
        elif c == 3 and nd:
            d = self.dim(t)
            size = shape[d]
            start = r.randint(0, size)
            length = r.randint(0, size - start)
            self.emit(f"{{0}}.narrow({d}, {start}, {length})", [x], "narrow")
        elif c == 4 and nd:
            d = self.dim(t)
            if shape[d]:
                self.emit(f"{{0}}.select({d}, {r.randrange(-shape[d], shape[d])})", [x], "select")
        elif c == 5 and nd:
            parts = []
            for s in shape[: r.randint(1, nd)]:
                a = r.randint(0, s)
                b = r.randint(a, s)
                step = r.choice([1, 1, 2, 3])
                parts.append(r.choice([f"{a}:{b}:{step}", f"{a}:", f"::{step}", ":", f"{a}:{b}",
                                       str(r.randrange(-s, s)) if s else ":", "None", "..."]))
            self.emit(f"{{0}}[{', '.join(parts)}]", [x], "slice")
        elif c == 6:
            self.emit(f"{{0}}.unsqueeze({r.randint(-nd - 1, nd)})", [x], "unsqueeze")
        elif c == 7:
            arg = "" if r.random() < 0.4 or not nd else str(self.dim(t))
            self.emit(f"{{0}}.squeeze({arg})", [x], "squeeze")
        elif c == 8:
            new = [r.choice([s, -1]) if s == 1 or r.random() < 0.3 else s for s in shape]
            new = [r.choice([1, 2, 3]) if s == 1 and r.random() < 0.7 else s for s in new]
            lead = [r.choice([1, 2, 3])] if r.random() < 0.3 else []
            self.emit(f"{{0}}.expand({', '.join(map(str, lead + new))}{',' if len(lead + new) == 1 else ''})" if lead + new else "{0}.expand(())", [x], "expand")
        elif c == 9:
            self.emit(f"{{0}}.flatten({r.choice(['', '1', '-2', '0, -1'])})", [x], "flatten")
        elif c == 10:
            n = t.numel()
            divs = [d for d in range(1, n + 1) if n % d == 0] or [1]
            a = r.choice(divs)
            shp = r.choice([f"({a}, -1)", f"(-1,)", f"({n},)", f"(-1, {a}, 1)", "(1, -1)"])
            fn = r.choice(["view", "reshape", "reshape"])
            self.emit(f"{{0}}.{fn}{shp}", [x], fn)
        elif c == 11 and nd:
            d = self.dim(t)
            size = r.randint(1, 3)
            self.emit(f"{{0}}.unfold({d}, {size}, {r.randint(1, 2)})", [x], "unfold")
        elif c == 12 and nd >= 2:
            self.emit(f"{{0}}.diagonal({r.randint(-2, 2)}, {r.choice([0, 1, -1])}, {r.choice([-2, 1, 0])})", [x], "diagonal")
        elif c == 13 and nd:
            self.emit(f"{{0}}.movedim({self.dim(t)}, {self.dim(t)})", [x], "movedim")
        elif c == 14 and t.is_contiguous():
            # as_strided inside the tensor's own elements
            n = t.numel()
            if n:
                size = [r.randint(1, 3) for _ in range(r.randint(1, 3))]
                stride = [r.choice([0, 1, 2, 3, n // 2]) for _ in size]
                span = sum((s - 1) * st for s, st in zip(size, stride))
                if span < n:
                    off = t.storage_offset() + r.randint(0, n - 1 - span)
                    self.emit(f"{{0}}.as_strided({tuple(size)!r}, {tuple(stride)!r}, {off})", [x], "as_strided")
        elif c == 15:
            fn = r.choice(["split", "chunk", "unbind", "tensor_split"])
            d = self.dim(t) if nd else 0
            if fn == "unbind":
                tmpl = f"{{0}}.unbind({d})"
            else:
                tmpl = f"{{0}}.{fn}({r.randint(1, 3)}, {d})"
            outs = self.emit(tmpl, [x], fn)
            if outs and isinstance(self.env[outs[0]], tuple) and self.env[outs[0]]:
                k = r.randrange(len(self.env[outs[0]]))
                self.emit(f"{{0}}[{k}]", outs, "getitem")
        elif c == 16:
            dt = r.choice(["int32", "float32", "int16", "uint8", "bfloat16", "float16", "int64",
                           "float64", "bool", "int8", "complex64"])
            self.emit(f"{{0}}.view(torch.{dt})", [x], "view_dtype")
        elif c == 17:
            if t.is_complex():
                fn = r.choice(["torch.view_as_real({0})", "{0}.real", "{0}.imag", "{0}.conj()"])
            else:
                fn = r.choice(["{0}.conj()", "{0}.real", "torch.view_as_complex({0})", "{0}.mT",
                               "{0}.mH"])
            self.emit(fn, [x], fn.split("(")[0].replace("{0}.", ""))
        elif c == 18 and nd:
            d = self.dim(t)
            self.emit(f"{{0}}.unflatten({d}, ({shape[d]}, 1))" if r.random() < 0.5 else
                      f"{{0}}.unflatten({d}, (-1, 1))", [x], "unflatten")
        elif c == 19:
            self.emit("{0}.detach()", [x], "detach")
        elif c == 20:
            self.emit("{0}.view_as({1})", [x, x], "view_as")
        elif c == 21 and nd >= 2:
            self.emit(f"{{0}}.swapaxes({self.dim(t)}, {self.dim(t)})", [x], "swapaxes")
        elif c == 22:
            self.emit("{0}[...]", [x], "ellipsis")
        else:
            self.emit(f"{{0}}.expand_as({{1}})", [x, self.pick(new=0.1) or x], "expand_as")

    def op_layout(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        c = r.randrange(8)
        if c == 0:
            self.emit("{0}.contiguous()", [x], "contiguous")
        elif c == 1:
            mf = "torch.channels_last" if t.dim() == 4 else ("torch.channels_last_3d" if t.dim() == 5 else r.choice(["torch.preserve_format", "torch.contiguous_format"]))
            self.emit(f"{{0}}.clone(memory_format={mf})", [x], "clone")
        elif c == 2:
            self.emit(f"{{0}}.to(torch.{self.dtype()})", [x], "to")
        elif c == 3:
            fn = r.choice(["float", "long", "int", "bool", "half", "bfloat16", "cfloat"])
            self.emit(f"{{0}}.{fn}()", [x], fn)
        elif c == 4:
            self.emit("{0}.clone()", [x], "clone")
        elif c == 5 and t.dim() == 4:
            self.emit("{0}.contiguous(memory_format=torch.channels_last)", [x], "contiguous")
        elif c == 6:
            y = self.pick(new=0.2)
            if y:
                self.emit("{0}.type_as({1})", [x, y], "type_as")
        else:
            self.emit(f"{{0}}.to(dtype=torch.{self.dtype()}, copy=True)", [x], "to")

    def op_unary(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        pool = r.choice([UNARY_FLOAT, UNARY_ANY, UNARY_F])
        fn = r.choice(pool)
        form = r.randrange(5)
        if fn.startswith("F."):
            extra = ""
            if fn in ("F.leaky_relu", "F.elu", "F.celu") and r.random() < 0.5:
                extra = f", {r.choice([0.1, 2.0, 0.5])}"
            if form == 0 and fn in ("F.relu6", "F.elu", "F.leaky_relu", "F.hardtanh", "F.selu",
                                    "F.celu", "F.hardsigmoid", "F.hardswish", "F.silu", "F.mish"):
                self.emit_stmt(f"{fn}({{0}}{extra}, inplace=True)", [x], fn[2:] + "_")
            else:
                self.emit(f"{fn}({{0}}{extra})", [x], fn[2:])
            return
        extra = ""
        if fn == "logit" and r.random() < 0.5:
            extra = ", eps=1e-6"
        if fn == "nan_to_num" and r.random() < 0.5:
            extra = ", nan=0.5, posinf=100.0"
        if form == 0:
            self.emit_stmt(f"{{0}}.{fn}_({extra[2:]})", [x], fn + "_")
        elif form == 1:
            o = self.out_tensor(t)
            if o:
                self.emit_stmt(f"torch.{fn}({{0}}{extra}, out={{1}})", [x, o], fn + ".out", bind=False)
        elif form == 2:
            self.emit(f"{{0}}.{fn}({extra[2:]})", [x], fn)
        else:
            self.emit(f"torch.{fn}({{0}}{extra})", [x], fn)

    def out_tensor(self, like, dtype=None):
        """An out= target: right shape and dtype usually; else wrong shape, dtype, or a view."""
        r = self.r
        c = r.randrange(10)
        dt = dtype or NAME_OF.get(like.dtype, "float32")
        shape = tuple(like.shape)
        if c == 0:
            dt = self.dtype()
        elif c == 1:
            shape = rshape(r)
        elif c == 2:
            shape = (0,)
        elif c == 3:
            names = self.tensors(lambda v: not v.requires_grad)
            if names:
                return r.choice(names)
        if dt not in TORCH_DTYPE and dt != "complex128":
            dt = "float32"
        if c == 4 and len(shape) == 2:  # a transposed (column-major) out of the right shape
            out = self.emit(f"torch.full({shape[::-1]!r}, 7, dtype=torch.{dt}, device=dev)", [], "full")
            out = self.emit("{0}.t()", out, "t") if out else None
        else:
            out = self.emit(f"torch.full({shape!r}, 7, dtype=torch.{dt}, device=dev)", [], "full")
        return out[0] if out else None

    def partner(self, x):
        """A tensor that broadcasts with x."""
        r = self.r
        t = self.t(x)
        shape = list(t.shape)

        def ok(v):
            try:
                torch.broadcast_shapes(v.shape, t.shape)
                return True
            except Exception:  # noqa: BLE001
                return False

        names = [n for n in self.tensors(ok) if n != x]
        if names and r.random() < 0.55:
            return r.choice(names)
        if r.random() < 0.2:
            return x
        k = r.randint(0, len(shape))
        sub = shape[len(shape) - k:]
        sub = [1 if r.random() < 0.3 else s for s in sub]
        if r.random() < 0.15:
            sub = [r.randint(1, 3)] + sub
        dt = NAME_OF.get(t.dtype, "float32") if r.random() < 0.6 else self.dtype()
        return self.new_input(dtype=dt, shape=sub)

    def op_binary(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        fn = r.choice(BINARY)
        use_scalar = r.random() < 0.3
        y = None if use_scalar else self.partner(x)
        if y is None:
            use_scalar = True
        other = self.scalar() if use_scalar else "{1}"
        refs = [x] if use_scalar else [x, y]
        extra = ""
        if fn in ("add", "sub") and r.random() < 0.2:
            extra = f", alpha={r.choice([2, -1, 0.5, True])}"
        if fn == "div" and r.random() < 0.4:
            extra = f", rounding_mode={r.choice(['floor', 'trunc', None])!r}"
        form = r.randrange(6)
        if form == 0 and fn in OPERATORS:
            op = OPERATORS[fn]
            if r.random() < 0.3 and use_scalar:
                self.emit(f"{other} {op} {{0}}", refs, fn + ".rop")
            else:
                self.emit(f"{{0}} {op} {other}", refs, fn + ".op")
        elif form == 1:
            if fn in OPERATORS and r.random() < 0.4 and not extra:
                self.emit_stmt(f"{{0}} {OPERATORS[fn]}= {other}", refs, fn + ".iop", bind=False)
            else:
                self.emit_stmt(f"{{0}}.{fn}_({other}{extra})", refs, fn + "_")
        elif form == 2:
            try:
                like = torch.broadcast_tensors(self.t(x), self.t(y))[0] if y else self.t(x)
            except Exception:  # noqa: BLE001
                like = self.t(x)
            o = self.out_tensor(like)
            if o:
                self.emit_stmt(f"torch.{fn}({{0}}, {other}{extra}, out={{{len(refs)}}})", refs + [o],
                               fn + ".out", bind=False)
        elif form == 3 and use_scalar and r.random() < 0.5:
            self.emit(f"torch.{fn}({other}, {{0}}{extra})", refs, fn + ".scalar_first")
        elif form == 4:
            self.emit(f"{{0}}.{fn}({other}{extra})", refs, fn)
        else:
            self.emit(f"torch.{fn}({{0}}, {other}{extra})", refs, fn)

    def op_ternary(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        c = r.randrange(7)
        if c == 0:
            cond = self.pick(lambda v: v.dtype == torch.bool, new=0.4, dtype="bool",
                             shape=self.t(x).shape[r.randint(0, self.t(x).dim()):])
            y = self.partner(x)
            if cond and y:
                if r.random() < 0.3:
                    self.emit(f"torch.where({{0}}, {{1}}, {self.scalar()})", [cond, x], "where")
                else:
                    self.emit("torch.where({0}, {1}, {2})", [cond, x, y], "where")
        elif c in (1, 2):
            fn = "addcmul" if c == 1 else "addcdiv"
            y, z = self.partner(x), self.partner(x)
            if y and z:
                v = r.choice(["", ", value=2", ", value=-0.5"])
                if r.random() < 0.4:
                    self.emit_stmt(f"{{0}}.{fn}_({{1}}, {{2}}{v})", [x, y, z], fn + "_")
                else:
                    self.emit(f"torch.{fn}({{0}}, {{1}}, {{2}}{v})", [x, y, z], fn)
        elif c == 3:
            y = self.partner(x)
            if y:
                w = r.choice(["0.25", "1.5", "{2}"])
                refs = [x, y]
                if w == "{2}":
                    z = self.partner(x)
                    if not z:
                        return
                    refs.append(z)
                if r.random() < 0.4:
                    self.emit_stmt(f"{{0}}.lerp_({{1}}, {w})", refs, "lerp_")
                else:
                    self.emit(f"torch.lerp({{0}}, {{1}}, {w})", refs, "lerp")
        elif c == 4:
            lo, hi = r.choice([("-0.5", "0.5"), ("None", "1"), ("0", "None"), ("2", "-1"), ("-3", "3")])
            if r.random() < 0.3:
                self.emit_stmt(f"{{0}}.clamp_({lo}, {hi})", [x], "clamp_")
            else:
                self.emit(f"torch.clamp({{0}}, {lo}, {hi})", [x], "clamp")
        elif c == 5:
            lo, hi = self.partner(x), self.partner(x)
            if lo and hi:
                self.emit(f"torch.clamp({{0}}, min={{1}}, max={{2}})", [x, lo, hi], "clamp.tensor")
        else:
            y = self.partner(x)
            if y:
                self.emit(f"torch.isclose({{0}}, {{1}}, rtol={r.choice([1e-5, 0.1])}, equal_nan={r.choice([True, False])})", [x, y], "isclose")

    def op_reduce(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        nd = t.dim()
        kd = r.choice([True, False])
        d = self.dim(t)
        c = r.randrange(16)
        if c == 0:
            fn = r.choice(["sum", "mean", "prod", "nansum", "nanmean", "amax", "amin", "logsumexp",
                           "all", "any", "count_nonzero", "norm"])
            if fn in ("logsumexp",):
                self.emit(f"torch.{fn}({{0}}, {d}, keepdim={kd})", [x], fn)
            elif fn == "count_nonzero":
                self.emit(f"torch.count_nonzero({{0}}{', ' + str(d) if r.random() < 0.6 else ''})", [x], fn)
            elif fn == "norm":
                self.emit(f"torch.norm({{0}}, p={r.choice([1, 2, 'fro', float('inf'), 3])!r}, dim={d}, keepdim={kd})".replace("inf", "inf"), [x], fn)
            else:
                dims = r.choice([f"{d}", f"({d},)", "()", "None", f"({d}, {self.dim(t)})" if nd >= 2 else f"{d}"])
                extra = ""
                if fn in ("sum", "mean", "prod", "nansum") and r.random() < 0.3:
                    extra = f", dtype=torch.{self.dtype(FLOATS + ('int64', 'complex64'))}"
                if r.random() < 0.2 and fn not in ("prod",):
                    o = self.out_tensor(t)
                    if o:
                        self.emit_stmt(f"torch.{fn}({{0}}, {dims}, keepdim={kd}{extra}, out={{1}})", [x, o], fn + ".out", bind=False)
                        return
                if fn == "prod":
                    dims = str(d)
                self.emit(f"torch.{fn}({{0}}, {dims}, keepdim={kd}{extra})" if fn not in ("all", "any") or r.random() < 0.7 else f"{{0}}.{fn}()", [x], fn)
        elif c == 1:
            fn = r.choice(["sum", "mean", "max", "min", "prod", "std", "var", "median", "nanmedian", "amax", "argmax", "argmin"])
            self.emit(f"{{0}}.{fn}()", [x], fn + ".full")
        elif c == 2:
            fn = r.choice(["max", "min", "median", "nanmedian", "mode"])
            self.emit(f"torch.{fn}({{0}}, {d}, keepdim={kd})", [x], fn + ".dim", nouts=2, dim=d, keepdim=kd)
        elif c == 3:
            fn = r.choice(["argmax", "argmin"])
            self.emit(f"torch.{fn}({{0}}, {d if r.random() < 0.8 else None}, keepdim={kd})", [x], fn)
        elif c == 4:
            fn = r.choice(["std", "var", "std_mean", "var_mean"])
            corr = r.choice(["", ", correction=0", ", correction=2", ", unbiased=False"])
            self.emit(f"torch.{fn}({{0}}, {r.choice([d, None, (d,)])}{corr}, keepdim={kd})", [x], fn)
        elif c == 5:
            fn = r.choice(["cumsum", "cumprod", "logcumsumexp"])
            extra = f", dtype=torch.{self.dtype()}" if r.random() < 0.2 else ""
            if r.random() < 0.25:
                self.emit_stmt(f"{{0}}.{fn}_({d}{extra})", [x], fn + "_")
            else:
                self.emit(f"torch.{fn}({{0}}, {d}{extra})", [x], fn)
        elif c == 6:
            fn = r.choice(["cummax", "cummin"])
            self.emit(f"torch.{fn}({{0}}, {d})", [x], fn, nouts=2)
        elif c == 7:
            self.emit(f"torch.sort({{0}}, dim={d}, descending={r.choice([True, False])}, stable={r.choice([True, False, None])})", [x], "sort", nouts=2)
        elif c == 8:
            self.emit(f"torch.argsort({{0}}, dim={d}, descending={r.choice([True, False])}, stable=True)", [x], "argsort")
        elif c == 9 and nd:
            k = r.randint(0, max(t.shape[d], 0))
            self.emit(f"torch.topk({{0}}, {k}, dim={d}, largest={r.choice([True, False])}, sorted=True)", [x], "topk", nouts=2)
        elif c == 10 and nd:
            k = r.randint(1, max(t.shape[d], 1))
            self.emit(f"torch.kthvalue({{0}}, {k}, {d}, keepdim={kd})", [x], "kthvalue", nouts=2)
        elif c == 11:
            inv, cnt = r.choice([True, False]), r.choice([True, False])
            n = 1 + inv + cnt
            dim = r.choice(["", f", dim={d}"]) if nd else ""
            self.emit(f"torch.unique({{0}}, sorted=True, return_inverse={inv}, return_counts={cnt}{dim})", [x], "unique", nouts=n)
        elif c == 12:
            self.emit(f"torch.aminmax({{0}}, dim={d}, keepdim={kd})" if r.random() < 0.7 else "torch.aminmax({0})", [x], "aminmax", nouts=2)
        elif c == 13 and nd:
            self.emit(f"torch.diff({{0}}, n={r.randint(1, 2)}, dim={d})", [x], "diff")
        elif c == 14:
            y = self.partner(x)
            if y:
                fn = r.choice(["dist", "dot", "vdot", "inner", "cosine_similarity"])
                if fn == "cosine_similarity":
                    self.emit(f"F.cosine_similarity({{0}}, {{1}}, dim={d})", [x, y], fn)
                elif fn == "dist":
                    self.emit(f"torch.dist({{0}}, {{1}}, {r.choice([2, 1, 0, 3.5])})", [x, y], fn)
                else:
                    self.emit(f"torch.{fn}({{0}}, {{1}})", [x, y], fn)
        else:
            self.emit(f"torch.unique_consecutive({{0}}, return_counts=True{', dim=' + str(d) if nd and r.random() < 0.4 else ''})", [x], "unique_consecutive", nouts=2)

    def op_index(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        nd = t.dim()
        d = self.dim(t)
        size = t.shape[d] if nd else 1
        c = r.randrange(20)
        if c == 0:
            i = self.index(size, dtype=r.choice(["int64", "int64", "int32"]), negative=False)
            if i:
                if r.random() < 0.2:
                    o = self.out_tensor(t)
                    if o:
                        self.emit_stmt(f"torch.index_select({{0}}, {d}, {{1}}, out={{2}})", [x, i, o], "index_select.out", bind=False)
                        return
                self.emit(f"torch.index_select({{0}}, {d}, {{1}})", [x, i], "index_select")
        elif c in (1, 2):
            shape = list(t.shape)
            if nd:
                shape[d] = r.randint(0, size + 1)
                shape = [r.randint(0, s) if j != d % nd and r.random() < 0.3 else s for j, s in enumerate(shape)]
            i = self.index(size, shape=tuple(shape), negative=False)
            if i:
                if c == 1:
                    self.emit(f"torch.gather({{0}}, {d}, {{1}})", [x, i], "gather")
                else:
                    kind = r.randrange(5)
                    if kind == 0:
                        self.emit_stmt(f"{{0}}.scatter_({d}, {{1}}, {self.scalar()})", [x, i], "scatter_.value")
                    else:
                        src = self.new_input(dtype=NAME_OF.get(t.dtype, "float32") if r.random() < 0.85 else None,
                                             shape=tuple(s + r.choice([0, 0, 1]) for s in shape), dist="small")
                        if not src:
                            return
                        if kind == 1:
                            self.emit_stmt(f"{{0}}.scatter_add_({d}, {{1}}, {{2}})", [x, i, src], "scatter_add_")
                        elif kind == 2:
                            red = r.choice(["sum", "prod", "mean", "amax", "amin"])
                            self.emit(f"torch.scatter_reduce({{0}}, {d}, {{1}}, {{2}}, {red!r}, include_self={r.choice([True, False])})", [x, i, src], "scatter_reduce")
                        elif kind == 3:
                            self.emit(f"torch.scatter({{0}}, {d}, {{1}}, {{2}})", [x, i, src], "scatter")
                        else:
                            self.emit_stmt(f"{{0}}.scatter_({d}, {{1}}, {{2}}, reduce={r.choice(['add', 'multiply'])!r})", [x, i, src], "scatter_.reduce")
        elif c in (3, 4):
            fn = r.choice(["index_add", "index_copy", "index_fill"])
            n = r.randint(0, 4)
            i = self.index(size, n=n, negative=False)
            if not i:
                return
            if fn == "index_fill":
                self.emit_stmt(f"{{0}}.index_fill_({d}, {{1}}, {self.scalar()})", [x, i], fn + "_")
                return
            shape = list(t.shape)
            if nd:
                shape[d] = n
            src = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=tuple(shape), dist="small")
            if not src:
                return
            alpha = f", alpha={r.choice([2, -1])}" if fn == "index_add" and r.random() < 0.3 else ""
            if r.random() < 0.5:
                self.emit_stmt(f"{{0}}.{fn}_({d}, {{1}}, {{2}}{alpha})", [x, i, src], fn + "_")
            else:
                self.emit(f"torch.{fn}({{0}}, {d}, {{1}}, {{2}}{alpha})", [x, i, src], fn)
        elif c in (5, 6):
            # advanced indexing (read)
            if not nd:
                self.emit("{0}[None]", [x], "getitem")
                return
            form = r.randrange(5)
            if form == 0:
                i = self.index(t.shape[0], shape=rshape(r, r.randint(1, 2)), negative=True)
                if i:
                    self.emit("{0}[{1}]", [x, i], "index")
            elif form == 1:
                self.emit(f"{{0}}[{self.literal_index(t.shape[0], r.randint(0, 4))}]", [x], "index.cpu_index")
            elif form == 2 and nd >= 2:
                i = self.index(t.shape[0], n=3)
                j = self.index(t.shape[nd - 1], n=r.choice([1, 3]))
                if i and j:
                    self.emit("{0}[{1}, ..., {2}]", [x, i, j], "index.two")
            elif form == 3:
                m = self.pick(lambda v: v.dtype == torch.bool and v.shape == t.shape[: v.dim()] and v.dim() > 0,
                              new=0.5, dtype="bool", shape=t.shape[: r.randint(1, nd)])
                if m:
                    self.emit("{0}[{1}]", [x, m], "index.mask")
            else:
                i = self.index(t.shape[-1], n=2)
                if i:
                    self.emit("{0}[..., {1}]", [x, i], "index.last")
        elif c in (7, 8):
            # advanced indexing (write) / index_put_
            if not nd:
                return
            form = r.randrange(4)
            val = self.scalar() if r.random() < 0.4 else None
            if form == 0:
                i = self.index(t.shape[0], n=r.randint(0, 4))
                if not i:
                    return
                if val is None:
                    v = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=tuple(t.shape[1:])[r.randint(0, nd - 1):], dist="small")
                    if v:
                        self.emit_stmt("{0}[{1}] = {2}", [x, i, v], "setitem.index", bind=False)
                else:
                    self.emit_stmt(f"{{0}}[{{1}}] = {val}", [x, i], "setitem.index", bind=False)
            elif form == 1:
                m = self.pick(lambda v: v.dtype == torch.bool and v.shape == t.shape, new=0.5, dtype="bool", shape=t.shape)
                if m:
                    self.emit_stmt(f"{{0}}[{{1}}] = {val or '-7'}", [x, m], "setitem.mask", bind=False)
            elif form == 2:
                i = self.index(t.shape[0], n=r.randint(1, 5))
                if not i:
                    return
                acc = r.choice([True, False])
                n = self.t(i).shape[0]
                v = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=(n,) + tuple(t.shape[1:]) if r.random() < 0.7 else (), dist="small")
                if v:
                    self.emit_stmt(f"{{0}}.index_put_(({{1}},), {{2}}, accumulate={acc})", [x, i, v], "index_put_")
            else:
                self.emit_stmt(f"{{0}}[{self.literal_index(t.shape[0], r.randint(1, 3))}] = {val or '3'}", [x], "setitem.cpu_index", bind=False)
        elif c == 9:
            m = self.pick(lambda v: v.dtype == torch.bool, new=0.5, dtype="bool", shape=t.shape[r.randint(0, nd):])
            if m:
                if r.random() < 0.4:
                    self.emit_stmt(f"{{0}}.masked_fill_({{1}}, {self.scalar()})", [x, m], "masked_fill_")
                else:
                    self.emit(f"torch.masked_fill({{0}}, {{1}}, {self.scalar()})", [x, m], "masked_fill")
        elif c == 10:
            m = self.pick(lambda v: v.dtype == torch.bool, new=0.5, dtype="bool", shape=t.shape[r.randint(0, nd):])
            if m:
                self.emit("torch.masked_select({0}, {1})", [x, m], "masked_select")
        elif c == 11:
            m = self.pick(lambda v: v.dtype == torch.bool, new=0.5, dtype="bool", shape=t.shape)
            if m:
                src = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=(t.numel() + r.randint(0, 2),), dist="small")
                if src:
                    self.emit_stmt("{0}.masked_scatter_({1}, {2})", [x, m, src], "masked_scatter_")
        elif c == 12:
            i = self.index(max(t.numel(), 1), shape=rshape(r, r.randint(0, 2)))
            if i:
                self.emit("torch.take({0}, {1})", [x, i], "take")
        elif c == 13:
            i = self.index(max(t.numel(), 1), n=r.randint(0, 4))
            if i:
                n = self.t(i).numel()
                src = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=(n,), dist="small")
                if src:
                    self.emit_stmt(f"{{0}}.put_({{1}}, {{2}}, accumulate={r.choice([True, False])})", [x, i, src], "put_")
        elif c == 14:
            fn = r.choice(["torch.nonzero({0})", "torch.nonzero({0}, as_tuple=True)", "torch.argwhere({0})",
                           "torch.where({0})", "torch.count_nonzero({0})"])
            self.emit(fn, [x], fn.split("(")[0][6:])
        elif c == 15:
            s = self.emit(f"torch.sort({{0}}.flatten()).values" if r.random() < 0.7 else "{0}", [x], "sort")
            v = self.pick(new=0.5)
            if s and v:
                fn = r.choice(["searchsorted", "bucketize"])
                right = r.choice([True, False])
                if fn == "searchsorted":
                    self.emit(f"torch.searchsorted({{0}}, {{1}}, right={right}, out_int32={r.choice([True, False])})", [s[0], v], fn)
                else:
                    self.emit(f"torch.bucketize({{1}}, {{0}}, right={right})", [s[0], v], fn)
        elif c == 16:
            i = self.index(r.randint(1, 6), shape=rshape(r, r.randint(0, 3)), negative=False)
            w = self.pick(lambda v: v.dim() == 2 and v.is_floating_point(), new=0.5, dtype=r.choice(FLOATS),
                          shape=(r.randint(1, 6), r.randint(1, 4)))
            if i and w:
                pad = f", padding_idx={r.randint(0, 2)}" if r.random() < 0.3 else ""
                self.emit(f"F.embedding({{0}}, {{1}}{pad})", [i, w], "embedding")
        elif c == 17:
            i = self.pick(lambda v: v.dtype == torch.int64 and v.dim() <= 2, new=0.5, dtype="int64",
                          shape=rshape(r, 1), dist="range:0:5")
            if i:
                self.emit(f"F.one_hot({{0}}, {r.choice([-1, 5, 6])})", [i], "one_hot")
        elif c == 18:
            i = self.pick(lambda v: v.dtype in (torch.int64, torch.int32, torch.bool) and v.dim() == 1,
                          new=0.5, dtype="int64", shape=rshape(r, 1), dist="range:0:6")
            if i:
                w = ""
                if r.random() < 0.3:
                    wt = self.new_input(dtype=r.choice(FLOATS), shape=self.t(i).shape)
                    if wt is None:
                        return
                    self.emit(f"torch.bincount({{0}}, {{1}}, minlength={r.randint(0, 8)})", [i, wt], "bincount")
                    return
                self.emit(f"torch.bincount({{0}}{w}, minlength={r.randint(0, 8)})", [i], "bincount")
        else:
            self.emit(f"torch.histc({{0}}, bins={r.randint(1, 6)}, min={r.choice([0, -1])}, max={r.choice([0, 1, 3])})", [x], "histc")

    def op_matmul(self):
        r = self.r
        dt = self.dtype(["float32", "float32", "bfloat16", "float16", "float64", "complex64", "int64"])
        m, k, n = (r.randint(0, 5) if r.random() < 0.1 else r.randint(1, 5) for _ in range(3))
        c = r.randrange(9)

        def inp(shape):
            names = self.tensors(lambda v: tuple(v.shape) == tuple(shape) and NAME_OF.get(v.dtype) == dt)
            if names and r.random() < 0.6:
                return r.choice(names)
            name = self.new_input(dtype=dt if r.random() < 0.9 else None, shape=shape, dist="small" if dt in ("int64",) else None)
            if name and r.random() < 0.25 and len(shape) >= 2:
                # a transposed operand: the same shape over column-major memory
                s = list(shape)
                s[-1], s[-2] = s[-2], s[-1]
                base = self.new_input(dtype=NAME_OF.get(self.t(name).dtype), shape=tuple(s))
                out = self.emit("{0}.mT", [base], "mT") if base else None
                return out[0] if out else name
            return name

        if c == 0:
            a, b = inp((m, k)), inp((k, n))
            if a and b:
                if r.random() < 0.2:
                    o = self.out_tensor(torch.empty(m, n, dtype=TORCH_DTYPE.get(dt, torch.float32)))
                    if o:
                        self.emit_stmt("torch.mm({0}, {1}, out={2})", [a, b, o], "mm.out", bind=False)
                        return
                self.emit(r.choice(["torch.mm({0}, {1})", "{0} @ {1}", "torch.matmul({0}, {1})"]), [a, b], "mm")
        elif c == 1:
            bsz = r.randint(1, 3)
            a, b = inp((bsz, m, k)), inp((bsz, k, n))
            if a and b:
                self.emit(r.choice(["torch.bmm({0}, {1})", "{0} @ {1}"]), [a, b], "bmm")
        elif c == 2:
            a, b = inp((m, k)), inp((k,))
            if a and b:
                self.emit("torch.mv({0}, {1})", [a, b], "mv")
        elif c == 3:
            a, b, bias = inp((m, k)), inp((k, n)), inp(r.choice([(n,), (m, n), (1, n)]))
            if a and b and bias:
                ab = f", beta={r.choice([0, 1, 0.5])}, alpha={r.choice([1, 2])}" if r.random() < 0.4 else ""
                self.emit(f"torch.addmm({{2}}, {{0}}, {{1}}{ab})", [a, b, bias], "addmm")
        elif c == 4:
            a, b = inp((r.randint(1, 2), m, k)), inp((k, n))
            if a and b:
                self.emit("torch.matmul({0}, {1})", [a, b], "matmul")
        elif c == 5:
            a, b = inp((m, k)), inp((n, k))
            bias = inp((n,)) if r.random() < 0.5 else None
            if a and b:
                if bias:
                    self.emit("F.linear({0}, {1}, {2})", [a, b, bias], "linear")
                else:
                    self.emit("F.linear({0}, {1})", [a, b], "linear")
        elif c == 6:
            a, b = inp((m,)), inp((n,))
            if a and b:
                self.emit(r.choice(["torch.outer({0}, {1})", "torch.einsum('i,j->ij', {0}, {1})"]), [a, b], "outer")
        elif c == 7:
            bsz = r.randint(1, 3)
            a, b = inp((bsz, m, k)), inp((bsz, k, n))
            if a and b:
                self.emit(r.choice(["torch.einsum('bij,bjk->bik', {0}, {1})", "torch.einsum('bij,bjk->b', {0}, {1})"]), [a, b], "einsum")
        else:
            bsz = r.randint(1, 3)
            a, b, s = inp((bsz, m, k)), inp((bsz, k, n)), inp((bsz, m, n))
            if a and b and s:
                self.emit("torch.baddbmm({2}, {0}, {1}, beta=0.5, alpha=2)", [a, b, s], "baddbmm")

    def op_nn(self):
        r = self.r
        dt = r.choice(["float32", "float32", "float32", "bfloat16", "float16", "float64"])
        c = r.randrange(20)

        def inp(shape, dtype=dt, **kw):
            names = self.tensors(lambda v: tuple(v.shape) == tuple(shape) and NAME_OF.get(v.dtype) == dtype)
            if names and r.random() < 0.5:
                return r.choice(names)
            return self.new_input(dtype=dtype, shape=shape, **kw)

        N, C, L = r.randint(1, 3), r.randint(1, 4), r.randint(1, 7)
        if c == 0:
            x = self.pick(lambda v: v.is_floating_point() and v.dim() > 0, new=0.3, dtype=dt)
            if x:
                d = self.dim(self.t(x))
                fn = r.choice(["softmax", "log_softmax", "softmin"])
                extra = f", dtype=torch.{r.choice(FLOATS)}" if r.random() < 0.2 else ""
                self.emit(f"F.{fn}({{0}}, {d}{extra})", [x], fn)
        elif c == 1:
            x = inp((N, C, L))
            k = r.randint(1, 2)
            if x:
                w = [r.random() < 0.6, r.random() < 0.6]
                shape = (C, L) if k == 2 else (L,)
                refs = [x]
                wb = ""
                if w[0]:
                    wn = inp(shape)
                    if wn:
                        refs.append(wn)
                        wb += f", weight={{{len(refs) - 1}}}"
                if w[1]:
                    bn = inp(shape)
                    if bn:
                        refs.append(bn)
                        wb += f", bias={{{len(refs) - 1}}}"
                self.emit(f"F.layer_norm({{0}}, {shape!r}{wb}, eps={r.choice([1e-5, 1e-3])})", refs, "layer_norm")
        elif c == 2:
            g = r.choice([1, 2])
            x = inp((N, C * g, L))
            if x:
                self.emit(f"F.group_norm({{0}}, {g})", [x], "group_norm")
        elif c == 3:
            x = inp((N, C, L))
            rm, rv = inp((C,), dtype="float32" if dt != "float64" else dt, dist="small"), inp((C,), dtype="float32" if dt != "float64" else dt, dist="pos")
            if x and rm and rv:
                training = r.choice([True, False])
                self.emit(f"F.batch_norm({{0}}, {{1}}, {{2}}, training={training}, momentum=0.5)", [x, rm, rv], "batch_norm")
        elif c == 4:
            k = r.randint(1, 3)
            x, w = inp((N, C, L + k)), inp((r.randint(1, 3), C, k))
            if x and w:
                extra = r.choice(["", ", stride=2", ", padding=1", ", dilation=2", ", padding='same'"])
                self.emit(f"F.conv1d({{0}}, {{1}}{extra})", [x, w], "conv1d")
        elif c == 5:
            k = r.randint(1, 2)
            x, w = inp((N, C, L + 1, L + k)), inp((r.randint(1, 3), C, k, k))
            if x and w:
                if r.random() < 0.3:
                    out = self.emit("{0}.contiguous(memory_format=torch.channels_last)", [x], "contiguous")
                    if out:
                        x = out[0]
                extra = r.choice(["", ", stride=2", ", padding=1", ", groups=1"])
                b = inp((self.t(w).shape[0],)) if r.random() < 0.5 else None
                if b:
                    self.emit(f"F.conv2d({{0}}, {{1}}, {{2}}{extra})", [x, w, b], "conv2d")
                else:
                    self.emit(f"F.conv2d({{0}}, {{1}}{extra})", [x, w], "conv2d")
        elif c == 6:
            x = inp((N, C, L + 2))
            if x:
                fn = r.choice(["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "lp_pool1d"])
                if fn.startswith("adaptive"):
                    self.emit(f"F.{fn}({{0}}, {r.randint(1, 3)})", [x], fn)
                elif fn == "lp_pool1d":
                    self.emit(f"F.lp_pool1d({{0}}, 2, {r.randint(1, 2)})", [x], fn)
                else:
                    extra = ", return_indices=True" if fn == "max_pool1d" and r.random() < 0.3 else ""
                    self.emit(f"F.{fn}({{0}}, {r.randint(1, 3)}, stride={r.randint(1, 2)}{extra})", [x], fn, nouts=2 if extra else 1)
        elif c == 7:
            x = inp((N, C, L + 2, L))
            if x:
                fn = r.choice(["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"])
                if fn.startswith("adaptive"):
                    self.emit(f"F.{fn}({{0}}, ({r.randint(1, 3)}, {r.randint(1, 2)}))", [x], fn)
                else:
                    self.emit(f"F.{fn}({{0}}, {r.randint(1, 2)}, ceil_mode={r.choice([True, False])})", [x], fn)
        elif c == 8:
            x = inp((N, C, L))
            if x:
                mode = r.choice(["constant", "reflect", "replicate", "circular"])
                pad = (r.randint(0, 2), r.randint(-1, 2))
                val = f", value={self.scalar()}" if mode == "constant" else ""
                self.emit(f"F.pad({{0}}, {pad!r}, mode={mode!r}{val})", [x], "pad." + mode, pad=pad)
        elif c == 9:
            x = inp((N, C, L))
            if x:
                mode = r.choice(["nearest", "linear", "nearest-exact"])
                ac = ", align_corners=True" if mode == "linear" and r.random() < 0.5 else ""
                size = r.choice([f"size={r.randint(1, 9)}", f"scale_factor={r.choice([2, 0.5, 1.5])}"])
                self.emit(f"F.interpolate({{0}}, {size}, mode={mode!r}{ac})", [x], "interpolate")
        elif c == 10:
            x = inp((N, C))
            tgt = inp((N,), dtype="int64", dist=f"range:{0 if r.random() < 0.9 else -1}:{C}")
            if x and tgt:
                fn = r.choice(["cross_entropy", "nll_loss"])
                red = r.choice(["mean", "sum", "none"])
                extra = ", label_smoothing=0.1" if fn == "cross_entropy" and r.random() < 0.3 else ""
                extra += ", ignore_index=0" if r.random() < 0.2 else ""
                self.emit(f"F.{fn}({{0}}, {{1}}, reduction={red!r}{extra})", [x, tgt], fn)
        elif c == 11:
            x = self.pick(lambda v: v.is_floating_point(), new=0.3, dtype=dt)
            if x:
                y = self.partner(x)
                if y:
                    fn = r.choice(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                   "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss"])
                    red = r.choice(["mean", "sum", "none"])
                    self.emit(f"F.{fn}({{0}}, {{1}}, reduction={red!r})", [x, y], fn)
        elif c == 12:
            x = self.pick(lambda v: v.is_floating_point() and v.dim() > 0, new=0.3, dtype=dt)
            if x:
                self.emit(f"F.normalize({{0}}, p={r.choice([1, 2, 3])}, dim={self.dim(self.t(x))})", [x], "normalize")
        elif c == 13:
            x = inp((N, C * 2, L))
            if x:
                self.emit(f"F.glu({{0}}, {r.choice([1, -2])})", [x], "glu")
        elif c == 14:
            B, H, S, E = r.randint(1, 2), r.randint(1, 2), r.randint(1, 5), r.choice([2, 4, 8])
            q, k, v = inp((B, H, S, E)), inp((B, H, S + r.randint(0, 2), E)), None
            if q and k:
                v = inp(tuple(self.t(k).shape))
            if q and k and v:
                causal = r.choice([True, False])
                self.emit(f"F.scaled_dot_product_attention({{0}}, {{1}}, {{2}}, is_causal={causal})", [q, k, v], "sdpa")
        elif c == 15:
            x = inp((N, C * 4, L, L))
            if x:
                self.emit("F.pixel_shuffle({0}, 2)", [x], "pixel_shuffle")
        elif c == 16:
            x = inp((N, C, L, L + 1))
            if x:
                self.emit(f"F.unfold({{0}}, {r.randint(1, 2)})", [x], "unfold_im2col")
        elif c == 17:
            x = self.pick(lambda v: v.is_floating_point(), new=0.3, dtype=dt)
            if x:
                self.emit(f"F.dropout({{0}}, p={r.choice([0.0, 0.5])}, training=False)", [x], "dropout")
        elif c == 18:
            i = inp((r.randint(1, 6),), dtype="int64", dist="range:0:5")
            w = inp((5, r.randint(1, 3)))
            if i and w:
                mode = r.choice(["sum", "mean", "max"])
                off = self.emit("torch.tensor([0, 1], device=dev)" if r.random() < 0.7 else "torch.tensor([0], device=dev)", [], "tensor")
                if off:
                    self.emit(f"F.embedding_bag({{0}}, {{1}}, {{2}}, mode={mode!r})", [i, w, off[0]], "embedding_bag")
        else:
            x = inp((N, r.choice([2, 3]), L, L))
            if x:
                self.emit(f"F.instance_norm({{0}})" if r.random() < 0.5 else "F.local_response_norm({0}, 2)", [x], "norm2d")

    def op_misc(self):
        r = self.r
        x = self.pick()
        if x is None:
            return
        t = self.t(x)
        nd = t.dim()
        d = self.dim(t)
        c = r.randrange(18)
        if c in (0, 1):
            # cat/stack: other tensors shaped like x except along d
            n = r.randint(1, 3)
            refs = [x]
            for _ in range(n - 1):
                shape = list(t.shape)
                if nd and c == 0:
                    shape[d] = r.randint(0, 3)
                if r.random() < 0.1:
                    shape = [0]  # legacy: cat skips 1-D empty tensors
                y = self.new_input(dtype=NAME_OF.get(t.dtype, "float32") if r.random() < 0.8 else None, shape=tuple(shape))
                if y:
                    refs.append(y)
            names = ", ".join(f"{{{i}}}" for i in range(len(refs)))
            fn = "cat" if c == 0 else r.choice(["stack", "hstack", "vstack", "dstack"])
            if fn == "cat" and r.random() < 0.15:
                o = self.out_tensor(t)
                if o:
                    self.emit_stmt(f"torch.cat([{names}], {d}, out={{{len(refs)}}})", refs + [o], "cat.out", bind=False)
                    return
            self.emit(f"torch.{fn}([{names}]{', ' + str(d) if fn in ('cat', 'stack') else ''})", refs, fn)
        elif c == 2 and nd >= 1:
            fn = r.choice(["tril", "triu"])
            if r.random() < 0.3:
                self.emit_stmt(f"{{0}}.{fn}_({r.randint(-2, 2)})", [x], fn + "_")
            else:
                self.emit(f"torch.{fn}({{0}}, {r.randint(-2, 2)})", [x], fn)
        elif c == 3:
            self.emit(f"torch.roll({{0}}, {r.randint(-3, 3)}{', ' + str(d) if r.random() < 0.7 and nd else ''})", [x], "roll")
        elif c == 4:
            reps = tuple(r.randint(1, 2) for _ in range(max(nd, 1) + r.randint(0, 1)))
            self.emit(f"{{0}}.repeat{reps!r}" if len(reps) > 1 else f"{{0}}.repeat({reps[0]})", [x], "repeat")
        elif c == 5:
            self.emit(f"torch.flip({{0}}, ({d},))" if nd else "torch.flip({0}, ())", [x], "flip")
        elif c == 6:
            self.emit(f"torch.repeat_interleave({{0}}, {r.randint(0, 3)}, dim={d if nd else None})", [x], "repeat_interleave")
        elif c == 7 and nd >= 2:
            self.emit(f"torch.rot90({{0}}, {r.randint(-1, 2)}, ({d}, {self.dim(t)}))", [x], "rot90")
        elif c == 8:
            fn = r.choice(["item", "tolist", "is_contiguous", "stride", "dim", "numel", "nbytes", "storage_nbytes"])
            if fn == "item":
                if t.numel() == 1:
                    self.emit("{0}.item()", [x], "item")
            elif fn == "tolist":
                self.emit("{0}.tolist()", [x], "tolist")
            elif fn == "storage_nbytes":
                self.emit("{0}.untyped_storage().nbytes()", [x], "storage_nbytes")
            elif fn == "nbytes":
                self.emit("{0}.nbytes", [x], "nbytes")
            else:
                self.emit(f"{{0}}.{fn}()", [x], fn)
        elif c == 9:
            y = self.partner(x)
            if y:
                fn = r.choice(["torch.equal({0}, {1})", "torch.allclose({0}, {1})", "bool(({0} == {1}).all())",
                               "torch.broadcast_tensors({0}, {1})", "torch.result_type({0}, {1})"])
                self.emit(fn, [x, y], fn.split("(")[0].replace("torch.", ""))
        elif c == 10 and nd >= 1:
            y = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=t.shape)
            if y:
                self.emit_stmt("{0}.copy_({1})", [x, y], "copy_")
        elif c == 11:
            y = self.partner(x)
            if y:
                self.emit_stmt(f"{{0}}.copy_({{1}}{', non_blocking=True' if r.random() < 0.2 else ''})", [x, y], "copy_.broadcast")
        elif c == 12:
            fn = r.choice([f"{{0}}.fill_({self.scalar()})", "{0}.zero_()", "{0}.fill_(torch.tensor(1.5))",
                           "{0}.t_()", f"{{0}}.unsqueeze_({self.dim(t) if nd else 0})", "{0}.squeeze_()",
                           f"{{0}}.transpose_(0, {self.dim(t) if nd else 0})", "{0}.detach_()", "{0}.requires_grad_()"])
            self.emit_stmt(fn, [x], fn.split(".")[1].split("(")[0])
        elif c == 13:
            y = self.pick(lambda v: v.dim() == 1, new=0.5, shape=(r.randint(0, 3),), dtype=NAME_OF.get(t.dtype, "float32"))
            z = self.pick(lambda v: v.dim() == 1, new=0.5, shape=(r.randint(1, 3),), dtype=NAME_OF.get(t.dtype, "float32")) if y else None
            if y and z:
                fn = r.choice(["torch.kron({0}, {1})", "torch.cartesian_prod({0}, {1})", "torch.block_diag({0}, {1})",
                               "torch.meshgrid({0}, {1}, indexing='ij')", "torch.cdist({0}[:, None].float(), {1}[:, None].float())"])
                self.emit(fn, [y, z], fn.split("(")[0].replace("torch.", ""))
        elif c == 14:
            with_grad = [n for n in self.tensors(lambda v: v.requires_grad and v.is_leaf)]
            if with_grad:
                leaf = r.choice(with_grad)
                fn = r.choice(["{0}.mul_(0.5)", "{0}.add_(1)", "{0}.zero_()", "{0}.copy_({0}.flip(0))" if self.t(leaf).dim() else "{0}.neg_()"])
                self.emit_stmt("with torch.no_grad(): " + fn, [leaf], "no_grad_inplace", bind=False)
        elif c == 15 and nd:
            fn = r.choice(["cross", "cummax", "logcumsumexp", "trace", "renorm", "vander", "tensordot"])
            if fn == "cross":
                shape = list(t.shape)
                shape[d] = 3
                a = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=tuple(shape))
                b = self.new_input(dtype=NAME_OF.get(t.dtype, "float32"), shape=tuple(shape))
                if a and b:
                    self.emit(f"torch.linalg.cross({{0}}, {{1}}, dim={d})", [a, b], "cross")
            elif fn == "trace":
                self.emit("torch.trace({0})", [x], "trace")
            elif fn == "renorm":
                self.emit(f"torch.renorm({{0}}, 2, {d}, 1.0)", [x], "renorm")
            elif fn == "vander":
                self.emit(f"torch.vander({{0}}.flatten(), {r.randint(0, 3)})", [x], "vander")
            elif fn == "tensordot":
                y = self.pick(new=0.3)
                if y:
                    self.emit(f"torch.tensordot({{0}}, {{1}}, dims={r.randint(0, 1)})", [x, y], "tensordot")
            else:
                self.emit(f"torch.{fn}({{0}}, {d})", [x], fn, nouts=2 if fn == "cummax" else 1)
        elif c == 16:
            # complex
            y = self.partner(x)
            if y:
                fn = r.choice(["torch.complex({0}, {1})", "torch.polar({0}.abs(), {1})", "torch.view_as_complex(torch.stack([{0}, {1}], -1).float())",
                               "torch.abs({0} + 1j * {1})", "({0} * 1j).angle()"])
                self.emit(fn, [x, y], "complex")
        else:
            fn = r.choice(["torch.linalg.vector_norm({0})", f"torch.linalg.vector_norm({{0}}, ord={r.choice([1, 3, 0, float('inf')])}, dim={d})",
                           "torch.linalg.matrix_norm({0})", "torch.linalg.det({0})", "torch.linalg.inv({0})",
                           "torch.fft.fft({0})", "torch.linalg.norm({0})"])
            self.emit(fn, [x], fn.split("(")[0].replace("torch.", ""))

    def op_view_inplace(self):
        """An in-place op through a view: the base must change the same way on both devices."""
        r = self.r
        x = self.pick(lambda v: v.dim() >= 1 and v.numel() > 0)
        if x is None:
            return
        t = self.t(x)
        nd = t.dim()
        d = self.dim(t)
        views = [f"{{0}}.select({d}, {r.randrange(t.shape[d])})" if t.shape[d] else "{0}[...]",
                 f"{{0}}.narrow({d}, {r.randrange(t.shape[d]) if t.shape[d] else 0}, 1)",
                 "{0}.t()" if nd <= 2 else "{0}.transpose(0, -1)", "{0}[::2]", "{0}[..., 1:]",
                 "{0}.diagonal()" if nd >= 2 else "{0}[-1:]", "{0}.unsqueeze(0)", "{0}.view(-1)",
                 "{0}.movedim(0, -1)", "{0}.real"]
        v = self.emit(r.choice(views), [x], "view")
        if not v:
            return
        vt = self.t(v[0])
        ops = ["{0}.mul_(2)", "{0}.add_(1)", "{0}.zero_()", "{0}.fill_(-3)", "{0}.neg_()",
               "{0}.clamp_(min=0)", "{0}.copy_({0}.flip(-1))" if vt.dim() else "{0}.copy_({0})",
               "{0}.sqrt_()", "{0}.masked_fill_({0} > 0, 9)", "{0}.exp_()", "{0}.abs_()",
               "{0}.index_fill_(-1, torch.tensor([0], device=dev), 5)" if vt.dim() else "{0}.fill_(5)",
               "{0}.sigmoid_()", "{0}.floor_()", "{0}.div_(3)", "{0}.pow_(2)", "{0} += 1",
               "{0}[...] = 4", "{0}.bitwise_not_()", "{0}.logical_not_()", "{0}.sub_({0})",
               "{0}.cumsum_(-1)" if vt.dim() else "{0}.cumsum_(0)", "{0}.tril_()"]
        y = self.partner(v[0]) if r.random() < 0.3 else None
        if y:
            op = r.choice(["{0}.add_({1})", "{0}.mul_({1})", "{0}.copy_({1})", "{0}.lerp_({1}, 0.5)",
                           "{0}.maximum({1})", "{0}.where({0} > 0, {1})", "{0}.div_({1}, rounding_mode='floor')"])
            refs = [v[0], y]
        else:
            op = r.choice(ops)
            refs = [v[0]]
        name = re.search(r"\.(\w+)\(", op)
        self.emit_stmt(op, refs, (name.group(1) if name else "setitem") + ".view")

    def op_alias(self):
        """Arguments and results that share memory: out= an input or a view of one, in-place
        ops whose other argument overlaps the written tensor, overlapping copies."""
        r = self.r
        x = self.pick(lambda v: v.dim() >= 1 and v.numel() > 0)
        if x is None:
            return
        t = self.t(x)
        d = self.dim(t)
        n = t.shape[0]
        c = r.randrange(20)
        fn = r.choice(["add", "mul", "sub", "maximum", "atan2", "div", "bitwise_and", "eq", "hypot", "fmod"])
        if c == 0:
            self.emit_stmt(f"torch.{fn}({{0}}, {{0}}, out={{0}})", [x], fn + ".out_self", bind=False)
        elif c == 1:
            self.emit_stmt(f"torch.{fn}({{0}}, {self.scalar()}, out={{0}})", [x], fn + ".out_self", bind=False)
        elif c == 2:
            self.emit_stmt(f"torch.{fn}({{0}}[::2], {{0}}[1::2], out={{0}}[:{(n + 1) // 2}])", [x], fn + ".out_view", bind=False)
        elif c == 3:
            self.emit_stmt(f"{{0}}.{fn}_({{0}}.flip(0))" if r.random() < 0.5 else f"{{0}}.{fn}_({{0}}[0])", [x], fn + "_.self")
        elif c == 4 and t.dim() >= 2:
            self.emit_stmt(f"{{0}}.{fn}_({{0}}.transpose(0, 1))", [x], fn + "_.overlap")
        elif c == 5:
            k = r.randint(1, max(n - 1, 1))
            self.emit_stmt(f"{{0}}[{k}:].copy_({{0}}[:-{k}])" if n > 1 else "{0}.copy_({0})", [x], "copy_.overlap")
        elif c == 6:
            self.emit_stmt(f"torch.cumsum({{0}}, {d}, out={{0}})", [x], "cumsum.out_self", bind=False)
        elif c == 7:
            self.emit_stmt(f"torch.cummax({{0}}, {d}, out=({{0}}, {{1}}))", [x, self.new_input(dtype="int64", shape=tuple(t.shape)) or x], "cummax.out_self", bind=False)
        elif c == 8:
            idx = self.index(t.shape[d], shape=tuple(t.shape), negative=False)
            if idx:
                self.emit_stmt(f"{{0}}.scatter_({d}, {{1}}, {{0}})" if r.random() < 0.5 else
                               f"{{0}}.scatter_add_({d}, {{1}}, {{0}})", [x, idx], "scatter_.self")
        elif c == 9:
            self.emit_stmt(f"torch.{fn}({{0}}, {{0}}, out={{0}}.t())" if t.dim() == 2 and t.shape[0] == t.shape[1] else
                           f"torch.{fn}({{0}}, {{0}}[:1], out={{0}}[:1])", [x], fn + ".out_self", bind=False)
        elif c == 10:
            i = self.new_input(dtype="int64", shape=tuple(t.shape))
            if i:
                self.emit_stmt(f"torch.sort({{0}}, {d}, out=({{0}}, {{1}}))", [x, i], "sort.out_self", bind=False)
        elif c == 11 and t.dim() == 2:
            # mm's out may not overlap its inputs (PyTorch does not check; the result would be
            # undefined): a separate out that is a transposed view
            o = self.emit(f"torch.zeros({t.shape[0]}, {t.shape[0]}, dtype={t.dtype}, device=dev).t()", [], "zeros")
            if o:
                self.emit_stmt("torch.mm({0}, {0}.t(), out={1})", [x, o[0]], "mm.out_t", bind=False)
        elif c == 12:
            m = self.new_input(dtype="bool", shape=tuple(t.shape))
            if m:
                self.emit_stmt("torch.where({1}, {0}, {0}.flip(0), out={0})", [x, m], "where.out_self", bind=False)
        elif c == 13:
            self.emit_stmt(r.choice(["{0}.addcmul_({0}, {0})", "{0}.addcdiv_({0}, {0}, value=0.5)", "{0}.lerp_({0}.flip(0), 0.5)",
                                     "{0}.clamp_(min={0}.flip(0))", "torch.clamp({0}, min={0}[:1], max={0}, out={0})"]), [x], "ternary.self")
        elif c == 14:
            self.emit_stmt(f"torch.index_select({{0}}, 0, torch.tensor([0] * {n}, device=dev), out={{0}})", [x], "index_select.out_self", bind=False)
        elif c == 15:
            self.emit_stmt(f"torch.cat([{{0}}, {{0}}], {d}, out={{0}})" if r.random() < 0.5 else
                           f"torch.stack([{{0}}[0], {{0}}[-1]], out={{0}}[:2])", [x], "cat.out_self", bind=False)
        elif c == 16:
            # (a source that overlaps the written tensor would make the result undefined:
            # PyTorch reads it while writing; the sources here are copies or masks)
            self.emit_stmt(r.choice(["{0}.masked_fill_({0} > 0, 1)", "{0}.masked_scatter_({0} > 0, {0}.flatten().flip(0))",
                                     "{0}.index_copy_(0, torch.arange({n} - 1, -1, -1, device=dev), {0}.flip(0))".format("{0}", n=n),
                                     "{0}.index_add_(0, torch.zeros({n}, dtype=torch.long, device=dev), {0} * 2)".format("{0}", n=n),
                                     "{0}.put_(torch.zeros(1, dtype=torch.long, device=dev), {0}.flatten()[-1:].clone(), accumulate=True)"]),
                           [x], "index.self")
        elif c == 17:
            self.emit_stmt(r.choice(["torch.neg({0}, out={0}.flip(0))", "torch.abs({0}, out={0}[::-1])", "torch.exp({0}, out={0}.t())",
                                     "torch.sigmoid({0}[1:], out={0}[:-1])", "torch.relu({0}, out={0}.expand_as({0}))"]),
                           [x], "unary.out_view", bind=False)
        elif c == 18:
            self.emit_stmt("{0}.copy_({0}.t())" if t.dim() >= 2 else "{0}.copy_({0}.flip(0))", [x], "copy_.self")
        else:
            e = self.emit(f"{{0}}[:1].expand({n}{', ' if t.dim() > 1 else ''}{', '.join(str(s) for s in t.shape[1:])})", [x], "expand")
            if e:
                self.emit_stmt(r.choice(["{0}.add_(1)", "{0}.zero_()", "{0}.copy_({1})", "{0}.mul_({1})", "{0}[0] = 2"]),
                               [e[0], x], "inplace.expanded")

    FAMILIES = [("op_input", 0.4), ("op_factory", 0.5), ("op_view", 3.0), ("op_layout", 1.0),
                ("op_unary", 3.0), ("op_binary", 4.0), ("op_ternary", 1.2), ("op_reduce", 2.5),
                ("op_index", 3.0), ("op_matmul", 1.0), ("op_nn", 1.5), ("op_misc", 2.0),
                ("op_view_inplace", 1.5), ("op_alias", 1.5)]

    def grad_step(self):
        r = self.r
        outs = [n for n in self.tensors(lambda v: v.requires_grad and v.dtype in (
            torch.float32, torch.float64, torch.bfloat16, torch.float16))]
        leaves = [n for n in self.tensors(lambda v: v.requires_grad and v.is_leaf)]
        if not outs or not leaves:
            return
        picked = r.sample(outs, min(len(outs), r.randint(1, 3)))
        terms = []
        for n in picked:
            # Weights by tanh, not cos: cos of a large value is chaotic (float32 spacing at 2e8
            # is 16), so the narrowed float64 lane's last-bit differences became any gradient.
            terms.append(r.choice(["{{{i}}}.float().sum()", "({{{i}}}.float() * {{{i}}}.float().detach().tanh()).sum()",
                                   "{{{i}}}.float().square().sum()"]))
        terms = [tm.format(i=i) for i, tm in enumerate(terms)]
        loss = self.emit(" + ".join(terms), picked, "loss", keep_error=0)
        if not loss:
            return
        if r.random() < 0.7:
            lv = r.sample(leaves, min(len(leaves), r.randint(1, 3)))
            names = ", ".join(f"{{{i + 1}}}" for i in range(len(lv)))
            self.emit(f"torch.autograd.grad({{0}}, [{names}], allow_unused=True)", loss + lv, "grad",
                      kind="grad", keep_error=0.5)
        else:
            self.emit_stmt("{0}.backward()", loss, "backward", bind=False, keep_error=0.5)


def generate(seed, max_ops=None):
    """The program of `seed`."""
    g = Gen(seed)
    r = g.r
    for _ in range(r.randint(1, 3)):
        g.new_input()
    target = max_ops if max_ops is not None else r.choice([3, 5, 8, 10, 12, 16, 20, 28])
    names, weights = zip(*Gen.FAMILIES)
    attempts = 0
    while g.ops < target and attempts < target * 8:
        attempts += 1
        getattr(g, r.choices(names, weights)[0])()
    if g.autograd:
        g.grad_step()
    return Program(seed, g.steps, g.uses_float64)
