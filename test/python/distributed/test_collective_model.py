"""The collective cost model through the public API, without starting ranks
(torch_neuron.distributed.predict_collective, what the fidelity suite uses for nccom-test rows),
against hand computations from documented hardware facts (Note [Collective latency], Note
[NeuronLink topology], Note [Collective DMA share])."""

import pytest

import torch_neuron  # noqa: F401
from torch_neuron import _C
from torch_neuron.distributed import predict_collective

# Written out again from the documents, so the model is checked against them.
DMA_START_NS = 1300.0     # NKI DMA bandwidth guide: "~1300 ns cross-engine" semaphore-to-start
FIXED_NS = 2 * DMA_START_NS  # trigger the collective core, wait for its completion
STEP_NS = DMA_START_NS    # one DMA per algorithm step within an instance
EFA_STEP_NS = 15000.0     # neuron-runtime/about/collectives.rst: 15 us HBM to HBM across servers
TRN1_LINK_DIR = 384 / 4 / 2   # GB/s: NeuronLink-v2 per chip over 4 links, both directions
TRN2_LINK_DIR = 1024 / 4 / 2  # GB/s: NeuronLink-v3 per chip over 4 links, both directions


@pytest.mark.parametrize("instance,ranks", [("trn1.32xlarge", 2), ("trn1.32xlarge", 32),
                                            ("trn2.48xlarge", 64), ("trn2.3xlarge", 4)])
def test_small_all_reduce_is_the_documented_latency_sum(instance, ranks):
    # Single-step Mesh: one step, plus the fixed latency; 8 bytes add a few ns.
    c = predict_collective("all_reduce", 8, ranks, instance)
    assert c["algorithm"] == "single-step mesh" and c["steps"] == 1
    assert c["latency_ns"] == FIXED_NS + STEP_NS == 3900.0
    assert FIXED_NS + STEP_NS <= c["duration_ns"] <= FIXED_NS + STEP_NS + 10


def test_latency_between_instances_is_efa_steps():
    c = predict_collective("all_reduce", 8, 2, "trn2.48xlarge", ranks_per_node=1)
    assert c["link"] == "EFA"
    assert c["latency_ns"] == FIXED_NS + EFA_STEP_NS


def test_ring_latency_counts_its_steps():
    # 1 GiB over 16 chips of a trn2.48xlarge, one rank per chip: a ring, 2 x 15 steps.
    places = [(0, chip) for chip in range(16)]
    c = _C._collective_cost("all_reduce", 1 << 30, places, "trn2.48xlarge")
    assert c["algorithm"] == "ring" and c["steps"] == 30
    assert c["latency_ns"] == FIXED_NS + 30 * STEP_NS


@pytest.mark.parametrize("instance,ranks,reduce_gbps,forward_gbps", [
    # Every core of the instance: a chip's ranks share its HBM (820 GB/s on Trainium1, 2.9 TB/s
    # on Trainium2) at 3 touches per reduced byte and 2 per forwarded byte; the ring runs on the
    # torus's 4 link directions per chip; a core's DMA engines move 272 / 736 GB/s.
    ("trn1.32xlarge", 32, 820 / 2 / 3, min(4 * TRN1_LINK_DIR, 820 / 2 / 2, 272)),
    ("trn2.48xlarge", 64, 2900 / 4 / 3, min(4 * TRN2_LINK_DIR, 2900 / 4 / 2, 736)),
])
def test_large_all_reduce_approaches_the_hand_computed_bound(instance, ranks, reduce_gbps,
                                                             forward_gbps):
    bound = 2 / (1 / reduce_gbps + 1 / forward_gbps)
    c = predict_collective("all_reduce", 4 << 30, ranks, instance)
    assert c["algorithm"] == "ring"
    assert 0.97 * bound <= c["busbw_gbps"] <= bound * (1 + 1e-9)


