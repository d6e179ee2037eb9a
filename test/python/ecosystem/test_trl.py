"""TRL's SFTTrainer on neuron: supervised fine-tuning steps of a tiny causal LM (built from a
config, random weights) with an offline word-level tokenizer and an in-memory dataset give the
same losses and the same trained weights as on the CPU, without CPU fallback. Trainer picks
neuron through the `torch_neuronx` alias (compat/torch_neuronx), as for test_torch_neuronx_compat."""

import pytest
import torch

import torch_neuron

pytest.importorskip(
    "torch_neuronx", reason="install with: pip install --no-build-isolation -e compat/torch_neuronx")
trl = pytest.importorskip("trl", reason="install with scripts/install.sh")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

SPECIAL = ["<pad>", "<eos>", "<unk>"]
WORDS = "the a cat dog sat ran on under mat rug fast slow big small red blue".split()
TEXTS = ["the cat sat on the mat", "a dog ran under the rug", "the big red cat ran fast",
         "a small blue dog sat slow", "the dog sat on a big mat", "a cat ran under the red rug",
         "the small cat sat", "a big blue dog ran on the mat"]


@pytest.fixture(scope="module")
def tokenizer():
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                                                eos_token="<eos>", unk_token="<unk>")


def sft(tmp_path, tokenizer, use_cpu, peft_config=None, **config):
    """Two SFT steps from the same seed; returns the trainer, the logged losses and the ops that
    fell back to the CPU during training."""
    model_config = transformers.LlamaConfig(
        vocab_size=len(SPECIAL) + len(WORDS), hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=32, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(model_config)
    args = trl.SFTConfig(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "neuron")), use_cpu=use_cpu, seed=0,
        per_device_train_batch_size=4, max_steps=2, learning_rate=1e-3, max_length=16,
        logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True,
        **config)
    trainer = trl.SFTTrainer(model=model, args=args, processing_class=tokenizer,
                             train_dataset=datasets.Dataset.from_dict({"text": TEXTS}),
                             peft_config=peft_config)
    torch_neuron.clear_op_tracking()
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    return trainer, losses, torch_neuron.get_fallback_ops()


def trainable(trainer):
    return {name: p.detach().cpu() for name, p in trainer.model.named_parameters()
            if p.requires_grad}


def test_sft_steps_match_cpu(tmp_path, tokenizer):
    # The same padding on both devices (see the next test) makes the batches identical, and
    # neuron runs the CPU's kernels, so losses and weights agree bit for bit.
    neuron, got, fallback = sft(tmp_path, tokenizer, use_cpu=False, pad_to_multiple_of=16)
    assert neuron.args.device.type == "neuron"
    assert next(neuron.model.parameters()).device.type == "neuron"
    assert fallback == {}
    cpu, want, _ = sft(tmp_path, tokenizer, use_cpu=True, pad_to_multiple_of=16)
    assert len(got) == 2 and got == want
    for name, value in trainable(cpu).items():
        assert torch.equal(trainable(neuron)[name], value), name


def test_sft_pads_to_128_on_neuron_like_torchneuron(tmp_path, tokenizer):
    # SFTConfig's default pad_to_multiple_of="auto" pads batches to a multiple of 128 on a
    # neuron device (TorchNeuron compiles once per shape) and not on the CPU; the extra masked
    # positions change summation orders only.
    neuron, got, fallback = sft(tmp_path, tokenizer, use_cpu=False)
    assert neuron.args.pad_to_multiple_of == 128
    assert fallback == {}
    cpu, want, _ = sft(tmp_path, tokenizer, use_cpu=True)
    assert cpu.args.pad_to_multiple_of is None
    assert got == pytest.approx(want, rel=1e-4)


def test_sft_lora_matches_cpu(tmp_path, tokenizer):
    peft = pytest.importorskip("peft", reason="install with scripts/install.sh")
    lora = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    neuron, got, fallback = sft(tmp_path, tokenizer, use_cpu=False, pad_to_multiple_of=16,
                                peft_config=peft.LoraConfig(**lora))
    assert fallback == {}
    cpu, want, _ = sft(tmp_path, tokenizer, use_cpu=True, pad_to_multiple_of=16,
                       peft_config=peft.LoraConfig(**lora))
    assert got == want
    trained = trainable(neuron)
    assert trained and all("lora_" in name for name in trained)
    assert any(value.abs().sum() > 0 for name, value in trained.items() if "lora_B" in name)
    for name, value in trainable(cpu).items():
        assert torch.equal(trained[name], value), name
