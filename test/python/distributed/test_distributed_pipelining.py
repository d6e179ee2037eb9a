"""torch.distributed.pipelining on neuron ranks: workers/pipelining_worker.py under torchrun.

- Values (2 and 4 ranks): a tiny transformer split by the `pipeline()` tracer (split_spec) and
  by hand (`PipelineStage`), trained 2 SGD steps under ScheduleGPipe, Schedule1F1B and
  ScheduleInterleaved1F1B (2 stages per rank), each run from a fresh copy of one CPU state
  dict, against the whole model trained on one NeuronCore microbatch by microbatch: losses
  and every parameter's gradient at every step equal bit for bit. The computation is the same:
  each stage runs the same ATen kernels on the same bytes, the activations and gradients
  cross ranks unchanged, and the schedules accumulate the microbatches' gradients in the
  reference's order (microbatch 0 first) before dividing by their count.
- Pipeline + FSDP on a ("pp", "dp") 2x2 mesh: see test_pipeline_with_fsdp for the tolerance.
- Timing (4 ranks, GPipe, the profiled step predicted only): point-to-point records on the
  right link, the pipeline's fill, and its bubble.
"""

import json

import pytest
import torch

from conftest import assert_ok, run_torchrun
from torch_neuron.profiler.collectives import covered_ns

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def run_worker(what, world, out_dir, env=None):
    result = assert_ok(run_torchrun("pipelining_worker.py", world,
                                    ["--what", what, "--out", str(out_dir)], env=env,
                                    timeout=150))
    for rank in range(world):
        assert f"pipelining {what} ok on rank {rank}" in result.stdout, result.stdout
    return [torch.load(out_dir / f"{what}_rank{rank}.pt") for rank in range(world)]


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.extended)])
def test_pipeline_schedules_match_one_device(world, tmp_path):
    runs = run_worker("values", world, tmp_path)
    reference = runs[0]["reference"]
    n_params = len(reference["grads"][0])
    for split in ("tracer", "manual"):
        for schedule in SCHEDULES:
            what = f"{split} split, {schedule}, {world} ranks"
            n_stages = world * (2 if schedule == "interleaved" else 1)
            seen = {}
            for rank, run in enumerate(runs):
                out = run[(split, schedule)]
                expected_stages = [rank, rank + world] if schedule == "interleaved" else [rank]
                assert out["stages"] == expected_stages, (what, out["stages"])
                if n_stages - 1 in out["stages"]:
                    assert out["losses"] == reference["losses"], (what, out["losses"],
                                                                  reference["losses"])
                for step, grads in enumerate(out["grads"]):
                    for name, grad in grads.items():
                        ref = reference["grads"][step][name]
                        assert torch.equal(grad, ref), f"{what}: step {step} {name} differs"
                        seen.setdefault(name, set()).add(rank)
            # Every parameter of the model is on exactly one rank, with its gradient.
            assert len(seen) == n_params and all(len(r) == 1 for r in seen.values()), (what,
                                                                                       seen)


