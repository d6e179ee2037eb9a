"""DTensor and tensor parallelism run unchanged on neuron: tensor_parallel_worker.py runs on 4
ranks on neuron (backend "neuron") and on the CPU (backend "gloo"): DTensor placements and
redistributions on a (4,) mesh, a Colwise/Rowwise MLP, SequenceParallel with a
vocabulary-sharded loss_parallel, and 2-D FSDP2 + TP training on a (2, 2) ("dp", "tp") mesh.

Tolerances:
- neuron vs gloo-on-CPU: exact (same ATen CPU kernels on the same bytes), except where a
  float sum runs over all 4 ranks (the MLP's and the sequence-parallel block's partial sums,
  loss_parallel's reductions): small ones add in rank order on neuron and in Gloo's ring
  order on the CPU (Note [Collectives that carry their data]), so those are compared with
  the float32 tolerance below. The 2-D run's groups have 2 ranks: exact.
- distribute_tensor / redistribute / full_tensor round trips: exact (data movement only; the
  Partial sums use integer-valued floats, exact in any order).
- TP vs the unsharded module on one device: float32 tolerance (rtol 1e-5, atol 1e-5 on outputs,
  logits and gradients; rtol 1e-5 on losses). RowwiseParallel adds the ranks' partial matmul
  results with an all-reduce (or reduce-scatter) instead of accumulating the whole dot product
  in one GEMM, and loss_parallel reduces the softmax over vocabulary shards: the same sums in
  another order.
- 2-D FSDP+TP training vs one process on the full batch: losses rtol 1e-5; parameters atol 1e-4
  (as in test_distributed_fsdp.py: AdamW's 1/sqrt(v) amplifies last-bit gradient differences
  of near-zero gradients up to a fraction of lr = 1e-2).
"""

import pytest
import torch

from _training_runs import assert_tensors_equal, assert_tensors_match_gloo, run_on_neuron_and_cpu
from conftest import assert_ok, run_torchrun

RANKS = 4
F32 = dict(rtol=1e-5, atol=1e-5)
ROUND_TRIPS = ("shard0", "shard1", "replicate", "uneven_shard0", "shard0_to_shard1",
               "shard1_to_replicate", "replicate_to_shard0", "partial_to_replicate",
               "partial_to_shard0")


def assert_close_dicts(actual, expected, what, **tol):
    assert actual.keys() == expected.keys(), what
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], **tol,
                                   msg=lambda m: f"{what} {name}: {m}")


