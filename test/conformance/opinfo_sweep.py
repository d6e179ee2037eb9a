"""Runs PyTorch's OpInfo database (torch.testing._internal.common_methods_invocations.op_db)
on neuron and on the CPU and compares, as PyTorch's own test_compare_cpu does.

For every OpInfo and every dtype in DTYPES that the op supports on the CPU, each sample input
runs on both devices from the same seed. The neuron generator is a counter-based Philox stream
like CUDA's, not the CPU's (Note [Philox generator]), so a sample whose neuron run drew random
numbers (an op with a Generator argument, or dropout) is compared by shapes and dtypes only, as PyTorch's
test_compare_cpu leaves random ops out. Each device gets its own fresh copy of the
sample's tensors, so an op that changes its inputs (in-place random ops, running statistics)
cannot hand the other device changed inputs. An op passes when, for every sample, its outputs
and every argument (mutated ones included) match within the dtype's default tolerance; float32
gradients of autograd-capable ops are compared as well. An op that ran any CPU fallback is
reported as "fallback", except when every op that fell back is one the policy table
(csrc/aten/OpPolicy.cpp, asked through torch_neuron._C._op_class) sends to the CPU by design
(linalg factorizations and solvers, FFTs): "policy_fallback".

    python test/conformance/opinfo_sweep.py                      # full sweep, report.json
    python test/conformance/opinfo_sweep.py --ops add mm --dtypes float32
    python test/conformance/opinfo_sweep.py --smoke              # the CI slice
    python test/conformance/opinfo_sweep.py --check              # full sweep vs expected list
    python test/conformance/opinfo_sweep.py --markdown --report test/conformance/opinfo_report.json
    python test/conformance/opinfo_sweep.py --layout             # result strides (layout_sweep.py)

Writes a JSON report (per op and dtype: status and first error) and prints a summary line.
"""

import argparse
import json
import sys
import time
import traceback
import warnings

import torch
import torch_neuron
from torch.utils._pytree import tree_flatten, tree_map

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "int64": torch.int64,
    "bool": torch.bool,
}

# The CI slice: ops real models use, one or two of each family.
SMOKE_OPS = [
    "add", "mul", "div", "sub", "where", "clamp", "abs", "exp", "log", "tanh", "sigmoid",
    "nn.functional.gelu", "nn.functional.silu", "nn.functional.relu", "pow", "rsqrt", "eq",
    "logical_and", "bitwise_and", "sum", "mean", "amax", "argmax", "var", "cumsum",
    "logsumexp", "softmax", "log_softmax", "mm", "bmm", "addmm", "matmul", "einsum",
    "nn.functional.linear", "nn.functional.conv2d", "nn.functional.max_pool2d",
    "nn.functional.layer_norm", "nn.functional.embedding", "index_select", "gather",
    "scatter_add", "index_put", "masked_fill", "nonzero", "cat", "stack", "flip", "tril",
    "sort", "topk", "nn.functional.cross_entropy", "nn.functional.mse_loss",
    "nn.functional.scaled_dot_product_attention", "linalg.inv",
]


# Ops whose outputs are uninitialized memory: only shape, dtype and device can be compared.
UNINITIALIZED_OUTPUT_OPS = {"empty", "empty_like", "empty_permuted", "empty_strided",
                            "new_empty", "new_empty_strided"}


# Ops whose API takes some tensor arguments on the CPU on every device, so the neuron run keeps
# them there: torch.tensor_split's tensor_indices_or_sections ("must be a zero-dimensional or
# one-dimensional long tensor on the CPU", PyTorch docs).
CPU_ARGUMENT_OPS = {"tensor_split"}


def op_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def to_neuron(x):
    if isinstance(x, torch.Tensor):
        y = x.detach().to("neuron")
        return y.requires_grad_(x.requires_grad) if x.is_leaf and x.requires_grad else y
    return x


def fresh_cpu_copy(x):
    """The CPU's own copy of a sample tensor (the neuron run copies the original)."""
    if isinstance(x, torch.Tensor):
        y = x.detach().clone()
        return y.requires_grad_(x.requires_grad) if x.is_leaf and x.requires_grad else y
    return x