def test_one_rank_per_chip_runs_at_the_link_rate():
    # 16 chips of a trn2.48xlarge: 4 link directions of 128 GB/s out of each chip, half the
    # 1,024 GB/s per-chip figure (not all of it in one ring direction).
    places = [(0, chip) for chip in range(16)]
    c = _C._collective_cost("all_gather", 4 << 30, places, "trn2.48xlarge")
    assert c["link_gbps"] == pytest.approx(4 * TRN2_LINK_DIR)
    assert c["busbw_gbps"] >= 0.97 * 4 * TRN2_LINK_DIR
    # Two neighbouring Trainium1 chips share one link: 48 GB/s each way.
    pair = _C._collective_cost("send_recv", 1 << 30, [(0, 0), (0, 1)], "trn1.32xlarge")
    assert pair["duration_ns"] == pytest.approx(FIXED_NS + STEP_NS + (1 << 30) / TRN1_LINK_DIR)


def test_links_follow_the_instance_topology():
    assert predict_collective("all_reduce", 1 << 20, 2, "trn1.32xlarge")["link"] == "on-chip"
    assert predict_collective("all_reduce", 1 << 20, 32, "trn1.32xlarge")["link"] == "NeuronLink"
    assert predict_collective("all_reduce", 1 << 20, 128, "trn2.48xlarge")["link"] == "EFA"
    # Four trn2u.48xlarge of an UltraServer reach each other over NeuronLink, not EFA.
    ultra = predict_collective("all_reduce", 1 << 20, 256, "trn2u.48xlarge")
    assert ultra["link"] == "UltraServer NeuronLink"
    assert ultra["duration_ns"] < predict_collective("all_reduce", 1 << 20, 256,
                                                     "trn2.48xlarge")["duration_ns"]


def test_dma_share_is_the_bytes_over_the_cores_dma_engines():
    # 2 ranks: each sends the whole buffer; a Trainium1 core's 16 DMA engines at 17 B/ns.
    c = predict_collective("all_reduce", 64 << 20, 2, "trn1.32xlarge")
    assert c["dma_bytes"] == 64 << 20
    assert c["dma_ns"] == pytest.approx((64 << 20) / (16 * 17.0))


def test_bad_placement_is_a_clear_error():
    with pytest.raises(ValueError, match="ranks_per_node"):
        predict_collective("all_reduce", 8, 4, "trn1.32xlarge", ranks_per_node=33)
    with pytest.raises(ValueError, match="unknown collective"):
        predict_collective("allreduce", 8, 4, "trn1.32xlarge")
    with pytest.raises(RuntimeError, match="valid names"):
        predict_collective("all_reduce", 8, 4, "trn9.huge")


def test_neuron_2_18_algorithms_follow_its_release_notes(monkeypatch):
    # Note [Collective algorithms by release]: Ring for 32 ranks; all-reduce's all-to-all
    # pattern (Mesh, 2 phases of 2 steps with 2 ranks per chip) on 16 ranks on cores 0-15.
    monkeypatch.setenv("TORCH_NEURON_COLLECTIVE_ALGORITHMS", "neuron-2.18")
    tp32 = predict_collective("all_reduce", 8192, 32, "trn1.32xlarge")
    assert tp32["algorithm"] == "ring" and tp32["steps"] == 62
    assert tp32["latency_ns"] == FIXED_NS + 62 * STEP_NS
    tp16 = predict_collective("all_reduce", 8192, 16, "trn1.32xlarge")
    assert tp16["algorithm"] == "mesh" and tp16["steps"] == 4
    assert predict_collective("all_gather", 8192, 16, "trn1.32xlarge")["algorithm"] == "ring"
    # An explicit choice wins over the setting; a bad name says which ones exist.
    now = _C._collective_cost("all_reduce", 8192, [(0, c // 2) for c in range(32)],
                              "trn1.32xlarge", algorithms="current")
    assert now["algorithm"] != "ring" and now["duration_ns"] < tp32["duration_ns"] / 5
    with pytest.raises(RuntimeError, match="neuron-2.18"):
        _C._collective_cost("all_reduce", 8192, [(0, 0), (0, 0)], "trn1.32xlarge",
                            algorithms="2.18")
    monkeypatch.setenv("TORCH_NEURON_COLLECTIVE_ALGORITHMS", "2.18")
    with pytest.raises(RuntimeError, match="TORCH_NEURON_COLLECTIVE_ALGORITHMS"):
        predict_collective("all_reduce", 8192, 32, "trn1.32xlarge")
