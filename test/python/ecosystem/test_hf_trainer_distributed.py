"""Hugging Face training on several neuron ranks: transformers' Trainer (DDP; FSDP2 with
"full_shard", and with "shard_grad_op" and gradient accumulation), TRL's SFTTrainer with a LoRA
adapter (DDP and FSDP2), and a PEFT LoRA model sharded with FSDP2 under Trainer. Each is
launched with torchrun on 2 ranks (neuron:0 and neuron:1, c10d backend "neuron", chosen by
accelerate through the `torch_neuronx` alias) and compared with the same script launched on the
CPU (TrainingArguments(use_cpu=True): accelerate's MULTI_CPU, DDP over Gloo, torch_neuron never
imported). accelerate refuses FSDP on the CPU (a MULTI_CPU state never becomes
DistributedType.FSDP), so the FSDP2 cases are compared with the CPU's DDP run of the same model
and data: the same math (each rank steps with the mean gradient of the global batch), other
collectives. Every case also runs without CPU fallback on neuron.

One launch per device runs all cases (test/python/distributed/workers/hf_trainer_worker.py); each test
checks one case of what the ranks saved.
"""

import importlib.util

import pytest
import torch

from conftest import assert_ok, run_torchrun

# Looked up, not imported: only the ranks need these (importing them here costs seconds).
if importlib.util.find_spec("torch_neuronx") is None:
    pytest.skip("install with: pip install --no-build-isolation -e compat/torch_neuronx",
                allow_module_level=True)
for _module in ("accelerate", "transformers", "trl", "peft", "datasets", "tokenizers"):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_module} missing: install with scripts/install.sh", allow_module_level=True)

# Two 2-rank launches with the Hugging Face training stack, about 27 s (test/README.md).
pytestmark = [pytest.mark.extended, pytest.mark.whole_machine]

RANKS = 2
CASES = ("trainer_ddp", "trainer_fsdp2", "trainer_fsdp2_accum", "sft_lora_ddp", "lora_fsdp2",
         "sft_lora_fsdp2")
# The CPU run is stock PyTorch: torch does not autoload torch_neuron (and the worker hides
# torch_neuronx from accelerate and transformers).
CPU_ENV = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{"neuron": [rank results], "cpu": [rank results]}: one torchrun launch per device."""
    out = tmp_path_factory.mktemp("hf_trainer")
    results = {}
    for device in ("neuron", "cpu"):
        result = assert_ok(run_torchrun(
            "hf_trainer_worker.py", RANKS, ["--device", device, "--out", str(out),
                                            "--cases", ",".join(CASES)],
            env=CPU_ENV if device == "cpu" else None, timeout=150))
        for rank in range(RANKS):
            assert f"hf_trainer ok on rank {rank} ({device})" in result.stdout, result.stdout
        results[device] = [torch.load(out / f"{device}_rank{rank}.pt") for rank in range(RANKS)]
    assert all(r["torch_neuron_loaded"] for r in results["neuron"])
    assert not any(r["torch_neuron_loaded"] for r in results["cpu"])
    return results


def case_results(runs, case):
    """(neuron rank results, cpu rank results) of one case; a case that raised fails here with
    the rank's traceback."""
    got = {}
    for device in ("neuron", "cpu"):
        got[device] = [ranks[case] for ranks in runs[device]]
        for rank, result in enumerate(got[device]):
            assert "error" not in result, f"{case} on {device} rank {rank}:\n{result['error']}"
    return got["neuron"], got["cpu"]


def assert_matches_cpu(neuron, cpu, steps=3):
    """Per-step losses and gradient norms (Trainer logs the mean over ranks, so every rank has
    the same) and the trained parameters of every rank equal the CPU run's within float32
    tolerance, and training moved the loss."""
    want = cpu[0]
    assert len(want["losses"]) == steps and len(set(want["losses"])) > 1
    for rank, result in enumerate(neuron + cpu):
        assert result["losses"] == pytest.approx(want["losses"], rel=1e-5), rank
        assert result["grad_norms"] == pytest.approx(want["grad_norms"], rel=1e-4), rank
        for kind in ("trainable", "frozen"):
            assert result[kind].keys() == want[kind].keys(), (rank, kind)
            for name, value in want[kind].items():
                torch.testing.assert_close(result[kind][name], value, rtol=1e-4, atol=1e-6,
                                           msg=lambda m: f"rank {rank} {name}: {m}")


def assert_on_neuron_ranks(neuron, distributed_type):
    for rank, result in enumerate(neuron):
        assert result["world"] == RANKS and result["backend"] == "neuron"
        assert result["args_device"] == result["accelerator_device"] == f"neuron:{rank}"
        assert result["param_devices"] == [f"neuron:{rank}"]
        assert result["distributed_type"] == f"DistributedType.{distributed_type}"
        assert result["fallback"] == {}, f"rank {rank} fell back to the CPU"


def assert_ddp_on_cpu(cpu):
    for result in cpu:
        assert result["wrapper"] == "DistributedDataParallel"
        assert result["distributed_type"] == "DistributedType.MULTI_CPU"
        assert result["backend"] == "gloo" and result["param_devices"] == ["cpu"]