def to_cpu(x):
    return x.detach().cpu() if isinstance(x, torch.Tensor) else x


def manual_seed(seed):
    """torch.manual_seed for the two devices a sweep uses, the CPU and neuron. torch.manual_seed
    also queues a seeding for each of CUDA, XPU and MTIA while they are not initialized, with a
    formatted stack trace each: about 1.5 ms a call on a 2-core machine, half the time of a sweep
    of max_pool2d's 1,440 float32 samples."""
    torch.default_generator.manual_seed(seed)
    torch.neuron.manual_seed_all(seed)


def run_sample(op, sample, device_fn):
    inp, args, kwargs = tree_map(device_fn, (sample.input, sample.args, sample.kwargs))
    if op.name in CPU_ARGUMENT_OPS:
        args = tree_map(fresh_cpu_copy, sample.args)
    manual_seed(1234)  # (also puts every neuron generator's offset at 0)
    out = op(inp, *args, **kwargs)
    return (inp, args, kwargs), out


def neuron_drew():
    """Whether the neuron ops run since clear_op_tracking() drew random numbers (an op with a
    Generator argument, or dropout), which differ from the CPU's by design. (The generator's
    offset cannot tell: OpInfo's random ops restore the generators' states after they ran.)"""
    for name in torch_neuron.get_executed_ops():
        namespace, _, rest = name.partition("::")
        base, _, overload = rest.partition(".")
        if base == "native_dropout":
            return True
        try:
            schema = getattr(getattr(getattr(torch.ops, namespace), base),
                             overload or "default")._schema
        except (AttributeError, RuntimeError):
            continue
        if any("Generator" in str(argument.type) for argument in schema.arguments):
            return True
    return False


def grads_of(inputs, out):
    """Backpropagates the sum of the floating outputs; returns the grads of the inputs."""
    outs = [o for o in tree_flatten(out)[0]
            if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
    leaves = [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not leaves:
        return None
    total = sum(o.float().sum() for o in outs)
    return torch.autograd.grad(total, leaves, allow_unused=True)


def compare(actual, expected, what, values=True):
    actual, expected = tree_map(to_cpu, actual), tree_map(to_cpu, expected)
    if not values:
        for a, e in zip(tree_flatten(actual)[0], tree_flatten(expected)[0]):
            if isinstance(e, torch.Tensor) and (a.shape, a.dtype) != (e.shape, e.dtype):
                raise AssertionError(f"{what}: {a.shape} {a.dtype} != {e.shape} {e.dtype}")
        return
    flat_a, spec_a = tree_flatten(actual)
    flat_e, spec_e = tree_flatten(expected)
    if spec_a != spec_e:
        raise AssertionError(f"{what}: output structure differs: {spec_a} vs {spec_e}")
    for a, e in zip(flat_a, flat_e):
        if isinstance(e, torch.Tensor):
            # Device ops compute float64 in float32 by default (the dtype policy), so float64
            # results are held to float32 tolerances.
            tol = {}
            if e.dtype == torch.float64 and torch_neuron.get_float64_mode() == "narrow":
                tol = {"rtol": 1.3e-6, "atol": 1e-5}
            torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m: f"{what}: {m}", **tol)
        elif a != e and not (a != a and e != e):  # NaN == NaN for Python floats
            raise AssertionError(f"{what}: {a!r} != {e!r}")


def check_op_dtype(op, dtype, with_grad):
    """Returns (status, message, fallback ops seen, gradients) where gradients is None (not
    compared), "device" (compared, the backward ran no CPU fallback) or "fallback"."""
    manual_seed(0)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=with_grad))
    fallback_ops = {}
    grad_fallback_ops = {}
    checked = 0
    grads_checked = False
    for i, sample in enumerate(samples):
        try:
            cpu_inputs, cpu_out = run_sample(op, sample, fresh_cpu_copy)
        except Exception:
            continue  # the sample is invalid on the CPU too
        torch_neuron.clear_op_tracking()
        try:
            neuron_inputs, neuron_out = run_sample(op, sample, to_neuron)
            drew = neuron_drew()
            values = op.name not in UNINITIALIZED_OUTPUT_OPS and not drew
            compare(neuron_out, cpu_out, f"sample {i} output", values=values)
            # Every argument, as the op left it (in-place ops and mutated arguments).
            compare(neuron_inputs, cpu_inputs, f"sample {i} arguments", values=values)
            if with_grad:
                cpu_grads = grads_of(cpu_inputs, cpu_out)
                if cpu_grads is not None:
                    forward_fallback = torch_neuron.get_fallback_ops()
                    torch_neuron.clear_op_tracking()
                    neuron_grads = grads_of(neuron_inputs, neuron_out)
                    grad_fallback_ops.update(torch_neuron.get_fallback_ops())
                    fallback_ops.update(forward_fallback)
                    compare(neuron_grads, cpu_grads, f"sample {i} grad", values=not drew)
                    grads_checked = True
        except Exception as e:
            fallback_ops.update(torch_neuron.get_fallback_ops())
            fallback_ops.update(grad_fallback_ops)
            message = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
            return "fail", message, fallback_ops, None
        fallback_ops.update(torch_neuron.get_fallback_ops())
        checked += 1
    if checked == 0:
        return "skip", "no sample runs on the CPU", {}, None
    grads = ("fallback" if grad_fallback_ops else "device") if grads_checked else None
    fallback_ops.update(grad_fallback_ops)
    if fallback_ops:
        message = "fell back: " + ", ".join(sorted(fallback_ops))
        return "fallback", message, fallback_ops, grads
    return "pass", "", {}, grads


