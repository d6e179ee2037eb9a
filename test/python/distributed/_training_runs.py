"""Launches one of the training workers of test/python/distributed/workers twice under
torchrun: on neuron (backend "neuron") and on the CPU (backend "gloo"), and loads what every
rank saved."""

import torch

from conftest import assert_ok, run_torchrun

# The CPU run is stock PyTorch: without this, `import torch` autoloads torch_neuron, and
# PyTorch's defaults that follow the accelerator (fully_shard's default mesh, for one) would
# pick neuron in the reference run too.
CPU_ENV = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def run_on_neuron_and_cpu(worker, ranks, out_dir, name, timeout=120):
    """Returns {"neuron": [rank results], "cpu": [rank results]}."""
    runs = {}
    for device in ("neuron", "cpu"):
        result = assert_ok(run_torchrun(worker, ranks, ["--device", device, "--out", str(out_dir)],
                                        env=CPU_ENV if device == "cpu" else None,
                                        timeout=timeout))
        for rank in range(ranks):
            assert f"{name} ok on rank {rank} ({device})" in result.stdout, result.stdout
        runs[device] = [torch.load(out_dir / f"{device}_rank{rank}.pt")
                        for rank in range(ranks)]
    return runs


def assert_tensors_equal(a, b, what):
    """Bit for bit: same keys, dtypes, shapes and values."""
    assert a.keys() == b.keys(), what
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, (what, name)
        assert torch.equal(a[name], b[name]), f"{what}: {name} differs\n{a[name]}\n{b[name]}"


# A small floating-point sum (or product) over more than 2 ranks adds its terms in rank order
# on neuron and in the order of Gloo's ring on the CPU (Note [Collectives that carry their
# data]): the neuron and Gloo runs agree bit for bit on 2 ranks, and to float tolerance on more.
def gloo_is_exact(ranks):
    return ranks <= 2


def assert_tensors_match_gloo(neuron, cpu, ranks, what, **tol):
    """Bit for bit on 2 ranks; within `tol` (torch.testing.assert_close) on more."""
    if gloo_is_exact(ranks):
        assert_tensors_equal(neuron, cpu, what)
        return
    assert neuron.keys() == cpu.keys(), what
    for name in neuron:
        torch.testing.assert_close(neuron[name], cpu[name], **tol,
                                   msg=lambda m: f"{what}: {name} vs Gloo: {m}")


def assert_values_match_gloo(neuron, cpu, ranks, what, rtol):
    """Lists of floats (losses, norms): equal on 2 ranks; within `rtol` on more."""
    if gloo_is_exact(ranks):
        assert neuron == cpu, (what, neuron, cpu)
        return
    torch.testing.assert_close(torch.tensor(neuron, dtype=torch.float64),
                               torch.tensor(cpu, dtype=torch.float64), rtol=rtol, atol=0,
                               msg=lambda m: f"{what} vs Gloo: {m}")
