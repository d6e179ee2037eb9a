"""torch.distributed.checkpoint.async_save on neuron (async_checkpoint_worker.py): an FSDP2
model and its AdamW state saved in the background while training goes on, then loaded on the
same or another number of ranks.

Tolerances:
- parameters loaded vs parameters at the checkpoint: exact (DCP writes and reads the bytes;
  resharding only moves them).
- resumed losses vs the losses of the run that kept training: exact on the same ranks (the
  same computation from the same state); rtol 1e-5 on 2 ranks after saving on 4 (each rank's
  mean loss and the gradient reduce-scatter sum over other splits of the batch).
- sharded losses vs one NeuronCore without FSDP on the whole batch: rtol 1e-5, as in
  test_distributed_fsdp.py (float32, summation order only).
"""

import pytest
import torch

from conftest import assert_ok, run_torchrun

STEPS, SAVED_AFTER = 4, 2


def run(phase, ranks, out_dir):
    result = assert_ok(run_torchrun("async_checkpoint_worker.py", ranks,
                                    [phase, "--out", str(out_dir)], timeout=150))
    for rank in range(ranks):
        assert f"{phase} ok on rank {rank}" in result.stdout, result.stdout
    return [torch.load(out_dir / f"{phase}_rank{rank}.pt") for rank in range(ranks)]


def mean_losses(records):
    """The whole batch's loss: the mean of the ranks' equal-sized means."""
    return torch.tensor([r["losses"] for r in records], dtype=torch.float64).mean(0)


def assert_params_equal(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.extended  # 10 s; docs/distributed.md's torchrun example async_saves by default
def test_async_save_round_trip_on_two_ranks(tmp_path):
    records = run("roundtrip", 2, tmp_path)
    for r in records:
        save, resume = r["save"], r["resume"]
        assert_params_equal(resume["loaded_params"], save["saved_params"])
        assert resume["losses"] == save["losses"][SAVED_AFTER:], (resume, save["losses"])
    assert_params_equal(records[0]["save"]["saved_params"], records[1]["save"]["saved_params"])


@pytest.mark.extended  # 4 ranks (test/README.md)
def test_async_save_on_four_ranks_resumes_on_two(tmp_path):
    saved = run("save", 4, tmp_path)
    resumed = run("resume", 2, tmp_path)
    single = torch.tensor(saved[0]["single_losses"], dtype=torch.float64)
    torch.testing.assert_close(mean_losses(saved), single, rtol=1e-5, atol=0)
    for r in resumed:
        assert_params_equal(r["loaded_params"], saved[0]["saved_params"])
    torch.testing.assert_close(mean_losses(resumed), single[SAVED_AFTER:], rtol=1e-5, atol=0)
    torch.testing.assert_close(mean_losses(resumed), mean_losses(saved)[SAVED_AFTER:],
                               rtol=1e-5, atol=0)
