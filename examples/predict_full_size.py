"""Plans full-size training steps on a laptop: predict-only mode (TORCH_NEURON_EXECUTE=0, set
here with torch_neuron.set_execute(False)) times every op of a forward and backward pass and
allocates its HBM exactly, but computes nothing, so these take seconds and little RAM.

    python examples/predict_full_size.py [--instance trn1.2xlarge]
"""

import argparse
import os
import resource
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--instance", default="trn2.3xlarge")
args = parser.parse_args()
os.environ["TORCH_NEURON_INSTANCE"] = args.instance  # before the first device use

import torch  # noqa: E402
import transformers  # noqa: E402

import torch_neuron  # noqa: E402

torch_neuron.set_execute(False)


def step_ms(model, batch: dict, autocast: bool) -> float:
    """Predicted time of one forward and backward (after a first one), in ms."""
    def step():
        with torch.autocast("neuron", dtype=torch.bfloat16, enabled=autocast):
            loss = model(**batch).loss
        loss.backward()

    step()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def report(name: str, model, batch: dict, autocast: bool) -> None:
    torch.neuron.reset_peak_memory_stats()
    ms = step_ms(model, batch, autocast)
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {params / 1e6:.0f}M parameters, forward+backward {ms:.1f} ms, "
          f"peak HBM {torch.neuron.max_memory_allocated() / 2**30:.2f} GiB")


def tokens(batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), device="neuron")


host_start = time.time()
print(f"predicted on {args.instance}, one NeuronCore")

# BERT-Large pre-training (masked LM + next sentence), batch 16 x 128 tokens, bf16 autocast.
bert = transformers.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                               intermediate_size=4096)
with torch.device("neuron"):
    model = transformers.BertForPreTraining(bert)
ids = tokens(16, 128, bert.vocab_size)
report("BERT-Large, batch 16 x 128", model,
       {"input_ids": ids, "labels": ids, "next_sentence_label": torch.zeros(16, dtype=torch.long,
                                                                            device="neuron")},
       autocast=True)
del model

# Four decoder layers of Llama-3-8B in bf16, one sequence of 2048 tokens.
llama = transformers.LlamaConfig(
    hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
    num_hidden_layers=4, vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0,
    attn_implementation="sdpa")
with torch.device("neuron"):
    model = transformers.LlamaForCausalLM(llama).to(torch.bfloat16)
ids = tokens(1, 2048, llama.vocab_size)
report("Llama-3-8B, 4 of 32 layers, 1 x 2048", model, {"input_ids": ids, "labels": ids},
       autocast=False)

print(f"(host: {time.time() - host_start:.0f} s, "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB RAM at most)")
