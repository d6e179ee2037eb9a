"""Random ops on DTensors on neuron (Note [Philox generator]): dtensor_rng_worker.py on 2 ranks
under torchrun on loopback. DTensor's OffsetBasedRNGTracker draws each Shard(0) shard at the
offset of its first element, so the full tensor the ranks draw together equals the same op drawn
on one device from the same (seed, offset), bit for bit, and every rank ends at the same offset.

Tolerances: init and dropout exact (the same Philox counters, the same double-to-float
rounding). The meta-device recipe: initial parameters exact; losses rtol 1e-5 (FSDP averages
the two ranks' gradients of half batches with a reduce-scatter where one device computes the
full batch's gradient in one matmul: the same sums in another order).
"""

import torch

from conftest import assert_ok, run_torchrun

RANKS = 2
CASES = [f"{kind}_{init}" for kind in ("fsdp", "colwise")
         for init in ("normal_", "uniform_", "trunc_normal_")] + ["dropout"]


def test_dtensor_random_ops_match_one_device(tmp_path):
    result = assert_ok(run_torchrun("dtensor_rng_worker.py", RANKS,
                                    ["--device", "neuron", "--out", str(tmp_path)],
                                    timeout=120))
    for rank in range(RANKS):
        assert f"dtensor rng ok on rank {rank} (neuron)" in result.stdout, result.stdout
    runs = [torch.load(tmp_path / f"neuron_rank{rank}.pt") for rank in range(RANKS)]
    for rank, run in enumerate(runs):
        for case in CASES:
            r = run[case]
            assert torch.equal(r["full"], r["expected"]), (rank, case, r["full"], r["expected"])
            if "trunc_normal_" not in case:  # see dtensor_rng_worker.py
                assert r["offset"] == r["expected_offset"], (rank, case)
            assert torch.equal(r["full"], runs[0][case]["full"]), (rank, case)
        init = run["meta_recipe"]["init"]
        for name, single in runs[0]["meta_recipe"]["single_init"].items():
            assert torch.equal(init[name], single), (rank, name)
        torch.testing.assert_close(run["meta_recipe"]["losses"],
                                   runs[0]["meta_recipe"]["single_losses"], rtol=1e-5, atol=0)
    # The init draws something (not all zeros, not the same as the CPU's numbers).
    assert runs[0]["fsdp_normal_"]["full"].std() > 1
