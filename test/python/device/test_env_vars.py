"""TorchNeuron's and the Neuron runtime's environment variables that mean something here
(docs/environment.md), each checked in a fresh process through the public API."""

import os
import re

import pytest
import torch

from conftest import run_python, run_python_json

DEVICES = """
    import json, torch
    n = torch.neuron.device_count()
    props = [torch.neuron.get_device_properties(i) for i in range(n)]
    print(json.dumps({"count": n, "cores": [p.core for p in props],
                      "gib": sorted({p.total_memory >> 30 for p in props})}))
"""


def test_num_cores_takes_the_first_cores():
    out = run_python_json(DEVICES, env={"NEURON_RT_NUM_CORES": "2"})
    assert out["count"] == 2 and out["cores"] == [0, 1]
    assert run_python_json(DEVICES, env={"NEURON_RT_NUM_CORES": "0"})["count"] == 4  # 0 = all


def test_visible_cores_win_over_num_cores():
    out = run_python_json(DEVICES, env={"NEURON_RT_NUM_CORES": "1",
                                        "NEURON_RT_VISIBLE_CORES": "2-3"})
    assert out["cores"] == [2, 3]


def test_bad_num_cores_names_the_variable():
    result = run_python("import torch; torch.zeros(1, device='neuron')",
                        env={"NEURON_RT_NUM_CORES": "9"})
    assert result.returncode != 0
    assert "NEURON_RT_NUM_CORES='9' is not valid" in result.stderr
    assert "from 1 to 4" in result.stderr


def test_logical_nc_config_one_exposes_physical_cores():
    out = run_python_json(DEVICES, env={"NEURON_LOGICAL_NC_CONFIG": "1"})
    assert out["count"] == 8          # trn2.3xlarge: 8 physical NeuronCore-v3
    assert out["gib"] == [12]         # 96 GiB of HBM over 8 devices instead of 4


def test_bad_logical_nc_config_names_the_variable():
    result = run_python("import torch; torch.neuron.device_count(); torch.zeros(1, device='neuron')",
                        env={"NEURON_LOGICAL_NC_CONFIG": "2",
                             "TORCH_NEURON_INSTANCE": "trn1.2xlarge"})
    assert result.returncode != 0
    assert "NEURON_LOGICAL_NC_CONFIG='2' is not valid for trn1.2xlarge" in result.stderr


def test_complex_decompose_off_sends_complex_ops_to_the_cpu():
    code = """
        import json, torch, torch_neuron
        z = torch.randn(4, dtype=torch.complex64).to("neuron")
        torch_neuron.clear_op_tracking()
        (z * z).sum()
        print(json.dumps(sorted(torch_neuron.get_fallback_ops())))
    """
    assert run_python_json(code) == []
    assert run_python_json(code, env={"TORCH_NEURONX_COMPLEX_DECOMPOSE": "0"}) != []


# A graph whose compilation fails: Inductor's per-graph compiler is made to raise.
COMPILE = """
    import json, warnings, torch, torch_neuron
    import torch._inductor.compile_fx as compile_fx
    def broken(gm, inputs, **kwargs):
        raise RuntimeError("injected compile failure")
    compile_fx.compile_fx_inner = broken
    f = torch.compile(lambda x: x * 2 + 1, backend="neuron", **KWARGS)
    x = torch.arange(4.0, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = {"result": f(x).cpu().tolist()}
        except Exception as e:
            out = {"error": str(e)}
    out["warned"] = any("running it eagerly" in str(w.message) for w in caught)
    print(json.dumps(out))
"""


def compile_probe(env=None, kwargs="{}"):
    return run_python_json(COMPILE.replace("KWARGS", kwargs), env=env)


def test_compile_failure_raises_by_default():
    out = compile_probe()
    assert "injected compile failure" in out["error"]


