"""DistributedDataParallel runs unchanged on neuron: ddp_worker.py trains the same recipes
under torchrun on neuron (backend "neuron") and on the CPU (backend "gloo"); the two runs must
agree bit for bit, and each must match training without DDP on the full batch.

Tolerances:
- neuron vs gloo-on-CPU: exact. A neuron op runs ATen's CPU kernel on the tensor's bytes and
  the "neuron" backend moves the bytes with the same Gloo algorithms, so both runs do the same
  float operations in the same order (same buckets, same ring reduction, one OpenMP thread).
- DDP vs one process on the full batch: float32 tolerance (rtol 1e-5, atol 1e-6). Same math,
  different order: DDP averages per-rank means of LOCAL rows, the single process takes one
  mean of all rows, so the last bits of gradients, losses and parameters differ.
- bf16_compress_hook vs the single process: atol 1e-3. The hook rounds every gradient bucket
  to bfloat16 (8 significant bits, relative error up to 2^-9) before the all-reduce; over four
  SGD steps at lr 0.05 the parameters drift by ~1e-4.
"""

import pytest
import torch

from _training_runs import assert_tensors_equal, run_on_neuron_and_cpu

RECIPES = ("buckets", "no_sync", "unused", "allreduce_hook", "bf16_hook")
F32 = dict(rtol=1e-5, atol=1e-6)
BF16_HOOK = dict(rtol=0, atol=1e-3)


@pytest.mark.parametrize("ranks", [2, 4])
def test_ddp_matches_gloo_on_cpu_and_single_process(tmp_path, ranks):
    runs = run_on_neuron_and_cpu("ddp_worker.py", ranks, tmp_path, "ddp")
    for recipe in RECIPES:
        for rank in range(ranks):
            neuron = runs["neuron"][rank]["recipes"][recipe]
            cpu = runs["cpu"][rank]["recipes"][recipe]
            what = f"{recipe}, rank {rank}"
            # Bit for bit the same training as DDP on the CPU with Gloo.
            assert neuron["losses"] == cpu["losses"], (what, neuron["losses"], cpu["losses"])
            assert_tensors_equal(neuron["params"], cpu["params"], what)
            # Parameters and gradients stayed on this rank's NeuronCore.
            assert neuron["param_devices"] == [f"neuron:{rank}"], (what, neuron["param_devices"])
            assert neuron["grad_devices"] == [f"neuron:{rank}"], (what, neuron["grad_devices"])
            # The training step ran entirely on the device.
            assert neuron["fallbacks"] == {}, (what, neuron["fallbacks"])
            # DDP keeps the replicas identical.
            assert_tensors_equal(neuron["params"], runs["neuron"][0]["recipes"][recipe]["params"],
                                f"{what} vs rank 0")

        # The same training without DDP, on the full batch, in rank 0's process.
        single = runs["neuron"][0]["single"][recipe]
        tol = BF16_HOOK if recipe == "bf16_hook" else F32
        ddp_params = runs["neuron"][0]["recipes"][recipe]["params"]
        for name, value in single["params"].items():
            torch.testing.assert_close(ddp_params[name], value, **tol,
                                       msg=lambda m: f"{recipe} {name} vs single: {m}")
        # DDP's loss on the full batch is the mean of the ranks' losses on their rows.
        mean_losses = torch.tensor([r["recipes"][recipe]["losses"] for r in runs["neuron"]],
                                   dtype=torch.float64).mean(0)
        torch.testing.assert_close(mean_losses, torch.tensor(single["losses"],
                                                             dtype=torch.float64),
                                   rtol=1e-3 if recipe == "bf16_hook" else 1e-5, atol=0)

    neuron = [runs["neuron"][rank]["recipes"] for rank in range(ranks)]
    # Several buckets: the rebuilt bucket list has more than one entry, each reduced per step.
    assert len(neuron[0]["buckets"]["buckets"].split(",")) >= 2, neuron[0]["buckets"]
    assert neuron[0]["buckets"]["buckets_reduced"] >= 2, neuron[0]["buckets"]
    # no_sync: after the first micro-batch the gradients are each rank's own; after the
    # second they are all-reduced, identical on every rank.
    local = [n["no_sync"]["grad_snapshots"][0] for n in neuron]
    synced = [n["no_sync"]["grad_snapshots"][1] for n in neuron]
    assert not torch.equal(local[0], local[1])
    for s in synced[1:]:
        assert torch.equal(s, synced[0])
    # Comm hooks saw neuron buckets and DDP's futures completed with neuron tensors.
    for rank in range(ranks):
        for recipe in ("allreduce_hook", "bf16_hook"):
            seen = neuron[rank][recipe]["seen"]
            assert seen == [("bucket", f"neuron:{rank}"), ("future", f"neuron:{rank}")], seen
            assert runs["cpu"][rank]["recipes"][recipe]["seen"] == [("bucket", "cpu"),
                                                                    ("future", "cpu")]