@pytest.mark.extended  # 4 ranks and a 2-D mesh (test/README.md)
def test_dtensor_tensor_parallel_and_2d_match_gloo_on_cpu_and_one_device(tmp_path):
    runs = run_on_neuron_and_cpu("tensor_parallel_worker.py", RANKS, tmp_path, "tensor parallel")
    for rank in range(RANKS):
        n, c = runs["neuron"][rank], runs["cpu"][rank]
        me = [f"neuron:{rank}"]

        # DTensor on a (4,) neuron mesh: shards on this rank's NeuronCore, exact round trips.
        d = n["dtensor"]
        assert d["mesh_device_type"] == "neuron"
        assert d["local_devices"] == me, d["local_devices"]
        assert d["round_trips"] == {name: True for name in ROUND_TRIPS}, d["round_trips"]
        assert d["local_shape_shard0"] == (2, 12) and d["local_shape_shard1"] == (8, 3)
        assert d["local_shape_uneven_shard0"] == ((3, 3) if rank < 3 else (1, 3))
        assert d["matmul_placements"] == "(Shard(dim=0),)"
        torch.testing.assert_close(d["matmul"], d["matmul_reference"], **F32)
        assert torch.equal(d["matmul"], c["dtensor"]["matmul"])

        # Colwise/Rowwise MLP: a plain tensor out, the same as the unsharded MLP.
        m, mc = n["mlp"], c["mlp"]
        assert m["out_is_plain_tensor"]
        assert m["weight_placements"] == {"w1.weight": "(Shard(dim=0),)",
                                          "w1.bias": "(Shard(dim=0),)",
                                          "w2.weight": "(Shard(dim=1),)",
                                          "w2.bias": "(Replicate(),)"}, m["weight_placements"]
        assert m["local_devices"] == me and m["fallbacks"] == {}, (m["local_devices"],
                                                                   m["fallbacks"])
        torch.testing.assert_close(m["out"], m["ref_out"], **F32)
        assert_close_dicts(m["grads"], m["ref_grads"], f"mlp rank {rank}", **F32)
        assert_tensors_match_gloo({"out": m["out"], **m["grads"]},
                                  {"out": mc["out"], **mc["grads"]}, RANKS,
                                  f"mlp rank {rank}", **F32)

        # SequenceParallel + loss_parallel: logits sharded over the vocabulary.
        s, sc = n["sp_loss"], c["sp_loss"]
        assert s["logits_placements"] == "(Shard(dim=2),)"
        assert s["local_devices"] == me and s["fallbacks"] == {}, (s["local_devices"],
                                                                   s["fallbacks"])
        torch.testing.assert_close(s["loss"], s["ref_loss"], rtol=1e-5, atol=0)
        torch.testing.assert_close(s["logits"], s["ref_logits"], **F32)
        assert_close_dicts(s["grads"], s["ref_grads"], f"sp_loss rank {rank}", **F32)
        assert_tensors_match_gloo({"loss": s["loss"], "logits": s["logits"], **s["grads"]},
                                  {"loss": sc["loss"], "logits": sc["logits"], **sc["grads"]},
                                  RANKS, f"sp_loss rank {rank}", **F32)

        # 2-D FSDP+TP: TP weights are 2-D DTensors (dp shard, tp shard), the rest dp-sharded;
        # every local shard on this rank's NeuronCore; bit for bit the CPU run.
        f, fc = n["fsdp_tp"], c["fsdp_tp"]
        assert f["mesh"] == ("neuron", ("dp", "tp"), [[0, 1], [2, 3]]), f["mesh"]
        assert f["local_devices"] == me and f["fallbacks"] == {}, (f["local_devices"],
                                                                   f["fallbacks"])
        assert f["placements"]["blocks.0.attn.wo.weight"] == "(Shard(dim=0), Shard(dim=1))"
        assert f["placements"]["blocks.1.mlp.w1.weight"] == \
            "(_StridedShard(dim=0, sf=2), Shard(dim=0))"
        assert f["placements"]["tok.weight"] == "(Shard(dim=0),)"
        assert f["losses"] == fc["losses"], (f["losses"], fc["losses"])
        assert_tensors_equal(f["params"], fc["params"], f"fsdp_tp rank {rank} vs cpu")
        # The two TP ranks of a data-parallel group see the same batch and the same loss.
        assert f["losses"] == runs["neuron"][rank ^ 1]["fsdp_tp"]["losses"]

    # 2-D training vs one process on the full batch: the loss of the full batch is the mean of
    # the two data-parallel groups' losses.
    f = [runs["neuron"][rank]["fsdp_tp"] for rank in range(RANKS)]
    mean = torch.tensor([f[0]["losses"], f[2]["losses"]], dtype=torch.float64).mean(0)
    torch.testing.assert_close(mean, torch.tensor(f[0]["single_losses"], dtype=torch.float64),
                               rtol=1e-5, atol=0)
    assert_close_dicts(f[0]["params"], f[0]["single_params"], "fsdp_tp vs single",
                       rtol=1e-4, atol=1e-4)


def test_compiled_tensor_parallel_llama_layer_matches_eager(tmp_path):
    """The Llama examples' tensor-parallel plan with the decoder layer compiled
    (compiled_tp_worker.py, 2 ranks): loss and every local gradient as eager, with and
    without sequence parallelism. aot_eager runs the same ATen ops as eager mode, in another
    order where it moves views and casts: float32 tolerance, bf16 autocast's rounding (rtol
    1e-2 on gradients, whose matmuls round to bf16)."""
    result = assert_ok(run_torchrun("compiled_tp_worker.py", 2,
                                    ["--device", "neuron", "--out", str(tmp_path)], timeout=150))
    for rank in range(2):
        assert f"compiled tensor parallel ok on rank {rank} (neuron)" in result.stdout
        run = torch.load(tmp_path / f"neuron_rank{rank}.pt")
        for layout in ("tp", "sp"):
            eager, compiled = run[f"eager_{layout}"], run[f"compiled_{layout}"]
            torch.testing.assert_close(compiled["loss"], eager["loss"], rtol=1e-5, atol=0)
            assert compiled["grads"].keys() == eager["grads"].keys()
            for name, grad in eager["grads"].items():
                assert grad.abs().sum() > 0, (layout, name)  # every parameter learns
                torch.testing.assert_close(compiled["grads"][name], grad, rtol=1e-2,
                                           atol=1e-5, msg=lambda m: f"{layout} {name}: {m}")
