"""Result layouts (strides) on neuron against the CPU's, over PyTorch's OpInfo database.

Values equal to the CPU's are not enough: code written on the CPU calls `.view()` on results,
passes them to kernels that want a given layout, or checks `is_contiguous()`, and works only if
the result has the CPU's strides. For every float32 OpInfo, each sample runs on both devices
from its own fresh copy of the inputs in four layouts: as the sample gives them, with the last
two dimensions transposed in memory, channels_last (4-D and 5-D tensors), and non-dense (every
other element of a larger buffer). Each device gets the same strides (not a `.to()` copy, which
would make a non-dense tensor dense). The strides of the results and of the arguments after the
op (in-place ops restride them) must equal the CPU's; with requires_grad samples, the results'
and the gradients' too. An op that keeps another layout by design is listed with its reason in
expected_layout_differences.json.

    python test/conformance/opinfo_sweep.py --layout                # every sample, every op
    python test/conformance/opinfo_sweep.py --layout --ops nn.functional.max_pool1d
    python test/conformance/opinfo_sweep.py --layout --samples 2    # the CI slice's bound

test/python/ops/test_output_layout.py runs the bounded slice.
"""

import itertools
import json
import pathlib
import sys
import time
import warnings

import torch
from torch.utils._pytree import tree_flatten

import opinfo_sweep

EXPECTED_DIFFERENCES = pathlib.Path(__file__).with_name("expected_layout_differences.json")


def _strided(x):
    return isinstance(x, torch.Tensor) and x.layout == torch.strided


def _keep_grad(y, x):
    return y.requires_grad_(x.requires_grad) if x.requires_grad else y


def transposed(x):
    """x with its last two dimensions swapped in memory (same shape and values)."""
    if _strided(x) and x.dim() >= 2 and x.size(-1) > 1 and x.size(-2) > 1:
        return _keep_grad(x.detach().transpose(-1, -2).contiguous().transpose(-1, -2), x)
    return x


def channels_last(x):
    if _strided(x) and x.dim() in (4, 5) and x.size(1) > 1:
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        return _keep_grad(x.detach().contiguous(memory_format=fmt), x)
    return x


