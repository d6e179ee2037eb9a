"""Predict-only and executed runs charge the same, over PyTorch's OpInfo database.

An op's charge (what it launches, each launch's duration and engine busy times) is a function
of its arguments' geometry, never of whether values are computed (Note [One charge path] in
csrc/aten/Charge.h, Note [Predict-only execution]). This sweep checks it: every sample of every OpInfo
(float32; --dtypes for more) runs twice, once executed and once in predict-only mode, each on
its own fresh neuron copy of the sample (uploaded with execution on, outside the trace), and
the trace records of the two runs (name, duration, engine times, in launch order; float32
samples of autograd ops include their backward) must be equal. Samples that predict-only mode
cannot run (they need values: data-dependent output shapes, .item() of an integer) and samples
that fail when executed are skipped; a sample that runs executed but raises anything else when
predicting is a difference. An op that charges differently by design is listed with its reason
in expected_charge_differences.json.

    python test/conformance/charge_sweep.py                  # every OpInfo, float32
    python test/conformance/charge_sweep.py --ops add fill   # some OpInfos
    python test/conformance/charge_sweep.py --smoke          # the CI slice (a few seconds)
    python test/conformance/charge_sweep.py --dtypes float32 bfloat16 int64

test/python/fidelity/test_charge_sweep.py runs the smoke slice. Exits 1 on a difference that
is not listed (or a listed one that is gone).
"""

import argparse
import contextlib
import json
import pathlib
import sys
import time
import warnings

import torch
from torch.utils._pytree import tree_map

import torch_neuron
from torch_neuron import _C

import opinfo_sweep

EXPECTED = pathlib.Path(__file__).with_name("expected_charge_differences.json")

# The CI slice: ops of every kernel family (typed and boxed host execution, dedicated kernels:
# copies, fills, random draws, convolution, attention, dropout), two samples each.
SMOKE_OPS = [
    "add", "mul", "exp", "sum", "softmax", "mm", "addmm", "index_select", "gather",
    "masked_fill", "cat", "fill", "zero_", "full_like", "clone", "nn.functional.conv2d",
    "nn.functional.layer_norm", "nn.functional.embedding", "nn.functional.dropout",
    "nn.functional.scaled_dot_product_attention", "where", "item", "bernoulli", "to",
]
SMOKE_SAMPLES = 2


@contextlib.contextmanager
def executing(enabled):
    before = torch_neuron.get_execute()
    torch_neuron.set_execute(enabled)
    try:
        yield
    finally:
        torch_neuron.set_execute(before)


def traced(fn):
    """Runs fn with every queue tracing; returns its trace records."""
    _C._take_trace()
    _C._set_tracing(True)
    try:
        fn()
    finally:
        _C._set_tracing(False)
    return _C._take_trace()


def charges(records):
    """What each launch charged: name, duration and engine times (not when it started)."""
    return [(r["name"], r["duration_ns"], sorted(r["engine_ns"].items())) for r in records]


def needs_values(error):
    return isinstance(error, NotImplementedError) and "predict-only" in str(error)


def run(op, sample, execute, with_grad):
    """The sample's charges in one mode, or the exception it raised."""
    with executing(True):  # the uploads compute (and are not traced)
        inp, args, kwargs = tree_map(opinfo_sweep.to_neuron,
                                     (sample.input, sample.args, sample.kwargs))
        if op.name in opinfo_sweep.CPU_ARGUMENT_OPS:
            args = tree_map(opinfo_sweep.fresh_cpu_copy, sample.args)

    def body():
        opinfo_sweep.manual_seed(1234)
        out = op(inp, *args, **kwargs)
        if with_grad:
            opinfo_sweep.grads_of((inp, args, kwargs), out)

    try:
        with executing(execute):
            return charges(traced(body))
    except Exception as e:  # noqa: BLE001 (reported)
        return e


def first_difference(executed, predicted):
    for i, (a, b) in enumerate(zip(executed, predicted)):
        if a != b:
            return f"launch {i}: executed {a} != predicted {b}"
    return (f"{len(executed)} launches executed, {len(predicted)} predicted: "
            f"{executed[len(predicted):][:2] or predicted[len(executed):][:2]}")