def test_disable_fallback_execution_0_runs_the_graph_eagerly():
    out = compile_probe(env={"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "0"})
    assert out == {"result": [1.0, 3.0, 5.0, 7.0], "warned": True}


def test_fallback_execution_option_overrides_the_variable():
    out = compile_probe(env={"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "1"},
                        kwargs='{"options": {"fallback_execution": True}}')
    assert out["result"] == [1.0, 3.0, 5.0, 7.0]


def test_fallback_execution_covers_the_backward_graph():
    # AOTAutograd compiles the backward graph at the first backward call: its failure falls
    # back too, and the gradients are right.
    code = """
        import json, warnings, torch, torch_neuron
        import torch._inductor.compile_fx as compile_fx
        real = compile_fx.compile_fx_inner
        def broken_backward(gm, inputs, **kwargs):
            if kwargs.get("is_backward"):
                raise RuntimeError("injected backward compile failure")
            return real(gm, inputs, **kwargs)
        compile_fx.compile_fx_inner = broken_backward
        f = torch.compile(lambda x: (x * 3).sin(), backend="neuron")
        x = torch.arange(4.0, device="neuron", requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                f(x).sum().backward()
                out = {"grad": x.grad.cpu().tolist()}
            except Exception as e:
                out = {"error": str(e)}
        out["warned"] = any("could not compile a backward graph" in str(w.message)
                            for w in caught)
        print(json.dumps(out))
    """
    raised = run_python_json(code)
    assert "injected backward compile failure" in raised["error"]
    fell_back = run_python_json(code, env={"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "0"})
    assert fell_back["warned"]
    want = (3 * torch.cos(3 * torch.arange(4.0))).tolist()
    assert fell_back["grad"] == pytest.approx(want, rel=1e-6)


def test_bad_boolean_names_the_variable():
    out = compile_probe(env={"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "maybe"})
    assert "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION='maybe' is not a boolean" in out["error"]


def test_disable_cpu_autocopy_rejects_cpu_inputs():
    code = """
        import json, torch
        f = torch.compile(lambda x: x * 2, backend="neuron")
        out = {"neuron": f(torch.ones(2, device="neuron")).cpu().tolist()}
        try:
            f(torch.ones(3))
        except Exception as e:
            out["cpu_error"] = str(e)
        print(json.dumps(out))
    """
    out = run_python_json(code, env={"TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY": "1"})
    assert out["neuron"] == [2.0, 2.0]
    assert re.search(r"Input tensor at index \d+ is on cpu device", out["cpu_error"])
    assert "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1" in out["cpu_error"]


def test_preserve_compilation_artifacts_writes_fx_graphs(tmp_path):
    code = """
        import torch
        f = torch.compile(lambda x: (x * 2).sin(), backend="neuron")
        x = torch.ones(4, device="neuron", requires_grad=True)
        f(x).sum().backward()
    """
    # A first run fills the compile caches: a cached graph still gets its artifacts.
    cache = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    assert run_python(code, env=cache).returncode == 0
    result = run_python(code, env={"TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": "1",
                                   "TORCH_NEURONX_DEBUG_DIR": str(tmp_path), **cache})
    assert result.returncode == 0, result.stderr
    files = sorted(os.listdir(tmp_path / "fx_graphs" / "proc_0"))
    assert sorted(f.split("_")[1] for f in files) == ["backward", "forward"]
    assert all(f.endswith(".fx.txt") for f in files)
    # The generated code too (Inductor's output module with its C++ kernels).
    assert sorted(os.listdir(tmp_path / "kernels" / "proc_0")) == ["graph0_forward.py",
                                                                  "graph1_backward.py"]
    forward = next(f for f in files if "_forward_" in f)
    assert "aten.sin" in (tmp_path / "fx_graphs" / "proc_0" / forward).read_text()


def test_no_artifacts_without_the_variable(tmp_path):
    code = """
        import torch
        torch.compile(lambda x: x + 1, backend="neuron")(torch.ones(2, device="neuron"))
    """
    result = run_python(code, env={"TORCH_NEURONX_DEBUG_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "fx_graphs").exists()
