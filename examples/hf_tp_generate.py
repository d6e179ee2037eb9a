"""Tensor-parallel text generation with Hugging Face transformers on neuron: `tp_plan="auto"`
shards a causal LM's attention and MLP projections over the ranks' NeuronCores and
`generate()` runs unchanged.

    python -m torch_neuron run --nproc-per-node 2 examples/hf_tp_generate.py
    torchrun --nproc-per-node 4 examples/hf_tp_generate.py --model mixtral --cache static

It needs several ranks (2 or 4 here), started by torchrun or by torch_neuron's launcher.

Each rank builds the same tiny model from a config (random weights from a fixed seed; nothing
is downloaded) and saves it to a directory of its own, so no rank waits for another's file.
`from_pretrained(..., tp_plan="auto")` then starts the "neuron" process group, puts rank R on
neuron:R and loads each weight as a DTensor holding the rank's shard. Rank 0 checks the tokens
against the same model unsharded on the CPU and counts the collectives generation issued.
"""

import argparse
import sys
import tempfile

import torch
import torch.distributed as dist
import transformers
from torch.distributed.tensor import DTensor
from transformers.distributed import DistributedConfig

import torch_neuron  # noqa: F401  (registers the "neuron" device and the c10d backend)

# Tiny models that any number of ranks up to 4 can shard: 8 query heads, 4 key/value heads.
SHAPE = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=64)
MODELS = {
    "llama": (transformers.LlamaConfig, {}),
    "qwen": (transformers.Qwen2Config, {}),
    "mixtral": (transformers.MixtralConfig, dict(num_local_experts=4, num_experts_per_tok=2)),
}


def build_model(name):
    """The same random weights on every rank (and in every process that calls this)."""
    config_class, extra = MODELS[name]
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config_class(**SHAPE, **extra)).eval()


def prompt():
    """Two sequences of 8 random token ids, the same on every rank."""
    return torch.randint(0, SHAPE["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=sorted(MODELS), default="llama")
    parser.add_argument("--cache", choices=["dynamic", "static"], default="dynamic")
    parser.add_argument("--new-tokens", type=int, default=8)
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar per rank

    cpu_model = build_model(args.model)
    with tempfile.TemporaryDirectory() as path:
        cpu_model.save_pretrained(path)
        # tp_plan="auto": the model's own sharding plan (from_pretrained(path, tp_plan="auto")
        # does the same; transformers 5.24 asks for it in a DistributedConfig).
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, distributed_config=DistributedConfig(tp_plan="auto"))
    rank, world = dist.get_rank(), dist.get_world_size()

    ids = prompt()

    def generate(model, ids):
        kwargs = dict(max_new_tokens=args.new_tokens, do_sample=False,
                      attention_mask=torch.ones_like(ids))
        if args.cache == "static":
            # On neuron, transformers then compiles the decode step with
            # torch.compile(backend="neuron"): the compiled graph runs the same collectives.
            kwargs["cache_implementation"] = "static"
        return model.generate(ids, **kwargs)

    # PyTorch's profiler records every c10d:: op: each is one call into the process group,
    # which the neuron backend runs as one collective on the simulated interconnect (the run
    # report's collectives table lists the same calls, as the simulator timed them).
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = generate(model, ids.to(model.device)).cpu()
    collectives = {e.key: e.count for e in prof.key_averages() if e.key.startswith("c10d::")}
    dist.destroy_process_group()  # the rest is rank 0 alone, on the CPU
    if rank != 0:
        return

    # One line per print: the ranks share the terminal, and only rank 0 prints.
    q = model.model.layers[0].self_attn.q_proj.weight
    assert isinstance(q, DTensor)
    print(f"{args.model}: {world}-way tensor parallel, {args.cache} cache, rank 0 on "
          f"{model.device}")
    print(f"layers.0.self_attn.q_proj.weight: DTensor {q.placements}, local shard "
          f"{tuple(q.to_local().shape)} of {tuple(q.shape)} on {q.to_local().device}")
    print(f"prompt:    {ids.tolist()}")
    print(f"generated: {out[:, ids.shape[1]:].tolist()}")
    # The reference: the same weights, unsharded, on one device (the CPU).
    same = torch.equal(out, generate(cpu_model, ids))
    print(f"same tokens as one device (the CPU): {same}")
    new, total = out.shape[1] - ids.shape[1], sum(collectives.values())
    calls = ", ".join(f"{name} x{n}" for name, n in sorted(collectives.items()))
    print(f"{new} new tokens, {total} collectives per rank ({total / new:g} per token): {calls}")
    if not same:
        sys.exit("the tensor-parallel tokens differ from the single-device tokens")


if __name__ == "__main__":
    main()
