"""Simulated device faults (torch_neuron.inject_fault, TORCH_NEURON_INJECT_FAULT): a NeuronCore
fails the way the Neuron runtime reports it, stays failed, and the program can still save what
is on the other devices and exit cleanly; under torchrun --max-restarts with distributed
checkpointing, a job hit by a fault restarts and ends exactly as an uninterrupted run. Each case
runs in its own process, since a failed device stays failed until its process exits."""

import pytest
import torch

from conftest import assert_ok, run_python, run_python_json, run_torchrun

STATUS = {"hbm_ue": "NRT_EXEC_HW_ERR_HBM_UE(1201)", "timeout": "NRT_TIMEOUT(5)",
          "lost": "NRT_HW_ERROR(6)"}


@pytest.mark.parametrize("kind", sorted(STATUS))
def test_the_armed_launch_fails_and_the_device_stays_failed(kind, tmp_path):
    got = run_python_json(f"""
        import json, torch, torch_neuron
        a = torch.arange(4.0, device="neuron:1")
        keep = torch.arange(4.0, device="neuron:0") * 10
        torch_neuron.inject_fault({kind!r}, "neuron:1", after_launches=2)
        b = a + 1                      # launch 1: fine
        errors = []
        for attempt in (lambda: b * 2,                                  # launch 2: the fault
                        lambda: torch.zeros(3, device="neuron:1"),      # allocation
                        lambda: b.cpu(),                                # copy out
                        lambda: torch.neuron.synchronize(1)):
            try:
                attempt()
                errors.append(None)
            except RuntimeError as e:
                errors.append(str(e))
        torch.save(keep.cpu(), {str(tmp_path / "saved.pt")!r})  # other devices still work
        print(json.dumps({{"errors": errors, "failed": [torch_neuron.device_failed(i)
                                                        for i in range(4)],
                          "other": (keep + 1).cpu().tolist()}}))
    """)
    assert all(e is not None and e.startswith(f"NRT Error {STATUS[kind]}: neuron:1")
               for e in got["errors"]), got["errors"]
    assert "unusable until the process restarts" in got["errors"][0]
    assert got["failed"] == [False, True, False, False]
    assert got["other"] == [1.0, 11.0, 21.0, 31.0]
    assert torch.equal(torch.load(tmp_path / "saved.pt"), torch.arange(4.0) * 10)


def test_environment_variable_arms_a_fault_at_startup():
    result = run_python("""
        import torch
        x = torch.ones(2, device="neuron")        # launch 1 (a fill)
        y = x + 1                                 # launch 2
        try:
            y + 1                                 # launch 3
        except RuntimeError as e:
            print("raised:", str(e).split(":")[0])
    """, env={"TORCH_NEURON_INJECT_FAULT": "timeout:0:3"})
    assert result.returncode == 0, result.stderr  # the process exits cleanly
    assert "raised: NRT Error NRT_TIMEOUT(5)" in result.stdout


@pytest.mark.parametrize("value", ["hbm_ue", "melted:0:3", "hbm_ue:7:3", "hbm_ue:0:0"])
def test_a_bad_fault_specification_names_the_variable(value):
    result = run_python("import torch; torch.ones(1, device='neuron')",
                        env={"TORCH_NEURON_INJECT_FAULT": value})
    assert result.returncode != 0
    assert "TORCH_NEURON_INJECT_FAULT" in result.stderr and "hbm_ue:1:500" in result.stderr


def test_bad_arguments_of_inject_fault():
    import torch_neuron

    with pytest.raises(ValueError, match="unknown fault kind"):
        torch_neuron.inject_fault("melted")
    with pytest.raises(ValueError, match="after_launches must be >= 1"):
        torch_neuron.inject_fault("hbm_ue", 0, after_launches=0)
    with pytest.raises(RuntimeError, match="valid devices are"):
        torch_neuron.inject_fault("hbm_ue", 9)
    assert not torch_neuron.device_failed(0)


def test_torchrun_restarts_after_a_fault_and_finishes_like_an_uninterrupted_run(tmp_path):
    faulty, clean = tmp_path / "faulty", tmp_path / "clean"
    faulty.mkdir()
    clean.mkdir()
    result = assert_ok(run_torchrun("fault_restart_worker.py", 2, ["--out", str(faulty),
                                                                    "--fault"],
                                    timeout=240, extra_args=["--max-restarts", "1"]))
    assert "NRT_EXEC_HW_ERR_HBM_UE" in result.stderr  # rank 1's error reached the log
    assert (faulty / "attempts.txt").read_text().splitlines() == [
        "attempt 0 starts at step 0", "attempt 1 starts at step 3"]
    assert_ok(run_torchrun("fault_restart_worker.py", 2, ["--out", str(clean)], timeout=240))
    a, b = torch.load(faulty / "result.pt"), torch.load(clean / "result.pt")
    assert a["loss"] == b["loss"]
    for name in b["params"]:
        assert torch.equal(a["params"][name], b["params"][name]), name


@pytest.mark.parametrize("launch", [150, 333, 500])
def test_a_fault_during_training_raises_and_never_aborts(launch):
    # Forward, backward (on autograd's device thread) and optimizer launches all reach the
    # fault somewhere; the program gets a Python exception wherever it lands.
    result = run_python("""
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                    torch.nn.Linear(32, 4)).to("neuron")
        opt = torch.optim.AdamW(model.parameters())
        try:
            for step in range(100):
                model(torch.randn(8, 16, device="neuron")).square().mean().backward()
                opt.step()
                opt.zero_grad()
        except RuntimeError as e:
            print("caught:", str(e).split(":")[0])
    """, env={"TORCH_NEURON_INJECT_FAULT": f"hbm_ue:0:{launch}"})
    assert result.returncode == 0, result.stderr
    assert "caught: NRT Error NRT_EXEC_HW_ERR_HBM_UE(1201)" in result.stdout
    assert "terminate called" not in result.stderr
