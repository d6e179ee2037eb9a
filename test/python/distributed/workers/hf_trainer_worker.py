"""Hugging Face training at scale, unchanged, on one device type: transformers' Trainer, TRL's
SFTTrainer and PEFT LoRA adapters on 2+ ranks. Run it under torchrun with `--device neuron`
(accelerate picks neuron:LOCAL_RANK and the c10d backend "neuron" through the `torch_neuronx`
alias) and with `--device cpu` (TrainingArguments(use_cpu=True): accelerate's MULTI_CPU, DDP over
Gloo, and torch_neuron is never imported) and compare what the ranks save.

Cases (`--cases`, comma-separated; each from the same seeds, a tiny random-weight Llama built
from a config, in-memory data, nothing downloaded):
  trainer_ddp    Trainer, DDP
  trainer_fsdp2  Trainer(fsdp="full_shard", fsdp_config={"fsdp_version": 2, ...}): FSDP2
                 (fully_shard per decoder layer and on the root) on neuron. accelerate refuses
                 FSDP on the CPU (its MULTI_CPU state never becomes DistributedType.FSDP), so the
                 CPU run of this case trains the same model with DDP over Gloo: the same math
                 (every rank sees the mean gradient of the global batch), other communication.
  trainer_fsdp2_accum
                 the same with fsdp="shard_grad_op" (reshard_after_forward=False) and 2
                 gradient accumulation steps; DDP with the same accumulation on the CPU
  sft_lora_ddp   TRL SFTTrainer with a PEFT LoRA config, DDP (SFTConfig's defaults: bf16
                 autocast, gradient checkpointing)
  lora_fsdp2     Trainer on a PEFT LoRA model (get_peft_model), FSDP2 as trainer_fsdp2 on neuron
                 (frozen base weights and trainable adapters sharded together); DDP on the CPU
  sft_lora_fsdp2 SFTTrainer with a LoRA config, FSDP2 on neuron as trainer_fsdp2 (TRL's fused LM
                 head gathers the sharded lm_head itself), float32; DDP on the CPU
Each rank saves, per case: the logged losses and gradient norms (Trainer logs the mean over
ranks), the full trainable and frozen parameters at the end, which device / wrapper /
distributed type / backend the trainer used, the DTensor mesh and placements of the parameters
(None for a plain tensor), and the ops that fell back to the CPU (from building the trainer to
the end of training). A case that
raises saves its traceback instead, and the other cases still run.
"""

import argparse
import os
import sys
import traceback

parser = argparse.ArgumentParser()
parser.add_argument("--device", choices=["neuron", "cpu"], required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--cases",
                    default="trainer_ddp,trainer_fsdp2,trainer_fsdp2_accum,sft_lora_ddp,lora_fsdp2,"
                    "sft_lora_fsdp2")
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()
NEURON = args.device == "neuron"
if not NEURON:
    # A stock CPU reference: accelerate and transformers look for `torch_neuronx` with
    # importlib.util.find_spec, which returns None for a None entry in sys.modules, so neither
    # they nor torch's autoloading (disabled by the test's environment) load torch_neuron.
    sys.modules["torch_neuronx"] = None

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import datasets  # noqa: E402
import peft  # noqa: E402
import tokenizers  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from torch.distributed.fsdp import FSDPModule  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

transformers.logging.set_verbosity_error()
datasets.disable_progress_bars()

SPECIAL = ["<pad>", "<eos>", "<unk>"]
WORDS = "the a cat dog sat ran on under mat rug fast slow big small red blue".split()
TEXTS = ["the cat sat on the mat", "a dog ran under the rug", "the big red cat ran fast",
         "a small blue dog sat slow", "the dog sat on a big mat", "a cat ran under the red rug",
         "the small cat sat", "a big blue dog ran on the mat", "the red dog ran on the rug",
         "a cat sat under a blue mat", "the slow big dog sat", "a fast small cat ran",
         "the blue cat sat on a red rug", "a dog sat", "the cat ran under the big mat",
         "a small red dog ran fast"]
VOCAB = 128
LORA = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
            task_type="CAUSAL_LM")


def fsdp2(fsdp="full_shard"):
    """TrainingArguments for FSDP2 on neuron; none on the CPU (DDP, see above).

    transformers strips the "fsdp_" prefix of fsdp_config keys ("fsdp_version" is its
    "version", 2 being the default), turns "full_shard" / "shard_grad_op" into FSDP2's
    reshard_after_forward=True / False and passes the rest to accelerate's
    FullyShardedDataParallelPlugin. A new dict every time: TrainingArguments rewrites its
    fsdp_config in place."""
    if not NEURON:
        return {}
    return dict(fsdp=fsdp, fsdp_config={"fsdp_version": 2,
                                        "transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"],
                                        "state_dict_type": "SHARDED_STATE_DICT"})


def llama(vocab_size):
    config = transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, bos_token_id=None)
    torch.manual_seed(0)  # the same initial weights on every rank and in both runs
    return transformers.LlamaForCausalLM(config)


def token_data():
    g = torch.Generator().manual_seed(1)
    return [{"input_ids": ids, "labels": ids.clone()}
            for ids in torch.randint(3, VOCAB, (32, 16), generator=g)]


def tokenizer():
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                                                eos_token="<eos>", unk_token="<unk>")


