"""Neuron tensors through torch.multiprocessing: each process simulates its own device, so a
tensor is sent as a copy that arrives on the same device index (CUDA would share the memory);
nothing is lost in the queue's feeder thread. Also quantized tensors, which neuron refuses
with an error that says what to do."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import NEURON_ENV_VARS

SCRIPT = """
import json, sys, torch
import torch.multiprocessing as mp

def consumer(q, out, arg, arg_storage):
    got = [q.get(timeout=60) for _ in range(4)]
    t, view, param, storage = got
    views = [q.get(timeout=60) for _ in range(4)]
    out.put(json.dumps({
        "layouts": [[list(v.shape), list(v.stride()), v.cpu().tolist()] for v in views],
        "tensor": [str(t.device), t.cpu().tolist(), t.dtype == torch.bfloat16],
        "view": [str(view.device), view.cpu().tolist(), list(view.shape)],
        "param": [type(param).__name__, str(param.device), param.requires_grad],
        "storage": [storage.device.type, storage.nbytes()],
        "usable": (t.float() * 2).cpu().tolist(),
        "args": [str(arg.device), arg.cpu().tolist(), arg_storage.device.type,
                 arg_storage.nbytes()],
    }))

LAYOUTS = lambda base: [base.flatten()[1::2], base.t(), base[:1].expand(3, 3), base[1:, ::2]]

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q, out = ctx.Queue(), ctx.Queue()
    # Process arguments are pickled at start(); the child gets their shared memory later.
    arg = torch.arange(3.0, device="neuron:1")
    p = ctx.Process(target=consumer, args=(q, out, arg * 10, torch.ones(4).to("neuron")
                                           .untyped_storage()))
    p.start()
    base = torch.arange(6.0, device="neuron:1").reshape(2, 3)
    q.put(base.to(torch.bfloat16))
    q.put(base[:, 1:])
    q.put(torch.nn.Parameter(torch.ones(2, device="neuron")))
    q.put(base.untyped_storage())
    for view in LAYOUTS(base):
        q.put(view)
    print(out.get(timeout=90))
    p.join(60)
    sys.exit(p.exitcode)
"""


def test_neuron_tensors_cross_a_queue_as_copies(tmp_path):
    script = tmp_path / "queue_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in __import__("os").environ.items() if k not in NEURON_ENV_VARS}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=150, env=env)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["tensor"] == ["neuron:1", [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], True]
    assert got["view"] == ["neuron:1", [[1.0, 2.0], [4.0, 5.0]], [2, 2]]
    assert got["param"] == ["Parameter", "neuron:0", True]
    assert got["storage"] == ["neuron", 24]
    assert got["usable"] == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    # As Process arguments (spawn), made just for the call (the child died before: the copy's
    # shared memory was freed before the child was started).
    assert got["args"] == ["neuron:1", [0.0, 10.0, 20.0], "neuron", 16]
    # Views keep their layout, as CPU tensors do through torch.multiprocessing (and CUDA's).
    base = torch.arange(6.0).reshape(2, 3)
    views = [base.flatten()[1::2], base.t(), base[:1].expand(3, 3), base[1:, ::2]]
    assert got["layouts"] == [[list(v.shape), list(v.stride()), v.tolist()] for v in views]


def test_a_tensor_with_autograd_history_is_refused_as_on_the_cpu():
    from multiprocessing.reduction import ForkingPickler

    x = torch.ones(2, device="neuron", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="autograd does not support crossing process"):
        ForkingPickler.dumps(x)
    assert ForkingPickler.loads(ForkingPickler.dumps(x.detach())).device.type == "neuron"


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
@pytest.mark.parametrize("make", [
    lambda: torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8).to("neuron"),
    lambda: torch.quantize_per_tensor(torch.randn(4, device="neuron"), 0.1, 0, torch.qint8),
    lambda: torch.empty(3, dtype=torch.quint8, device="neuron"),
    lambda: torch.randn(3, device="neuron").to(torch.qint32),
], ids=["to_neuron", "quantize_on_neuron", "empty", "to_dtype"])
def test_quantized_tensors_are_refused_clearly(make):
    with pytest.raises(NotImplementedError, match="neuron has no quantized tensors.*dequantize"):
        make()
    x = torch.randn(3, device="neuron")  # the device is still usable
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)
    # Fake quantization computes in floating point and runs on the device.
    fq = torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
    torch.testing.assert_close(fq.cpu(), torch.fake_quantize_per_tensor_affine(x.cpu(), 0.1, 0,
                                                                              -128, 127))