def is_policy_fallback(fallback_ops):
    """Whether every op that fell back is one the policy table sends to the CPU by design
    (csrc/aten/OpPolicy.cpp), decided by the table itself, not by the op's name."""
    def base(name):  # "aten::linalg_inv_ex.default" -> "aten::linalg_inv_ex"
        namespace, _, rest = name.partition("::")
        return f"{namespace}::{rest.split('.')[0]}"
    return bool(fallback_ops) and all(
        torch_neuron._C._op_class(base(n)) == "fallback" for n in fallback_ops)


def sweep(ops, dtypes, progress=True):
    report = {}
    total = sum(1 for op in ops for d in dtypes if DTYPES[d] in op.supported_dtypes("cpu"))
    done, start = 0, time.time()
    for op in ops:
        key = op_key(op)
        for dname in dtypes:
            dtype = DTYPES[dname]
            if dtype not in op.supported_dtypes("cpu"):
                continue
            with_grad = dtype == torch.float32 and op.supports_autograd
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    status, message, fallback_ops, grads = check_op_dtype(op, dtype, with_grad)
                except Exception as e:  # sample generation itself failed
                    status, message, fallback_ops, grads = "skip", f"sample inputs: {e}"[:300], {}, None
            if status == "fallback" and is_policy_fallback(fallback_ops):
                status = "policy_fallback"
            report.setdefault(key, {})[dname] = {"status": status, "message": message,
                                                 "grads": grads}
            done += 1
            if progress:
                elapsed = time.time() - start
                bar = "#" * int(30 * done / max(total, 1))
                sys.stderr.write(f"\r[{bar:<30}] {done}/{total} {elapsed:5.0f}s {key[:40]:<40}")
                sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return report


def summarize(report, dtype="float32"):
    """Figures over every OpInfo of `dtype` that has a sample the CPU runs ("ops"), each rate
    over that same denominator."""
    rows = [v[dtype] for v in report.values() if dtype in v and v[dtype]["status"] != "skip"]
    count = lambda *s: sum(r["status"] in s for r in rows)
    n = len(rows)
    grads = [r.get("grads") for r in rows if r.get("grads")]
    return {
        "dtype": dtype,
        "ops": n,
        "pass": count("pass"),  # matched, and nothing fell back to the CPU
        "policy_fallback": count("policy_fallback"),  # matched; the CPU ran it by design
        "fallback": count("fallback"),  # matched, but some op fell back that should not
        "fail": count("fail"),
        "match_rate": count("pass", "fallback", "policy_fallback") / max(n, 1),
        "zero_fallback_rate": count("pass") / max(n, 1),
        # Ops whose float32 gradients were compared and matched, by where the backward ran.
        "grad_ops": len(grads),
        "grad_on_device": grads.count("device"),
        "grad_with_fallback": grads.count("fallback"),
    }


