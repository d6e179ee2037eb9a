"""Fine-tune a tiny Llama with Hugging Face accelerate, FSDP2 and bf16 on neuron.

    python -m torch_neuron run --nproc-per-node 2 examples/hf_fsdp_finetune.py
    torchrun --nproc-per-node 2 examples/hf_fsdp_finetune.py
    accelerate launch --config_file fsdp2.yaml examples/hf_fsdp_finetune.py

accelerate drives neuron only when the import name `torch_neuronx` exists (install the alias:
pip install --no-build-isolation -e compat/torch_neuronx); it then runs each rank on
neuron:LOCAL_RANK with the c10d backend "neuron". `accelerate launch` passes its config file to
the ranks in environment variables; torchrun and `python -m torch_neuron run` pass none, and
then this script asks for FSDP2 and bf16 itself. A fsdp2.yaml that does the same:

    distributed_type: FSDP
    mixed_precision: bf16
    num_processes: 2
    fsdp_config: {fsdp_version: 2, fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP,
                  fsdp_state_dict_type: SHARDED_STATE_DICT}

The model has random weights from a config and the data is generated, so nothing is downloaded.
The script trains, saves a checkpoint half way, trains on, then loads the checkpoint and trains
the second half again: the resumed losses equal the first ones.
"""

import argparse
import json
import os
import shutil
import tempfile

import torch
import transformers
from accelerate import Accelerator, FullyShardedDataParallelPlugin
from accelerate.utils import broadcast_object_list, gather_object, set_seed
from torch.distributed.tensor import DTensor

import torch_neuron  # noqa: F401  (the "neuron" device; get_fallback_ops)


def make_accelerator(accumulation_steps: int) -> Accelerator:
    """FSDP2 and bf16 from `accelerate launch`'s config if there is one, else from here."""
    if "ACCELERATE_MIXED_PRECISION" in os.environ:  # set by every `accelerate launch`
        return Accelerator(gradient_accumulation_steps=accumulation_steps)
    fsdp2 = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        auto_wrap_policy="transformer_based_wrap",  # one fully_shard per LlamaDecoderLayer
        state_dict_type="SHARDED_STATE_DICT")       # each rank saves its own shards
    return Accelerator(gradient_accumulation_steps=accumulation_steps, mixed_precision="bf16",
                       fsdp_plugin=fsdp2)


def counting_data(sequences: int, length: int, vocab: int) -> torch.utils.data.TensorDataset:
    """Sequences that count up from a random start (mod vocab): easy to learn, so the loss falls."""
    start = torch.randint(0, vocab, (sequences, 1), generator=torch.Generator().manual_seed(1))
    return torch.utils.data.TensorDataset((start + torch.arange(length)) % vocab)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2, help="the checkpoint is saved after half")
    parser.add_argument("--accumulation-steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4, help="sequences per rank and micro-batch")
    parser.add_argument("--checkpoint-dir", help="default: a temporary directory")
    parser.add_argument("--json", help="also write what ran and the losses to this file")
    args = parser.parse_args()

    accelerator = make_accelerator(args.accumulation_steps)
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if accelerator.num_processes != launched:  # else every rank would train alone on the CPU
        raise SystemExit(f"{launched} ranks were launched but accelerate runs "
                         f"{accelerator.num_processes} on {accelerator.device}: it found no neuron "
                         "device; install the torch_neuronx alias (compat/torch_neuronx)")
    set_seed(0)  # the same initial weights on every rank: accelerate shards them in prepare()
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    # Not shuffled: every epoch sees the same batches, so a resumed epoch repeats the first run.
    loader = torch.utils.data.DataLoader(counting_data(64, 16, config.vocab_size),
                                         batch_size=args.batch)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    # What accelerate made of the launch; gather_object collects one entry per rank.
    facts = {
        "distributed_type": str(accelerator.distributed_type),
        "fsdp_version": accelerator.state.fsdp_plugin.fsdp_version if accelerator.is_fsdp2 else 0,
        "mixed_precision": accelerator.mixed_precision,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "devices": gather_object([str(accelerator.device)]),
        "dtensor_params": gather_object([all(isinstance(p, DTensor) for p in model.parameters())]),
    }
    if accelerator.is_main_process:
        print(f"{facts['distributed_type']}, {accelerator.num_processes} ranks on "
              f"{', '.join(facts['devices'])}, backend {facts['backend']}, mixed precision "
              f"{facts['mixed_precision']}, parameters are DTensors: "
              f"{all(facts['dtensor_params'])}", flush=True)

    def train_epoch(epoch: int, label: str = "step") -> list[dict]:
        steps, pending = [], []
        for (tokens,) in loader:
            # accumulate() skips the gradient reduce-scatter and the optimizer step on all but
            # every accumulation_steps-th micro-batch (and the last one of the epoch).
            with accelerator.accumulate(model):
                loss = model(input_ids=tokens, labels=tokens).loss
                accelerator.backward(loss)
                pending.append(loss.detach())
                if accelerator.sync_gradients:  # the norm before clipping, over all shards
                    grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=1.0)
                optimizer.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:  # an optimizer step happened: its mean loss
                loss = accelerator.gather(torch.stack(pending)).mean().item()
                steps.append({"loss": loss, "micro_batches": len(pending),
                              "grad_norm": grad_norm.item()})
                pending = []
                if accelerator.is_main_process:
                    print(f"epoch {epoch} {label} {len(steps) - 1}  loss {loss:.6f}  "
                          f"grad norm {steps[-1]['grad_norm']:.4f}", flush=True)
        return steps

    # All ranks write their shards into one directory, so rank 0 picks it.
    checkpoint = args.checkpoint_dir or broadcast_object_list(
        [tempfile.mkdtemp(prefix="hf_fsdp_") if accelerator.is_main_process else None])[0]
    half = args.epochs // 2
    first = sum((train_epoch(epoch) for epoch in range(half)), [])
    accelerator.save_state(checkpoint)
    second = sum((train_epoch(epoch) for epoch in range(half, args.epochs)), [])
    accelerator.load_state(checkpoint)
    resumed = sum((train_epoch(epoch, "resumed step") for epoch in range(half, args.epochs)), [])

    # Ops that ran on the host because the device has no kernel for them: none expected.
    fallback_ops = gather_object([torch_neuron.get_fallback_ops()])
    if accelerator.is_main_process:
        same = [s["loss"] for s in resumed] == [s["loss"] for s in second]
        print(f"resumed from the checkpoint: {'the same losses' if same else 'DIFFERENT losses'}")
        print(f"CPU fallback ops: {fallback_ops if any(fallback_ops) else 'none'}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(facts, steps=first + second, resumed=resumed,
                               fallback_ops=fallback_ops), f)
        if not args.checkpoint_dir:
            shutil.rmtree(checkpoint, ignore_errors=True)
    # The model goes before the process group: a DDP model (accelerate's choice on the CPU) that
    # outlives destroy_process_group() destroys the Gloo group itself later, holding the GIL,
    # which can hang the rank or abort it at exit (PyTorch issue 56297).
    model, optimizer, loader = accelerator.free_memory(model, optimizer, loader)
    accelerator.end_training()


if __name__ == "__main__":
    main()
