"""The opt-in `torch_neuronx` alias (compat/torch_neuronx): accelerate and transformers' Trainer
select neuron:0 unchanged, and TorchNeuron's functions are there."""

import pytest
import torch

torch_neuronx = pytest.importorskip(
    "torch_neuronx", reason="install with: pip install --no-build-isolation -e compat/torch_neuronx")
accelerate = pytest.importorskip("accelerate")
transformers = pytest.importorskip("transformers")


def test_torchneuron_functions_are_aliased():
    import torch_neuron

    for name in ("get_fallback_ops", "get_executed_ops", "clear_op_tracking",
                 "set_fallback_error"):
        assert getattr(torch_neuronx, name) is getattr(torch_neuron, name)


def test_accelerator_selects_neuron_and_trains():
    acc = accelerate.Accelerator()
    assert acc.device.type == "neuron"
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = acc.prepare(model, opt)
    assert next(model.parameters()).device.type == "neuron"
    before = model.weight.detach().cpu().clone()
    acc.backward(model(torch.randn(3, 4, device=acc.device)).sum())
    opt.step()
    assert not torch.equal(model.weight.detach().cpu(), before)


def tiny_trainer(tmp_path, use_cpu, **training_args):
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 128, (16,), generator=g),
             "labels": torch.randint(0, 128, (16,), generator=g)} for _ in range(8)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")), per_device_train_batch_size=4,
        max_steps=3, report_to=[], save_strategy="no", use_cpu=use_cpu, seed=0,
        **training_args)
    return transformers.Trainer(model=model, args=args, train_dataset=data)


def test_trainer_runs_on_neuron_like_cpu(tmp_path):
    neuron = tiny_trainer(tmp_path, use_cpu=False)
    assert neuron.args.device.type == "neuron"
    torch_neuronx.clear_op_tracking()
    got = neuron.train().training_loss
    assert next(neuron.model.parameters()).device.type == "neuron"
    assert torch_neuronx.get_fallback_ops() == {}
    want = tiny_trainer(tmp_path, use_cpu=True).train().training_loss
    assert got == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("training_args", [
    {"bf16": True},  # accelerate's autocast on the neuron device
    {"gradient_accumulation_steps": 2, "gradient_checkpointing": True, "max_grad_norm": 0.5,
     "optim": "adamw_torch_fused", "lr_scheduler_type": "cosine", "warmup_steps": 1},
], ids=["bf16", "accumulation_checkpointing_fused_adamw"])
def test_trainer_options_run_on_neuron_like_cpu(tmp_path, training_args):
    neuron = tiny_trainer(tmp_path, use_cpu=False, **training_args)
    torch_neuronx.clear_op_tracking()
    got = neuron.train().training_loss
    assert torch_neuronx.get_fallback_ops() == {}
    if training_args.get("bf16"):
        assert neuron.accelerator.mixed_precision == "bf16"
    want = tiny_trainer(tmp_path, use_cpu=True, **training_args).train().training_loss
    assert got == pytest.approx(want, rel=1e-4)