def assert_ddp(neuron):
    for result in neuron:
        assert result["wrapper"] == "DistributedDataParallel"
        assert result["fsdp_version"] is None and result["fsdp2_modules"] == []
        assert result["placements"] == [None]  # plain tensors, replicated by DDP


def assert_fsdp2(neuron, reshard_after_forward=True):
    for result in neuron:
        assert result["fsdp_version"] == 2
        assert result["reshard_after_forward"] is reshard_after_forward
        # fully_shard on each decoder layer (transformer_layer_cls_to_wrap) and on the root
        assert result["fsdp2_modules"].count("FSDPLlamaDecoderLayer") == 2
        # every parameter a DTensor sharded on dim 0 (Shard(0)) over a 1-D neuron mesh of
        # both ranks
        assert result["placements"] == [("neuron", (RANKS,), ("S(0)",))]


def assert_only_lora_trains(neuron, cpu):
    for result in neuron + cpu:
        assert result["trainable"] and all("lora_" in name for name in result["trainable"])
        assert result["frozen"] and not any("lora_" in name for name in result["frozen"])
        # lora_B starts at zero: it moved
        assert any(value.abs().sum() > 0 for name, value in result["trainable"].items()
                   if "lora_B" in name)


def test_trainer_ddp_matches_cpu_gloo(runs):
    neuron, cpu = case_results(runs, "trainer_ddp")
    assert_on_neuron_ranks(neuron, "MULTI_NEURON")
    assert_ddp(neuron)
    assert_ddp_on_cpu(cpu)
    assert_matches_cpu(neuron, cpu)
    assert not neuron[0]["frozen"]


def test_trainer_fsdp2_matches_cpu_gloo_ddp(runs):
    neuron, cpu = case_results(runs, "trainer_fsdp2")
    assert_on_neuron_ranks(neuron, "FSDP")
    assert_fsdp2(neuron)
    assert "FSDPLlamaForCausalLM" in neuron[0]["fsdp2_modules"]  # the root
    assert_ddp_on_cpu(cpu)
    assert_matches_cpu(neuron, cpu)
    # Same model, data and seeds as trainer_ddp: FSDP2 on neuron and DDP on neuron agree too.
    ddp, _ = case_results(runs, "trainer_ddp")
    assert neuron[0]["losses"] == pytest.approx(ddp[0]["losses"], rel=1e-5)


def test_trainer_fsdp2_shard_grad_op_accumulation_matches_cpu_gloo_ddp(runs):
    # fsdp="shard_grad_op" (FSDP2 without resharding after forward), 2 micro-batches a step:
    # accelerate skips the gradient reduce-scatter of the first (no_sync), as DDP's all-reduce
    neuron, cpu = case_results(runs, "trainer_fsdp2_accum")
    assert_on_neuron_ranks(neuron, "FSDP")
    assert_fsdp2(neuron, reshard_after_forward=False)
    assert_ddp_on_cpu(cpu)
    assert all(result["accumulation"] == 2 for result in neuron + cpu)
    assert_matches_cpu(neuron, cpu)


def test_sft_trainer_lora_ddp_matches_cpu_gloo(runs):
    # SFTConfig's defaults: bf16 autocast (accelerate's, on neuron as on the CPU), gradient
    # checkpointing
    neuron, cpu = case_results(runs, "sft_lora_ddp")
    assert_on_neuron_ranks(neuron, "MULTI_NEURON")
    assert_ddp(neuron)
    assert_ddp_on_cpu(cpu)
    assert all(result["mixed_precision"] == "bf16" for result in neuron + cpu)
    assert_matches_cpu(neuron, cpu)
    assert_only_lora_trains(neuron, cpu)


def test_peft_lora_fsdp2_matches_cpu_gloo_ddp(runs):
    neuron, cpu = case_results(runs, "lora_fsdp2")
    assert_on_neuron_ranks(neuron, "FSDP")
    assert_fsdp2(neuron)
    assert "FSDPPeftModelForCausalLM" in neuron[0]["fsdp2_modules"]  # the root
    assert_ddp_on_cpu(cpu)
    assert_matches_cpu(neuron, cpu)
    assert_only_lora_trains(neuron, cpu)


def test_sft_trainer_lora_fsdp2_matches_cpu_gloo_ddp(runs):
    # float32 (bf16=False): with bf16, accelerate's FSDP2 adds MixedPrecisionPolicy(param_dtype=
    # bfloat16), which rounds otherwise than the CPU run's DDP under autocast.
    neuron, cpu = case_results(runs, "sft_lora_fsdp2")
    assert_on_neuron_ranks(neuron, "FSDP")
    assert_fsdp2(neuron)
    assert "FSDPPeftModelForCausalLM" in neuron[0]["fsdp2_modules"]  # the root
    assert_ddp_on_cpu(cpu)
    assert all(result["mixed_precision"] == "no" for result in neuron + cpu)
    assert_matches_cpu(neuron, cpu)
    assert_only_lora_trains(neuron, cpu)
