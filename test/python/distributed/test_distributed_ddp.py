"""DistributedDataParallel runs unchanged on neuron: ddp_worker.py trains the same recipes
under torchrun on neuron (backend "neuron") and on the CPU (backend "gloo"); the two runs must
agree bit for bit, and each must match training without DDP on the full batch.

Tolerances:
- neuron vs gloo-on-CPU on 2 ranks: exact. A neuron op runs ATen's CPU kernel on the tensor's
  bytes, and a 2-term sum is the same in any order, so both runs do the same float operations
  (same buckets, one OpenMP thread). On 4 ranks the small buckets' sums add in rank order on
  neuron and in Gloo's ring order on the CPU (Note [Collectives that carry their data]):
  losses rtol 1e-5, parameters as DDP vs one process below.
- DDP vs one process on the full batch: float32 tolerance (rtol 1e-5, atol 1e-6). Same math,
  different order: DDP averages per-rank means of LOCAL rows, the single process takes one
  mean of all rows, so the last bits of gradients, losses and parameters differ.
- bf16_compress_hook vs the single process: atol 1e-3. The hook rounds every gradient bucket
  to bfloat16 (8 significant bits, relative error up to 2^-9) before the all-reduce; over four
  SGD steps at lr 0.05 the parameters drift by ~1e-4.
"""

import pytest
import torch

from _training_runs import (CPU_ENV, assert_tensors_equal, assert_tensors_match_gloo,
                            assert_values_match_gloo, run_on_neuron_and_cpu)
from conftest import EVENT_RECORD_NS, assert_ok, run_torchrun

RECIPES = ("buckets", "no_sync", "unused", "allreduce_hook", "bf16_hook")
F32 = dict(rtol=1e-5, atol=1e-6)
BF16_HOOK = dict(rtol=0, atol=1e-3)


@pytest.mark.parametrize("ranks", [2, pytest.param(4, marks=pytest.mark.extended)])
def test_ddp_matches_gloo_on_cpu_and_single_process(tmp_path, ranks):
    runs = run_on_neuron_and_cpu("ddp_worker.py", ranks, tmp_path, "ddp")
    for recipe in RECIPES:
        tol = BF16_HOOK if recipe == "bf16_hook" else F32
        loss_rtol = 1e-3 if recipe == "bf16_hook" else 1e-5
        for rank in range(ranks):
            neuron = runs["neuron"][rank]["recipes"][recipe]
            cpu = runs["cpu"][rank]["recipes"][recipe]
            what = f"{recipe}, rank {rank}"
            # The same training as DDP on the CPU with Gloo (bit for bit on 2 ranks).
            assert_values_match_gloo(neuron["losses"], cpu["losses"], ranks, what,
                                     rtol=loss_rtol)
            assert_tensors_match_gloo(neuron["params"], cpu["params"], ranks, what, **tol)
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
        ddp_params = runs["neuron"][0]["recipes"][recipe]["params"]
        for name, value in single["params"].items():
            torch.testing.assert_close(ddp_params[name], value, **tol,
                                       msg=lambda m: f"{recipe} {name} vs single: {m}")
        # DDP's loss on the full batch is the mean of the ranks' losses on their rows.
        mean_losses = torch.tensor([r["recipes"][recipe]["losses"] for r in runs["neuron"]],
                                   dtype=torch.float64).mean(0)
        torch.testing.assert_close(mean_losses, torch.tensor(single["losses"],
                                                             dtype=torch.float64),
                                   rtol=loss_rtol, atol=0)

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

    # nn.SyncBatchNorm (Note [SyncBatchNorm on neuron]): normalizing over every rank's rows, DDP
    # trains as plain BatchNorm does on the full batch in one process (on the CPU): the same
    # losses (the mean of the ranks'), parameters and running statistics, to float32 order.
    single = runs["neuron"][0]["sync_bn_single"]
    mean_losses = torch.tensor([r["sync_bn"]["losses"] for r in runs["neuron"]],
                               dtype=torch.float64).mean(0)
    torch.testing.assert_close(mean_losses, torch.tensor(single["losses"], dtype=torch.float64),
                               rtol=1e-5, atol=0)
    for rank in range(ranks):
        sync_bn = runs["neuron"][rank]["sync_bn"]
        assert sync_bn["fallbacks"] == {}, sync_bn["fallbacks"]
        for name, value in single["state"].items():
            got = sync_bn["state"][name]
            if value.is_floating_point():
                torch.testing.assert_close(got, value, rtol=1e-4, atol=1e-5,
                                           msg=lambda m: f"SyncBatchNorm {name}: {m}")
            else:  # num_batches_tracked
                assert torch.equal(got, value), (name, got, value)


TIMING_STATS = ("forward_compute_time", "backward_compute_time", "backward_comm_time",
                "backward_compute_comm_overlap_time")


