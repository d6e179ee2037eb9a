"""Ranks and NeuronCores: rank i runs on neuron:LOCAL_RANK of its simulated instance; several
instances on one machine (torchrun --nnodes) talk over EFA; too many ranks, or two ranks on
one core, are clear errors."""

import json

from conftest import assert_ok, run_ranks, run_torchrun


def rank_reports(stdout):
    return sorted((json.loads(line) for line in stdout.splitlines() if line.startswith("{")),
                  key=lambda r: r["rank"])


def test_ranks_of_one_chip_talk_on_chip():
    result = assert_ok(run_torchrun("placement_worker.py", 2))
    reports = rank_reports(result.stdout)
    assert [r["device"] for r in reports] == [0, 1]
    assert all(r["places"] == [[0, 0], [0, 0]] for r in reports)
    assert all(r["charged"]["link"] == "on-chip" for r in reports)


def test_ranks_on_different_chips_use_neuronlink():
    # trn2.48xlarge has 4 logical cores per chip: with NEURON_RT_VISIBLE_CORES=0,4, neuron:0
    # is core 0 on chip 0 and neuron:1 is core 4 on chip 1.
    result = assert_ok(run_torchrun("placement_worker.py", 2, env={
        "TORCH_NEURON_INSTANCE": "trn2.48xlarge", "NEURON_RT_VISIBLE_CORES": "0,4"}))
    reports = rank_reports(result.stdout)
    assert reports[0]["places"] == [[0, 0], [0, 1]]
    assert all(r["charged"]["link"] == "NeuronLink" for r in reports)


def test_two_simulated_instances_talk_over_efa():
    result = assert_ok(run_torchrun("placement_worker.py", 2, nnodes=2,
                                    env={"TORCH_NEURON_INSTANCE": "trn2.48xlarge"}))
    reports = rank_reports(result.stdout)
    assert len(reports) == 4
    assert reports[0]["places"] == [[0, 0], [0, 0], [1, 0], [1, 0]]
    for r in reports:
        assert r["charged"]["link"] == "EFA" and r["charged"]["algorithm"].startswith("hierarchical")
        assert r["model"]["link"] == "EFA"
    # The same devices (neuron:0 and neuron:1) on each instance: cores are per instance.
    assert [r["device"] for r in reports] == [0, 1, 0, 1]


def test_more_ranks_than_neuroncores_is_a_clear_error():
    results = run_ranks("placement_worker.py", 3, env={"TORCH_NEURON_INSTANCE": "trn1.2xlarge"})
    for result in results:
        assert result.returncode != 0
        assert "rank 2 has no NeuronCore" in result.stderr, result.stderr
        assert "trn1.2xlarge" in result.stderr and "--nproc-per-node 2" in result.stderr


def test_two_ranks_on_one_neuroncore_is_a_clear_error():
    results = run_ranks("placement_worker.py", 2, env={"LOCAL_RANK": "0"})
    for result in results:
        assert result.returncode != 0
        assert "ranks 0 and 1 both claim NeuronCore 0" in result.stderr, result.stderr
