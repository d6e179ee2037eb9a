"""The simulated machine chosen by the environment: TORCH_NEURON_INSTANCE and
NEURON_RT_VISIBLE_CORES, each checked in a fresh process (the machine is created once)."""

import pytest

from conftest import run_python, run_python_json

GiB = 1 << 30

# Reads what a process sees and exercises the first and last device.
PROBE = """
    import json, torch
    n = torch.neuron.device_count()
    props = [torch.neuron.get_device_properties(i) for i in range(n)]
    a = torch.arange(8.0)
    first = a.to("neuron:0")
    last = first.to(f"neuron:{n - 1}")          # device-to-device copy to the last device
    try:
        torch.empty(1, device=f"neuron:{n}")
        past_end = "no error"
    except RuntimeError as e:
        past_end = str(e)
    print(json.dumps({
        "available": torch.neuron.is_available(),
        "count": n,
        "accelerator_count": torch.accelerator.device_count(),
        "instance": props[0].instance_type,
        "chip": props[0].chip,
        "total_memory": sorted({p.total_memory for p in props}),
        "cores": [p.core for p in props],
        "indices": [p.index for p in props],
        "chip_of_last": props[-1].chip_index,
        "last_device": str(last.device),
        "round_trip": torch.equal(last.cpu(), a),
        "past_end": past_end,
    }))
"""


@pytest.mark.parametrize("instance, count, gib, chip, chips", [
    ("trn1.2xlarge", 2, 16, "Trainium1", 1),     # 32 GiB per chip, 2 cores
    ("trn1.32xlarge", 32, 16, "Trainium1", 16),
    ("trn2.3xlarge", 4, 24, "Trainium2", 1),     # 96 GiB per chip, 4 logical cores
    ("trn2.48xlarge", 64, 24, "Trainium2", 16),
])
def test_instance_type(instance, count, gib, chip, chips):
    out = run_python_json(PROBE, env={"TORCH_NEURON_INSTANCE": instance})
    assert out["available"]
    assert out["count"] == count
    assert out["accelerator_count"] == count
    assert out["instance"] == instance
    assert out["chip"] == chip
    assert out["total_memory"] == [gib * GiB]
    assert out["cores"] == list(range(count))
    assert out["indices"] == list(range(count))
    assert out["chip_of_last"] == chips - 1
    assert out["last_device"] == f"neuron:{count - 1}"
    assert out["round_trip"]
    assert f"neuron:0..neuron:{count - 1}" in out["past_end"]


@pytest.mark.parametrize("visible, cores", [("1-2", [1, 2]), ("3", [3]), ("0,2-3", [0, 2, 3])])
def test_visible_cores(visible, cores):
    out = run_python_json(PROBE, env={"NEURON_RT_VISIBLE_CORES": visible})
    assert out["count"] == len(cores)
    assert out["cores"] == cores          # device i is the i-th visible core
    assert out["indices"] == list(range(len(cores)))
    assert out["round_trip"]
    assert f"neuron:0..neuron:{len(cores) - 1}" in out["past_end"]


UNUSABLE = """
    import json, torch
    result = {"available": torch.neuron.is_available(),
              "accelerator_available": torch.accelerator.is_available()}
    for name, fn in [("device_count", torch.neuron.device_count),
                     ("tensor", lambda: torch.zeros(1, device="neuron")),
                     ("copy", lambda: torch.ones(1).to("neuron")),
                     ("properties", lambda: torch.neuron.get_device_properties(0))]:
        try:
            fn()
            result[name] = "no error"
        except RuntimeError as e:
            result[name] = "RuntimeError: " + str(e)
    print(json.dumps(result))
"""


def test_unknown_instance_type_is_a_clear_error():
    out = run_python_json(UNUSABLE, env={"TORCH_NEURON_INSTANCE": "trn9.huge"})
    assert out["available"] is False
    assert out["accelerator_available"] is False
    for key in ("device_count", "tensor", "copy", "properties"):
        message = out[key]
        assert message.startswith("RuntimeError: "), (key, message)
        assert "trn9.huge" in message
        for valid in ("trn1.2xlarge", "trn1.32xlarge", "trn2.3xlarge", "trn2.48xlarge"):
            assert valid in message


def test_invalid_visible_cores_is_a_clear_error():
    # trn2.3xlarge has cores 0..3.
    out = run_python_json(UNUSABLE, env={"NEURON_RT_VISIBLE_CORES": "7"})
    assert out["available"] is False
    for key in ("device_count", "tensor"):
        assert out[key].startswith("RuntimeError: ")
        assert "NEURON_RT_VISIBLE_CORES" in out[key]


def test_import_works_with_invalid_environment():
    # The error belongs to device use, not to `import torch`.
    result = run_python("import torch, torch_neuron; print(torch.ones(2).sum().item())",
                        env={"TORCH_NEURON_INSTANCE": "bogus"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"