def common_args(name, config_class=transformers.TrainingArguments, **extra):
    return config_class(
        output_dir=os.path.join(args.out, f"{args.device}_{name}"), use_cpu=not NEURON, seed=0,
        per_device_train_batch_size=2, max_steps=args.steps, learning_rate=1e-2,
        logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True,
        dataloader_pin_memory=False, **extra)


def make_trainer(name):
    if name == "trainer_ddp":
        return transformers.Trainer(model=llama(VOCAB), args=common_args(name),
                                    train_dataset=token_data())
    if name == "trainer_fsdp2":
        return transformers.Trainer(model=llama(VOCAB), args=common_args(name, **fsdp2()),
                                    train_dataset=token_data())
    if name == "trainer_fsdp2_accum":
        # "shard_grad_op": FSDP2 with reshard_after_forward=False; 2 micro-batches per step,
        # the first without gradient synchronization (accelerate's no_sync on DDP and FSDP2)
        return transformers.Trainer(
            model=llama(VOCAB), train_dataset=token_data(),
            args=common_args(name, gradient_accumulation_steps=2, **fsdp2("shard_grad_op")))
    if name == "lora_fsdp2":
        # fsdp=True, the form transformers recommends over the "full_shard" string.
        model = peft.get_peft_model(llama(VOCAB), peft.LoraConfig(**LORA))
        return transformers.Trainer(model=model, args=common_args(name, **fsdp2(True)),
                                    train_dataset=token_data())
    if name in ("sft_lora_ddp", "sft_lora_fsdp2"):
        # The same padding on both devices (SFTConfig pads to a multiple of 128 on neuron by
        # default), so that both runs see identical batches.
        # SFTConfig turns bf16 on by default: accelerate's autocast under DDP (on neuron as on
        # the CPU), but under FSDP2 accelerate also sets MixedPrecisionPolicy(param_dtype=
        # bfloat16), other rounding than autocast. So the FSDP2 case trains in float32 on both.
        extra = dict(fsdp2(), bf16=False) if name == "sft_lora_fsdp2" else {}
        config = common_args(name, trl.SFTConfig, max_length=16, pad_to_multiple_of=16, **extra)
        return trl.SFTTrainer(model=llama(len(SPECIAL) + len(WORDS)), args=config,
                              processing_class=tokenizer(),
                              train_dataset=datasets.Dataset.from_dict({"text": TEXTS}),
                              peft_config=peft.LoraConfig(**LORA))
    raise ValueError(name)


def full(p):
    return (p.full_tensor() if isinstance(p, DTensor) else p).detach().to("cpu").clone()


def placement(p):
    if not isinstance(p, DTensor):
        return None
    return p.device_mesh.device_type, tuple(p.device_mesh.shape), tuple(map(str, p.placements))


def run(name):
    # accelerate records an FSDP plugin in os.environ (ACCELERATE_USE_FSDP=true, read by every
    # later AcceleratorState of the process): restore the environment after each case, so that
    # each case runs as it would in a process of its own.
    saved_env = dict(os.environ)
    try:
        return train(name)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def train(name):
    if NEURON:
        import torch_neuron

        torch_neuron.clear_op_tracking()  # fallbacks counted from the model's construction on
    trainer = make_trainer(name)
    trainer.train()
    fallback = torch_neuron.get_fallback_ops() if NEURON else {}
    params = list(trainer.model.named_parameters())
    logs = [log for log in trainer.state.log_history if "loss" in log]
    return {
        "losses": [log["loss"] for log in logs],
        "grad_norms": [log["grad_norm"] for log in logs],
        "trainable": {n: full(p) for n, p in params if p.requires_grad},
        "frozen": {n: full(p) for n, p in params if not p.requires_grad},
        "reshard_after_forward": trainer.accelerator.state.fsdp_plugin.reshard_after_forward
        if trainer.is_fsdp_enabled else None,
        "accumulation": trainer.args.gradient_accumulation_steps,
        "param_devices": sorted({str(p.device) for _, p in params}),
        "placements": sorted({placement(p) for _, p in params}, key=str),
        "wrapper": type(trainer.model_wrapped).__name__,
        # FSDP2 modules: the root and every module fully_shard was applied to.
        "fsdp2_modules": sorted(type(m).__name__ for m in trainer.model_wrapped.modules()
                                if isinstance(m, FSDPModule)),
        "args_device": str(trainer.args.device),
        "accelerator_device": str(trainer.accelerator.device),
        "distributed_type": str(trainer.accelerator.distributed_type),
        "mixed_precision": trainer.accelerator.mixed_precision,
        "fsdp_version": getattr(trainer.accelerator.state.fsdp_plugin, "fsdp_version", None)
        if trainer.is_fsdp_enabled else None,
        "backend": dist.get_backend(),
        "world": dist.get_world_size(),
        "fallback": dict(fallback),
    }


results = {}
for case in args.cases.split(","):
    try:
        results[case] = run(case)
    except Exception:  # recorded: the pytest reports it per case, the other cases go on
        results[case] = {"error": traceback.format_exc()}
rank = dist.get_rank()
results["torch_neuron_loaded"] = "torch_neuron" in sys.modules
os.makedirs(args.out, exist_ok=True)
torch.save(results, os.path.join(args.out, f"{args.device}_rank{rank}.pt"))
dist.barrier()
dist.destroy_process_group()
print(f"hf_trainer ok on rank {rank} ({args.device})", flush=True)
