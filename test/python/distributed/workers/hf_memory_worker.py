"""A Llama that does not fit one simulated NeuronCore, trained with FSDP2 on N ranks.

Each process may reserve only --limit-in-model-sizes times the model's parameter bytes of its
NeuronCore's HBM (torch.neuron.set_per_process_memory_fraction). At 4, one device cannot hold
the weights, their gradients and AdamW's two moments, let alone activations. `--mode single` trains the model on one device
and is expected to raise torch.OutOfMemoryError; `--mode fsdp` (under torchrun) shards it with
FSDP2 over the ranks and trains the same steps, and rank 0 checks its losses against the same
steps on the CPU, unsharded. Every process writes what it saw to --out/<mode>_rank<R>.json."""

import argparse
import json
import os

import torch
import torch.distributed as dist
import transformers
from torch.distributed.fsdp import fully_shard

import torch_neuron

STEPS, BATCH, SEQ = 3, 4, 16


def build_model():
    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512,
                                      num_hidden_layers=8, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def batches():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 1024, (BATCH, SEQ), generator=g) for _ in range(STEPS)]


def train(model, device, rows):
    """STEPS AdamW steps on the `rows` of every batch; the loss of each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for ids in batches():
        ids = ids[rows].to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["single", "fsdp"], required=True)
    parser.add_argument("--limit-in-model-sizes", type=float, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    device = torch.device("neuron", torch.neuron.current_device())  # neuron:LOCAL_RANK
    model = build_model()
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    limit = args.limit_in_model_sizes * param_bytes
    torch.neuron.set_per_process_memory_fraction(limit / torch.neuron.mem_get_info(device)[1],
                                                 device)
    result = {"rank": rank, "device": str(device), "param_bytes": param_bytes, "limit": limit}
    try:
        if args.mode == "single":
            result["losses"] = train(model.to(device), device, slice(None))
        else:
            dist.init_process_group("neuron")
            world = dist.get_world_size()
            for layer in model.model.layers:
                fully_shard(layer)
            fully_shard(model)
            # Each rank trains on its rows of the batch; FSDP2 averages the gradients, which
            # equals training on the whole batch.
            result["losses"] = train(model, device, slice(rank, None, world))
            local = sum(p.to_local().numel() * p.element_size() for p in model.parameters())
            result["local_param_bytes"] = local
            result["fallback_ops"] = torch_neuron.get_fallback_ops()
            if rank == 0:
                result["cpu_losses"] = train(build_model(), "cpu", slice(None))
            dist.destroy_process_group()
    except torch.OutOfMemoryError as e:
        result["oom"] = str(e)
    result["peak_reserved"] = torch.neuron.max_memory_reserved(device)
    result["peak_allocated"] = torch.neuron.max_memory_allocated(device)
    with open(os.path.join(args.out, f"{args.mode}_rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