def markdown_table(summaries):
    """The README's conformance table: every figure is a count of OpInfos, with its share of the
    dtype's OpInfos (those with a sample the CPU runs)."""
    pct = lambda k, s: f"{s[k]} ({s[k] / max(s['ops'], 1):.1%})"  # noqa: E731
    lines = ["| dtype | OpInfos | match the CPU, no CPU fallback | match, CPU fallback by policy "
             "| match, other CPU fallback | fail |", "|---|---|---|---|---|---|"]
    for s in (summaries[d] for d in DTYPES if d in summaries):
        lines.append(f"| {s['dtype']} | {s['ops']} | {pct('pass', s)} | {pct('policy_fallback', s)} "
                     f"| {pct('fallback', s)} | {pct('fail', s)} |")
    return "\n".join(lines)


EXPECTED_FAILURES = __import__("pathlib").Path(__file__).with_name("expected_failures.json")


def load_expected_failures():
    """{op key: {dtype: reason}} for every op and dtype that does not pass (or falls back)."""
    return json.loads(EXPECTED_FAILURES.read_text())


def check_against_expected(report, expected):
    """Problems: ops that newly fail, and listed ops that now pass (the list only shrinks)."""
    problems = []
    for key, by_dtype in sorted(report.items()):
        for dtype, result in sorted(by_dtype.items()):
            listed = expected.get(key, {}).get(dtype)
            bad = result["status"] in ("fail", "fallback")
            if bad and listed is None:
                problems.append(f"{key} [{dtype}] regressed: {result['status']}: "
                                f"{result['message']}")
            elif not bad and listed is not None:
                problems.append(f"{key} [{dtype}] now {result['status']}: remove it from "
                                f"{EXPECTED_FAILURES.name}")
    return problems


def select_ops(names=None, smoke=False):
    from torch.testing._internal.common_methods_invocations import op_db

    if smoke:
        names = SMOKE_OPS
    if names:
        wanted = set(names)
        return [op for op in op_db if op.name in wanted or op_key(op) in wanted]
    return list(op_db)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="*", help="OpInfo names (default: all)")
    parser.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--smoke", action="store_true", help="only the CI slice")
    parser.add_argument("--report", default="opinfo_report.json")
    parser.add_argument("--markdown", action="store_true",
                        help="print the README's table of an existing --report and exit")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if results differ from expected_failures.json")
    parser.add_argument("--layout", action="store_true",
                        help="compare result strides with the CPU's instead (float32; exit 1 if "
                             "they differ from expected_layout_differences.json)")
    parser.add_argument("--samples", type=int,
                        help="with --layout: samples per OpInfo (default: all)")
    args = parser.parse_args(argv)
    if args.layout:
        import layout_sweep
        sys.exit(layout_sweep.main(args.ops, args.samples))
    if args.markdown:
        with open(args.report) as f:
            print(markdown_table(json.load(f)["summary"]))
        return
    ops = select_ops(args.ops, args.smoke)
    report = sweep(ops, args.dtypes)
    summaries = {d: summarize(report, d) for d in args.dtypes}
    with open(args.report, "w") as f:
        json.dump({"summary": summaries, "ops": report}, f, indent=1, sort_keys=True)
    s = summaries.get("float32") or next(iter(summaries.values()))
    print(f"{s['dtype']}: {s['ops']} OpInfos; {s['match_rate']:.1%} match the CPU, "
          f"{s['zero_fallback_rate']:.1%} match with no CPU fallback at all, "
          f"{s['policy_fallback']} match with fallbacks by policy, {s['fallback']} with other "
          f"fallbacks, {s['fail']} fail; gradients match for {s['grad_ops']} OpInfos "
          f"({s['grad_on_device']} with the backward on the device); report in {args.report}")
    if args.check:
        problems = check_against_expected(report, load_expected_failures())
        print("\n".join(problems) or "all results as expected")
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
