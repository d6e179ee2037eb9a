"""Hugging Face transformers on neuron: a tiny causal LM built from a config (random weights,
nothing downloaded) loads with device_map="neuron" and generates the same greedy tokens as on
the CPU, with the dynamic and the static cache, without CPU fallback."""

import pytest
import torch

import torch_neuron

transformers = pytest.importorskip("transformers", reason="install with scripts/install.sh")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(path)
    return model, path


@pytest.mark.parametrize("cache", [None, "static"])
def test_greedy_generation_matches_cpu(tiny_llama, cache):
    cpu_model, path = tiny_llama
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    kwargs = {"max_new_tokens": 8, "do_sample": False}
    if cache:
        kwargs["cache_implementation"] = cache
    want = cpu_model.generate(ids, **kwargs)
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="neuron")
    assert next(model.parameters()).device.type == "neuron"
    torch_neuron.clear_op_tracking()
    got = model.generate(ids.to("neuron"), **kwargs)
    assert torch.equal(got.cpu(), want)
    assert torch_neuron.get_fallback_ops() == {}


def test_device_map_auto_spreads_layers_over_neuron_devices(tiny_llama):
    # As on a multi-GPU machine, accelerate balances the layers over the visible devices; its
    # hooks move activations between them, and generation still matches the CPU.
    cpu_model, path = tiny_llama
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(3))
    want = cpu_model.generate(ids, max_new_tokens=8, do_sample=False)
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="auto")
    devices = {p.device for p in model.parameters()}
    assert all(d.type == "neuron" for d in devices)
    assert len(devices) == 1 or torch.neuron.device_count() > 1, model.hf_device_map
    assert len(devices) > 1 or torch.neuron.device_count() == 1, model.hf_device_map
    torch_neuron.clear_op_tracking()
    got = model.generate(ids.to("neuron"), max_new_tokens=8, do_sample=False)
    assert torch.equal(got.cpu(), want)
    assert torch_neuron.get_fallback_ops() == {}


def test_forward_logits_match_cpu(tiny_llama):
    cpu_model, _ = tiny_llama
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(2))
    want = cpu_model(ids).logits
    model = transformers.LlamaForCausalLM.from_pretrained(tiny_llama[1]).to("neuron")
    got = model(ids.to("neuron")).logits
    torch.testing.assert_close(got.cpu(), want)


def test_beam_search_matches_cpu(tiny_llama):
    cpu_model, path = tiny_llama
    ids = torch.randint(0, 128, (1, 6), generator=torch.Generator().manual_seed(3))
    kwargs = {"max_new_tokens": 6, "do_sample": False, "num_beams": 3}
    want = cpu_model.generate(ids, **kwargs)
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="neuron")
    got = model.generate(ids.to("neuron"), **kwargs)
    assert torch.equal(got.cpu(), want)


def test_sampling_is_reproducible_per_seed(tiny_llama):
    # Sampling draws from the neuron generator, a Philox stream of its own (Note [Philox
    # generator]), not the CPU's: the same seed gives the same tokens, as on CUDA.
    _, path = tiny_llama
    ids = torch.randint(0, 128, (4, 6), generator=torch.Generator().manual_seed(3))
    kwargs = {"max_new_tokens": 6, "do_sample": True, "top_k": 20}
    model = transformers.LlamaForCausalLM.from_pretrained(path, device_map="neuron")
    runs = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        runs.append(model.generate(ids.to("neuron"), **kwargs).cpu())
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])  # 24 tokens from the top 20: equal by chance ~never
    assert torch.equal(runs[0][:, :6], ids) and ((runs[0] >= 0) & (runs[0] < 128)).all()


def test_peft_lora_fine_tuning_step_matches_cpu(tiny_llama):
    peft = pytest.importorskip("peft", reason="install with scripts/install.sh")
    _, path = tiny_llama
    ids = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(4))
    losses = {}
    for device in ("cpu", "neuron"):
        torch.manual_seed(0)
        base = transformers.LlamaForCausalLM.from_pretrained(path)
        config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        model = peft.get_peft_model(base, config).to(device)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        torch_neuron.clear_op_tracking()
        for _ in range(3):
            loss = model(input_ids=ids.to(device), labels=ids.to(device)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[device] = loss.item()
        if device == "neuron":
            assert torch_neuron.get_fallback_ops() == {}
    assert losses["neuron"] == pytest.approx(losses["cpu"], rel=1e-5)