@pytest.mark.extended  # 4 ranks on a 2x2 mesh (test/README.md)
def test_pipeline_with_fsdp_on_2x2_mesh(tmp_path):
    """Tolerance: the first step's losses are bit for bit (same weights, same computation); the
    gradients and later steps differ in the last bits only. The one-process reference adds
    the four microbatches' gradients and divides by 4; FSDP adds each dp rank's two, divides
    by 2 (the schedule's scale_grads) and averages over the 2 dp ranks in the reduce-scatter:
    the same sum in another order and rounding. So each gradient is compared to within
    1e-6 of that tensor's largest magnitude (about 8 float32 ulps of it; measured: 3), and
    later losses (~4.3) with rtol 1e-6 (2 ulps; measured: 1)."""
    runs = run_worker("fsdp", 4, tmp_path)
    reference = runs[0]["reference"]
    assert [(r["pp"], r["dp"]) for r in runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for schedule in ("gpipe", "1f1b"):
        names = set()
        for run in runs:
            out = run[schedule]
            what = f"{schedule}, pp {run['pp']} dp {run['dp']}"
            if run["pp"] == 1:  # the last stage has the losses of its dp rank's half
                losses = [step[run["dp"]] for step in reference["losses"]]
                assert out["losses"][0] == losses[0], (what, out["losses"], losses)
                torch.testing.assert_close(torch.tensor(out["losses"]), torch.tensor(losses),
                                           rtol=1e-6, atol=0)
            for step, grads in enumerate(out["grads"]):
                for name, grad in grads.items():
                    ref = reference["grads"][step][name]
                    torch.testing.assert_close(grad, ref, rtol=0, atol=1e-6 * ref.abs().max(),
                                               msg=lambda m: f"{what} step {step} {name}: {m}")
                    names.add(name)
        assert names == set(reference["grads"][0]), schedule


@pytest.fixture(scope="module")
def gpipe_profiles(tmp_path_factory):
    """Each rank's simulated records of one GPipe step (4 stages, 8 microbatches)."""
    return run_worker("timing", 4, tmp_path_factory.mktemp("pp_timing"),
                      env={"TORCH_NEURON_EXECUTE": "0"})


MICROBATCHES = 8


def split_records(run):
    stream = run["collective_stream"]
    compute = [r for r in run["records"] if r["queue"] < stream]
    p2p = [r for r in run["records"] if r["queue"] >= stream]
    return compute, p2p


def end(record):
    return record["start_ns"] + record["duration_ns"]


@pytest.mark.extended  # 4 ranks (test/README.md)
def test_gpipe_point_to_point_records(gpipe_profiles):
    stages = len(gpipe_profiles)
    for rank, run in enumerate(gpipe_profiles):
        compute, p2p = split_records(run)
        assert compute, rank
        names = sorted(r["name"] for r in p2p)
        # One activation forward and one gradient back per microbatch and neighbour.
        neighbours = (rank > 0) + (rank < stages - 1)
        assert names == (["c10d::recv"] * MICROBATCHES * neighbours
                         + ["c10d::send"] * MICROBATCHES * neighbours), (rank, names)
        cost = run["pair_cost"]
        assert cost["link"] == "on-chip", cost  # 4 NeuronCores of one trn2.3xlarge chip
        for record in p2p:
            detail = json.loads(record["detail"])
            assert detail["algorithm"] == "point-to-point" and detail["link"] == "on-chip"
            assert record["bytes"] == run["activation_bytes"], record
            assert record["duration_ns"] == pytest.approx(cost["duration_ns"], rel=1e-9)


@pytest.mark.extended  # 4 ranks (test/README.md)
def test_gpipe_fill_waits_for_forward_and_transfer(gpipe_profiles):
    """Each stage's first forward starts no earlier than the previous stage's first forward's
    start plus its duration plus the activation's transfer (the ranks' clocks agree: Note
    [Neuron process group]); so the last stage starts after all of them."""
    firsts = []
    for rank, run in enumerate(gpipe_profiles):
        compute, p2p = split_records(run)
        start = min(r["start_ns"] for r in compute)
        if rank < len(gpipe_profiles) - 1:
            first_send = min((r for r in p2p if r["name"] == "c10d::send"),
                             key=lambda r: r["start_ns"])
            forward = [r for r in compute if end(r) <= first_send["start_ns"]]
            assert forward, rank
            forward_ns = end(max(forward, key=end)) - start
        else:
            forward_ns = None
        firsts.append((start, forward_ns, run["pair_cost"]["duration_ns"]))
    for rank in range(1, len(firsts)):
        prev_start, prev_forward, transfer = firsts[rank - 1]
        assert firsts[rank][0] >= prev_start + prev_forward + transfer - 1e-6, (rank, firsts)
    total = sum(f + t for _, f, t in firsts[:-1])
    assert firsts[-1][0] >= firsts[0][0] + total - 1e-6, firsts


@pytest.mark.extended  # 4 ranks (test/README.md)
def test_gpipe_bubble(gpipe_profiles):
    """GPipe on S stages and M microbatches idles (S - 1) / (M + S - 1) of the step on each
    stage when the stages take equal time and transfers are free. Here the stages are equal
    blocks but the last one also computes the loss, which paces the steady phase, and each
    of the 2 (S - 1) transfers on the critical path adds its time. So a stage's idle
    fraction may exceed the ideal by M (t_max - t_stage) + 2 (S - 1) transfer over the step
    (t: a stage's busy time per microbatch, from its records), and fall below it by the
    transfers' share only; measured here: ideal 0.273, stages 0.268 to 0.324."""
    stages = len(gpipe_profiles)
    ideal = (stages - 1) / (MICROBATCHES + stages - 1)
    step_start = min(r["start_ns"] for run in gpipe_profiles for r in run["records"])
    step_end = max(end(r) for run in gpipe_profiles for r in run["records"])
    step = step_end - step_start
    busy = [covered_ns([(r["start_ns"], end(r)) for r in split_records(run)[0]])
            for run in gpipe_profiles]
    per_microbatch = [b / MICROBATCHES for b in busy]
    transfers = 2 * (stages - 1) * gpipe_profiles[0]["pair_cost"]["duration_ns"]
    for rank in range(stages):
        idle = 1 - busy[rank] / step
        over = (MICROBATCHES * (max(per_microbatch) - per_microbatch[rank]) + transfers) / step
        under = transfers / step
        assert ideal - under <= idle <= ideal + over, (rank, idle, ideal, under, over)
    # The busiest stage (the last: it also computes the loss) is within the transfers of the
    # ideal.
    assert busy.index(max(busy)) == stages - 1, busy
    assert abs((1 - busy[-1] / step) - ideal) <= transfers / step, (busy, step, ideal)