def check_op_dtype(op, dtype, samples_limit=None):
    """(status, message): "same", "differs" or "skip" (no sample runs in both modes)."""
    with_grad = dtype == torch.float32 and op.supports_autograd
    opinfo_sweep.manual_seed(0)
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=with_grad))
    compared = 0
    refused = None  # why predict-only mode refused a sample (it needs values)
    for i, sample in enumerate(samples):
        if samples_limit is not None and compared >= samples_limit:
            break
        executed = run(op, sample, True, with_grad)
        if isinstance(executed, Exception):
            continue  # an invalid sample, or one the device does not run
        predicted = run(op, sample, False, with_grad)
        if isinstance(predicted, Exception):
            if needs_values(predicted):
                refused = refused or str(predicted).strip().splitlines()[0][:200]
                continue
            return "differs", (f"sample {i}: predicting raised {type(predicted).__name__}: "
                               f"{str(predicted).strip().splitlines()[0][:200]}")
        if executed != predicted:
            return "differs", f"sample {i}: {first_difference(executed, predicted)}"
        compared += 1
    if compared == 0:
        return "skip", ("no sample runs in both modes" +
                        (f"; predicting needs values: {refused}" if refused else ""))
    return "same", ""


def sweep(ops, dtypes, samples_limit=None, progress=True):
    report = {}
    total = sum(1 for op in ops for d in dtypes
                if opinfo_sweep.DTYPES[d] in op.supported_dtypes("cpu"))
    done, start = 0, time.time()
    for op in ops:
        key = opinfo_sweep.op_key(op)
        for dname in dtypes:
            dtype = opinfo_sweep.DTYPES[dname]
            if dtype not in op.supported_dtypes("cpu"):
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    status, message = check_op_dtype(op, dtype, samples_limit)
                except Exception as e:  # noqa: BLE001 (sample generation itself failed)
                    status, message = "skip", f"sample inputs: {e}"[:300]
            report.setdefault(key, {})[dname] = {"status": status, "message": message}
            done += 1
            if progress:
                sys.stderr.write(f"\r{done}/{total} {time.time() - start:5.0f}s {key[:40]:<40}")
                sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return report


def load_expected():
    """{op key: {dtype: reason}}: ops that charge differently in the two modes, and why."""
    return json.loads(EXPECTED.read_text())


def problems(report, expected):
    found = []
    for key, by_dtype in sorted(report.items()):
        for dname, result in sorted(by_dtype.items()):
            listed = expected.get(key, {}).get(dname)
            if result["status"] == "differs" and listed is None:
                found.append(f"{key} [{dname}]: {result['message']}")
            elif result["status"] == "same" and listed is not None:
                found.append(f"{key} [{dname}] now charges the same: remove it from "
                             f"{EXPECTED.name}")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="*", help="OpInfo names (default: all)")
    parser.add_argument("--dtypes", nargs="*", default=["float32"],
                        choices=list(opinfo_sweep.DTYPES))
    parser.add_argument("--smoke", action="store_true",
                        help=f"only the CI slice, {SMOKE_SAMPLES} samples per OpInfo")
    parser.add_argument("--samples", type=int, help="samples compared per OpInfo (default: all)")
    parser.add_argument("--report", help="write the per-op results to this JSON file")
    args = parser.parse_args(argv)
    ops = opinfo_sweep.select_ops(SMOKE_OPS if args.smoke else args.ops)
    samples = SMOKE_SAMPLES if args.smoke and args.samples is None else args.samples
    report = sweep(ops, args.dtypes, samples)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    rows = [r for by_dtype in report.values() for r in by_dtype.values()]
    count = lambda s: sum(r["status"] == s for r in rows)  # noqa: E731
    print(f"{len(rows)} OpInfo-dtype pairs: {count('same')} charge the same in both modes, "
          f"{count('differs')} differ, {count('skip')} skipped")
    found = problems(report, load_expected())
    print("\n".join(found) or "all charges as expected")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