def non_dense(x):
    """x as every other element of a buffer twice as long in its last dimension."""
    if _strided(x) and x.dim() >= 1 and x.numel() > 1:
        buffer = torch.empty(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
        y = buffer[..., ::2]
        y.copy_(x.detach())
        return _keep_grad(y, x)
    return x


VARIANTS = {"as given": None, "transposed": transposed, "channels_last": channels_last,
            "non-dense": non_dense}


def copy_with_strides(device):
    """A fresh copy of a sample tensor on `device` with the sample's own strides."""
    fallback = opinfo_sweep.to_neuron if device == "neuron" else opinfo_sweep.fresh_cpu_copy

    def copy(x):
        # Expanded tensors (zero strides) cannot be written into: both devices get a dense copy.
        if not _strided(x) or 0 in x.stride():
            return fallback(x)
        y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
        y.copy_(x.detach())
        return y.requires_grad_(True) if x.is_leaf and x.requires_grad else y
    return copy


def layout_of(tree):
    return [(tuple(t.shape), t.stride()) if _strided(t) else None for t in tree_flatten(tree)[0]]


def _rank(sample):
    first = next((t for t in tree_flatten(sample.input)[0] if isinstance(t, torch.Tensor)), None)
    return 0 if first is None else sum(s > 1 for s in first.shape)


def pick_samples(samples, count):
    """The first `count` samples, but one of them the sample whose input has the most
    dimensions longer than 1 (where transposed and channels_last layouts mean something)."""
    if count is None or len(samples) <= count:
        return samples
    richest = max(range(len(samples)), key=lambda i: _rank(samples[i]))
    picked = list(range(count - 1))
    picked.append(richest if richest not in picked else count - 1)
    return [samples[i] for i in picked]


def check_op(op, max_samples=None, with_grad=False):
    """Differences between neuron's and the CPU's layouts for one OpInfo, as messages:
    {"outputs": [...], "gradients": [...], "errors": [...]}."""
    found = {"outputs": [], "gradients": [], "errors": []}
    opinfo_sweep.manual_seed(0)
    generated = op.sample_inputs("cpu", torch.float32, requires_grad=with_grad)
    # A bounded run looks at the first few samples only (generating them all takes time too).
    limit = None if max_samples is None else 4 * max_samples
    samples = pick_samples(list(itertools.islice(generated, limit)), max_samples)
    for i, sample in enumerate(samples):
        for variant, layout in VARIANTS.items():
            try:
                variant_sample = sample if layout is None else sample.transform(layout)
                cpu_args, cpu_out = opinfo_sweep.run_sample(op, variant_sample,
                                                            copy_with_strides("cpu"))
            except Exception:
                continue  # the sample is invalid on the CPU too
            where = f"sample {i} ({variant})"
            try:
                neuron_args, neuron_out = opinfo_sweep.run_sample(op, variant_sample,
                                                                  copy_with_strides("neuron"))
            except Exception as e:
                found["errors"].append(f"{where}: {type(e).__name__}: "
                                       f"{str(e).strip().splitlines()[0][:200]}")
                continue
            expected, actual = layout_of((cpu_out, cpu_args)), layout_of((neuron_out, neuron_args))
            if actual != expected:
                found["outputs"].append(f"{where}: cpu {expected} neuron {actual}")
            if with_grad:
                try:
                    cpu_grads = opinfo_sweep.grads_of(cpu_args, cpu_out)
                except Exception:
                    cpu_grads = None
                if cpu_grads is not None:
                    try:
                        neuron_grads = opinfo_sweep.grads_of(neuron_args, neuron_out)
                    except Exception as e:
                        found["errors"].append(f"{where} backward: {type(e).__name__}: "
                                               f"{str(e).strip().splitlines()[0][:200]}")
                        continue
                    if layout_of(neuron_grads) != layout_of(cpu_grads):
                        found["gradients"].append(f"{where}: cpu {layout_of(cpu_grads)} "
                                                  f"neuron {layout_of(neuron_grads)}")
    return found


def select_ops(names=None):
    """float32 OpInfos, without those whose float32 runs fail on neuron by design
    (expected_failures.json: sparse layouts), which the OpInfo sweep covers."""
    known_failures = {key for key, by_dtype in opinfo_sweep.load_expected_failures().items()
                      if "float32" in by_dtype}
    return [op for op in opinfo_sweep.select_ops(names)
            if torch.float32 in op.supported_dtypes("cpu")
            and opinfo_sweep.op_key(op) not in known_failures]


def sweep(ops, max_samples=None, progress=True):
    """{op key: differences} for the ops with any difference or error. Ops listed in
    expected_layout_differences.json run every sample, so that the list can only shrink."""
    listed = load_expected_differences()
    report = {}
    start = time.time()
    for n, op in enumerate(ops):
        key = opinfo_sweep.op_key(op)
        samples = None if key in listed else max_samples
        found = {"outputs": [], "gradients": [], "errors": []}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for with_grad in (False, True) if op.supports_autograd else (False,):
                try:
                    result = check_op(op, samples, with_grad)
                except Exception as e:  # sample generation itself failed
                    result = {"errors": [f"sample inputs: {type(e).__name__}: {e}"[:300]]}
                for kind, messages in result.items():
                    found[kind] += messages
        if any(found.values()):
            report[key] = {kind: messages for kind, messages in found.items() if messages}
        if progress:
            sys.stderr.write(f"\r{n + 1}/{len(ops)} {time.time() - start:5.0f}s {key[:40]:<40}")
            sys.stderr.flush()
    if progress:
        sys.stderr.write("\n")
    return report


def load_expected_differences():
    """{op key: {"outputs" or "gradients": reason}}."""
    listed = json.loads(EXPECTED_DIFFERENCES.read_text())
    return {key: value for key, value in listed.items() if not key.startswith("_")}


def check_against_expected(report, ops, expected):
    """Problems: differences or errors not listed, and listed differences that are gone."""
    problems = []
    for key, found in sorted(report.items()):
        for kind, messages in sorted(found.items()):
            if kind != "errors" and kind in expected.get(key, {}):
                continue
            what = ("raises on neuron where the CPU runs" if kind == "errors"
                    else f"{kind} differ from the CPU's layout")
            more = f" (and {len(messages) - 1} more)" if len(messages) > 1 else ""
            problems.append(f"{key}: {what}: {messages[0]}{more}")
    swept = {opinfo_sweep.op_key(op) for op in ops}
    for key, kinds in sorted(expected.items()):
        for kind in kinds:
            if key in swept and kind not in report.get(key, {}):
                problems.append(f"{key}: {kind} now keep the CPU's layout: remove the entry from "
                                f"{EXPECTED_DIFFERENCES.name}")
    return problems


def main(names=None, max_samples=None):
    ops = select_ops(names)
    start = time.time()
    report = sweep(ops, max_samples)
    problems = check_against_expected(report, ops, load_expected_differences())
    print(f"{len(ops)} float32 OpInfos in {time.time() - start:.0f} s; "
          f"{len(report)} differ from the CPU's layout or fail")
    print("\n".join(problems) or "all layouts as expected")
    return 1 if problems else 0
