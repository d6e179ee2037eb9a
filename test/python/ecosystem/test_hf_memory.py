"""A Hugging Face model too large for one simulated NeuronCore: each process may use only part
of a core's HBM (torch.neuron.set_per_process_memory_fraction, as on CUDA), so one device raises
torch.OutOfMemoryError, while device_map="auto" spreads the model over the instance's cores
(inference) and FSDP2 shards it over ranks (training); both give the CPU's results, and the
report of `python -m torch_neuron run` shows each rank's peak HBM."""

import gc
import json
import os
import subprocess
import sys

import pytest
import torch

import torch_neuron
from conftest import DISTRIBUTED_DIR, loopback_env, rank_rows, run_process_group

transformers = pytest.importorskip("transformers", reason="install with scripts/install.sh")
sys.path.insert(0, DISTRIBUTED_DIR)
from hf_memory_worker import build_model  # noqa: E402

WORKER = os.path.join(DISTRIBUTED_DIR, "hf_memory_worker.py")
REPORT = "torch_neuron report"


@pytest.fixture
def whole_hbm_after():
    yield
    gc.collect()
    for i in range(torch.neuron.device_count()):
        torch.neuron.set_per_process_memory_fraction(1.0, i)
    torch.neuron.empty_cache()


def test_device_map_auto_spreads_a_model_too_big_for_one_core(tmp_path, whole_hbm_after):
    cpu_model = build_model().eval()
    cpu_model.save_pretrained(tmp_path)
    model_bytes = sum(p.numel() * p.element_size() for p in cpu_model.parameters())
    # Each core may hold half the model on top of what earlier tests of this process left on it.
    gc.collect()
    torch.neuron.empty_cache()
    count = torch.neuron.device_count()
    limits = {i: torch.neuron.memory_reserved(i) + model_bytes // 2 for i in range(count)}
    for i in range(count):
        torch.neuron.set_per_process_memory_fraction(limits[i] / torch.neuron.mem_get_info(i)[1], i)
        torch.neuron.reset_peak_memory_stats(i)

    oom = None
    try:
        transformers.LlamaForCausalLM.from_pretrained(tmp_path, device_map="neuron:0")
    except torch.OutOfMemoryError as e:
        oom = str(e)  # not the exception: its traceback would keep the loaded half alive
    assert oom is not None and "set_per_process_memory_fraction" in oom
    gc.collect()
    torch.neuron.empty_cache()

    # As on CUDA, mem_get_info reports the whole device, so device_map="auto" is told the limit.
    max_memory = {i: model_bytes // 2 for i in range(count)}
    model = transformers.LlamaForCausalLM.from_pretrained(tmp_path, device_map="auto",
                                                          max_memory=max_memory)
    used = {p.device for p in model.parameters()}
    assert len(used) >= 3 and all(d.type == "neuron" for d in used), model.hf_device_map

    ids = torch.randint(0, 1024, (2, 8), generator=torch.Generator().manual_seed(3))
    want = cpu_model.generate(ids, max_new_tokens=8, do_sample=False)
    torch_neuron.clear_op_tracking()
    got = model.generate(ids.to("neuron"), max_new_tokens=8, do_sample=False)
    assert torch.equal(got.cpu(), want)
    assert torch_neuron.get_fallback_ops() == {}
    for d in used:
        assert torch.neuron.max_memory_reserved(d) <= limits[d.index]


@pytest.mark.whole_machine
@pytest.mark.extended  # a 2-rank launch with transformers: 24 s (test/README.md)
def test_fsdp2_trains_a_model_no_single_core_can_hold(tmp_path):
    # At 4 model sizes per process, one device cannot hold weights, gradients and AdamW's two
    # moments; sharded over two ranks each holds half of each.
    limit = ["--limit-in-model-sizes", "4", "--out", str(tmp_path)]
    single = subprocess.run([sys.executable, WORKER, "--mode", "single", *limit],
                            env=loopback_env(), capture_output=True, text=True, timeout=120)
    assert single.returncode == 0, single.stderr
    alone = json.loads((tmp_path / "single_rank0.json").read_text())
    assert "set_per_process_memory_fraction" in alone.get("oom", ""), alone

    result = run_process_group([sys.executable, "-m", "torch_neuron", "run", "--nproc-per-node",
                                "2", WORKER, "--mode", "fsdp", *limit], timeout=180)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    ranks = [json.loads((tmp_path / f"fsdp_rank{r}.json").read_text()) for r in (0, 1)]
    for r, rank in enumerate(ranks):
        assert "oom" not in rank, rank["oom"]
        assert rank["device"] == f"neuron:{r}" and rank["fallback_ops"] == {}
        assert rank["local_param_bytes"] <= rank["param_bytes"] // 2 + 4096  # really sharded
        assert rank["peak_reserved"] <= rank["limit"]
    # Each rank's loss is over its half of the batch: their mean is the whole batch's loss.
    got = [(a + b) / 2 for a, b in zip(ranks[0]["losses"], ranks[1]["losses"])]
    assert got == pytest.approx(ranks[0]["cpu_losses"], rel=1e-4, abs=1e-4)

    report = result.stdout[result.stdout.index(REPORT):]
    rows = rank_rows(report)
    for r, rank in enumerate(ranks):
        peak_mib = float(rows[r][7])  # device, node, span, compute, comm, exposed, MFU, peak HBM
        assert peak_mib == pytest.approx(rank["peak_allocated"] / 2**20, abs=0.05)
        assert peak_mib * 2**20 <= rank["limit"]