@pytest.fixture(scope="module")
def timing_runs(tmp_path_factory):
    """ddp_timing_worker.py on 2 ranks, on neuron and on the CPU with Gloo: {device: (stderr,
    [rank results])}."""
    out = tmp_path_factory.mktemp("ddp_timing")
    runs = {}
    for device in ("neuron", "cpu"):
        result = assert_ok(run_torchrun("ddp_timing_worker.py", 2,
                                        ["--device", device, "--out", str(out)],
                                        env=CPU_ENV if device == "cpu" else None, timeout=120))
        for rank in range(2):
            assert f"ddp timing ok on rank {rank} ({device})" in result.stdout, result.stdout
        runs[device] = (result.stderr, [torch.load(out / f"{device}_rank{rank}.pt")
                                        for rank in range(2)])
    return runs


def test_ddp_timing_stats_are_simulated_time(timing_runs):
    """Note [DDP reducer timer]: no warning, and DDP's timing stats are the simulated time
    between DDP's points of the step, as the worker's own neuron events around the step say.

    The worker's marks are e0 (before ddp(x)), e1 (after it) and e2 (after backward()). Between
    e0 and e1 the stream runs DDP's forward-start record, the forward, DDP's backward-start
    record and e1's record; DDP's forward time is from its first record to its second, so it is
    e0->e1 less two records. e1 directly follows DDP's backward-start record and e2 directly
    follows its comm-end record, so e1->e2 is DDP's backward compute start to comm end:
    backward compute + comm - overlap (comm starts before compute ends). DDP rounds each
    duration to whole ns: 1 ns per term of tolerance."""
    stderr, ranks = timing_runs["neuron"]
    # c10d's Logger warns once per process when the device type has no reducer timer.
    assert "Time stats are currently only collected" not in stderr, stderr
    assert "logger.cpp" not in stderr, stderr
    for rank, result in enumerate(ranks):
        timing = result["timing"]
        # Three buckets after DDP rebuilt them at the second step.
        assert len(timing["buckets"].split(",")) == 3, timing["buckets"]
        # DDP computes step i's stats at step i + 1's forward: stats[i] belong to steps[i - 1].
        for i in range(1, len(timing["stats"])):
            stats, step = timing["stats"][i], timing["steps"][i - 1]
            what = f"rank {rank}, step {i - 1}: {stats}, {step}"
            assert all(stats[k] > 0 for k in TIMING_STATS), what
            assert abs(stats["forward_compute_time"] - (step["forward"] - 2 * EVENT_RECORD_NS)) \
                <= 1, what
            backward = (stats["backward_compute_time"] + stats["backward_comm_time"]
                        - stats["backward_compute_comm_overlap_time"])
            assert abs(backward - step["backward"]) <= 2, what
            # The comm time holds the modelled all-reduces of every bucket.
            assert stats["backward_comm_time"] >= timing["all_reduce_ns"], what
            assert stats["backward_compute_comm_overlap_time"] < min(
                stats["backward_compute_time"], stats["backward_comm_time"]), what
            if i >= 3:
                # Several buckets (from step 1 on): the first bucket's all-reduce starts
                # while the backward still computes, far more than a record before its end.
                assert stats["backward_compute_comm_overlap_time"] > 10 * EVENT_RECORD_NS, what
        # The averages DDP keeps are running means of the per-step values (integer division).
        sampled = timing["stats"][1:]
        for k in TIMING_STATS:
            values = [s[k] for s in sampled]
            assert min(values) - len(values) <= timing["final"]["avg_" + k] <= max(values), \
                (rank, k, values, timing["final"])


def test_ddp_bf16_compress_hook_matches_gloo_on_cpu(timing_runs):
    """default_hooks.bf16_compress_hook, registered as it is on neuron (PyTorch refuses it by
    name without CUDA+NCCL or XPU+XCCL; torch_neuron lets a neuron DDP module take it), trains
    bit for bit as the same hook on CPU tensors with Gloo: the hook's casts and division are
    ATen's CPU kernels on the same bytes and the bf16 all-reduce is Gloo's on both."""
    _, neuron = timing_runs["neuron"]
    _, cpu = timing_runs["cpu"]
    for rank in range(2):
        n, c = neuron[rank]["bf16"], cpu[rank]["bf16"]
        assert n["losses"] == c["losses"], (rank, n["losses"], c["losses"])
        assert_tensors_equal(n["params"], c["params"], f"bf16 hook, rank {rank}")
        assert_tensors_equal(n["params"], neuron[0]["bf16"]["params"], f"rank {rank} vs 0")
        assert n["grad_devices"] == [f"neuron:{rank}"], n["grad_devices"]
        assert n["fallbacks"] == {}, n["fallbacks"]
