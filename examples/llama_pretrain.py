"""Llama pre-training on simulated Trainium: throughput, MFU and HBM of a parallel layout.

    python examples/llama_pretrain.py --size tiny
    python -m torch_neuron run --nproc-per-node 2 examples/llama_pretrain.py --size tiny --tp 2
    python -m torch_neuron run --nnodes 32 --nproc-per-node 32 --virtual \
        --instance trn1.32xlarge examples/llama_pretrain.py --size 8b --tp 32 \
        --sequence-parallel --activation-checkpointing selective --coalesce-projections \
        --seq 8192 --global-batch 1024 --micro-batch 1

Hugging Face's LlamaForCausalLM with random weights, built on the meta device and materialised
on neuron (examples/llama_common.py). Ranks form a ("pp", "dp", "tp") mesh, data parallel =
world / (tp * pp): tensor (and with --sequence-parallel, sequence) parallel with
parallelize_module over "tp", pipeline parallel over "pp" (each stage a contiguous slice of
decoder layers, Schedule1F1B), data parallel over "dp" with DDP + ZeroRedundancyOptimizer
(ZeRO-1, the default; in a pipeline, the gradients are averaged in DDP's buckets after the
schedule) or FSDP2 (--dp fsdp). Each dp rank accumulates global batch / (dp *
micro-batch) micro-batches per step. As NxD Training's Llama tutorial runs it,
--activation-checkpointing selective recomputes only attention in the backward pass and
--coalesce-projections runs q/k/v and gate/up as one matmul each (llama_common.py). The first
rank of the last pipeline stage prints the losses and throughput (in a virtual world, run it:
--run-ranks); every rank its peak HBM.

bf16: float32 parameters under torch.autocast(bfloat16). Matmuls run in bf16 while AdamW
updates float32 weights (master weights, as AWS's NxD Training Llama recipes keep them; a bf16
weight loses updates smaller than 2^-8 of itself); under FSDP2 its MixedPrecisionPolicy also
all-gathers the weights in bf16.

Steps are timed with neuron events (simulated Trainium time) after a warm-up step. Nothing
reads tensor values, so it also runs in predict-only mode (TORCH_NEURON_EXECUTE=0), where the
printed losses are nan.
"""

import time

began = time.time()  # the host wall time printed at the end includes the imports

import contextlib  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402
from torch.distributed.pipelining import PipelineStage, Schedule1F1B  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from torch.distributed.tensor.parallel import loss_parallel  # noqa: E402
from torch.distributed.tensor.parallel.ddp import _pre_dp_module_transform  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import llama_common as common  # noqa: E402
import torch_neuron  # noqa: E402

parser = common.argument_parser(__doc__)
parser.add_argument("--pp", type=int, default=1)
parser.add_argument("--dp", choices=["zero1", "fsdp"], default="zero1")
parser.add_argument("--sequence-parallel", action="store_true", help="with --tp: norms and "
                    "activations between blocks split by sequence")
parser.add_argument("--seq", type=int, default=64)
parser.add_argument("--global-batch", type=int, default=8)
parser.add_argument("--micro-batch", type=int, default=2)
parser.add_argument("--steps", type=int, default=3, help="the first is a warm-up, not timed")
parser.add_argument("--activation-checkpointing", nargs="?", const="full",
                    choices=["full", "selective"], help="recompute in the backward pass each "
                    "decoder layer (full, the default) or only attention's softmax(QK^T)V "
                    "(selective, as NxD Training's Llama recipes do)")
parser.add_argument("--coalesce-projections", action="store_true", help="q/k/v and gate/up "
                    "each as one matmul, as NxD Training's Llama runs them")
parser.add_argument("--compile", action="store_true")
args = parser.parse_args()

config = common.llama_config(args.size, args.layers, args.tp,
                             recompute_attention=args.activation_checkpointing == "selective")
common.check_tensor_parallel(config, args.tp)
mesh, rank, world, dp = common.start(args.tp, args.pp)
accumulation, rest = divmod(args.global_batch, dp * args.micro_batch)
problems = [
    (rest or not accumulation, f"--global-batch {args.global_batch} is not a multiple of data "
     f"parallel {dp} x --micro-batch {args.micro_batch}"),
    (config.num_hidden_layers % args.pp, f"{config.num_hidden_layers} layers do not split "
     f"into --pp {args.pp} equal stages"),
    (args.seq > config.max_position_embeddings, f"--seq {args.seq} is longer than the "
     f"model's {config.max_position_embeddings} positions"),
    (args.sequence_parallel and args.seq % args.tp, f"--sequence-parallel splits --seq "
     f"{args.seq} over --tp {args.tp} ranks: make it a multiple of {args.tp}"),
    # Checkpointed DTensor layers fail to compile in PyTorch 2.13, whatever the backend
    # (aot_eager too): AOTAutograd saves the DeviceMesh among the tensors for the backward.
    (args.compile and args.tp > 1 and args.activation_checkpointing, "--compile with --tp > 1 "
     "and --activation-checkpointing is not supported (PyTorch fails to compile checkpointed "
     "tensor-parallel layers); drop one of them")]
for problem, message in problems:
    if problem:
        raise SystemExit(f"error: {message}")
pp_rank = mesh["pp"].get_local_rank() if mesh else 0
dp_rank = mesh["dp"].get_local_rank() if mesh else 0
first, last = pp_rank == 0, pp_rank == args.pp - 1


# The model: this stage's layers, sharded, materialised. Stage keeps HF's attribute names
# (model.layers, lm_head), so parameter names and the tensor-parallel plan are the model's.
class Stage(nn.Module):
    def __init__(self, causal_lm):
        super().__init__()
        self.model, self.lm_head = causal_lm.model, causal_lm.lm_head

    def forward(self, x):  # token ids on the first stage, hidden states after it
        inputs = dict(input_ids=x) if first else dict(inputs_embeds=x)
        # A cache, though training: without a mask or a cache, HF reads the position ids
        # (looking for packed sequences), which predict-only mode cannot. It holds the keys
        # and values attention saves for backward anyway (checkpointed layers skip it).
        cache = transformers.DynamicCache(config=config)
        positions = torch.arange(args.seq, device=x.device).unsqueeze(0)  # x may be a part
        hidden = self.model(**inputs, cache=cache, position_ids=positions).last_hidden_state
        return self.lm_head(hidden) if last else hidden


# Model FLOPs count the published model's parameters, without replicated key/value heads.
params = common.parameter_count(common.model_on_meta(common.llama_config(args.size, args.layers)))
causal_lm = common.model_on_meta(config)
per_stage = config.num_hidden_layers // args.pp
causal_lm.model.layers = nn.ModuleList(causal_lm.model.layers[pp_rank * per_stage:][:per_stage])
if not first:
    causal_lm.model.embed_tokens = None
if not last:
    causal_lm.model.norm, causal_lm.lm_head = nn.Identity(), None
if args.activation_checkpointing == "full":
    causal_lm.activation_checkpointing_enable({"use_reentrant": False})
stage = Stage(causal_lm)
if args.tp > 1:
    common.tensor_parallel(stage, mesh["tp"], logits="sharded",
                           sequence_parallel=args.sequence_parallel,
                           coalesced=args.coalesce_projections)
if args.dp == "fsdp" and dp > 1:
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in stage.model.layers:
        fully_shard(layer, mesh=mesh["dp"], mp_policy=policy)
    fully_shard(stage, mesh=mesh["dp"], mp_policy=policy)
if args.coalesce_projections:
    common.coalesce_projections(stage)
device = common.materialise(stage, config, mesh["tp"] if args.tp > 1 else None,
                            first_layer=pp_rank * per_stage)
if args.compile:
    for layer in stage.model.layers:
        layer.compile(backend="neuron")
if args.dp == "zero1" and dp > 1:
    # A pipeline's schedule infers the stages' shapes with a forward and backward outside
    # DDP's no_sync(), after which DDP's reducer sees every parameter ready twice and fails an
    # internal assert (PyTorch 2.13, CPU tensors with Gloo too): a stage is not wrapped, and
    # average_gradients does DDP's reduction after the schedule.
    if args.pp == 1:  # given the dp sub-mesh, DDP handles TP's DTensors
        stage = DistributedDataParallel(stage, device_mesh=mesh["dp"])
    elif args.tp > 1:  # as DDP does given TP: plain parameters, DTensors inside forward only
        _pre_dp_module_transform(stage)  # (ZeroRedundancyOptimizer broadcasts plain tensors)
    optimizer = ZeroRedundancyOptimizer(stage.parameters(), torch.optim.AdamW, lr=1e-4,
                                        process_group=mesh["dp"].get_group())
else:  # one group of DTensors, one of plain tensors (norms under TP): one foreach kernel each
    groups = [[p for p in stage.parameters() if isinstance(p, DTensor) == dtensor]
              for dtensor in (True, False)]
    optimizer = torch.optim.AdamW([{"params": g} for g in groups if g], lr=1e-4)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def micro_batches(step):
    """This dp rank's micro-batches: each drawn from its own seed on the CPU, so any layout
    trains on the same sequences as one process."""
    first_index = (step * dp + dp_rank) * accumulation
    return [torch.randint(0, config.vocab_size, (args.micro_batch, args.seq + 1),
                          generator=torch.Generator().manual_seed(first_index + i)).to(device)
            for i in range(accumulation)]


# DistributedDataParallel's default bucket_cap_mb (torch.nn.parallel.DistributedDataParallel).
BUCKET_BYTES = 25 * 2**20


def average_gradients():
    """What DDP does at the last micro-batch, for a pipeline stage DDP cannot wrap: average the
    gradients over dp, a flat bucket of at most BUCKET_BYTES per all-reduce."""
    # The optimizer's parameters: after _pre_dp_module_transform, a forward leaves the stage's
    # parameters as DTensor attributes built from them, which stage.parameters() omits.
    grads = [p.grad for group in optimizer.param_groups for p in group["params"]
             if p.grad is not None]
    buckets, size = [[]], 0
    for grad in grads:
        if buckets[-1] and size + grad.nbytes > BUCKET_BYTES:
            buckets.append([])
            size = 0
        buckets[-1].append(grad)
        size += grad.nbytes
    for bucket in buckets:
        flat = torch.cat([g.flatten() for g in bucket])
        dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
        for grad, averaged in zip(bucket, flat.split([g.numel() for g in bucket])):
            grad.copy_(averaged.view_as(grad))


def sync_gradients(last_micro_batch):
    """Reduce gradients over dp after the last micro-batch only."""
    if isinstance(stage, DistributedDataParallel) and not last_micro_batch:
        return stage.no_sync()
    if hasattr(stage, "set_requires_gradient_sync"):  # FSDP2
        stage.set_requires_gradient_sync(last_micro_batch)
    return contextlib.nullcontext()


if args.pp > 1:
    schedule = Schedule1F1B(PipelineStage(stage, pp_rank, args.pp, device,
                                          group=mesh["pp"].get_group()),
                            n_microbatches=accumulation, loss_fn=lm_loss)


def train_step(step):
    """One optimizer step; the mean loss over the step's micro-batches (on the last stage)."""
    batches = micro_batches(step)
    losses = []
    with torch.autocast("neuron", dtype=torch.bfloat16), (
            loss_parallel() if args.tp > 1 else contextlib.nullcontext()):
        if args.pp > 1:  # the schedule runs the micro-batches and scales the gradients
            tokens = torch.cat(batches)
            inputs = (tokens[:, :-1],) if first else ()
            targets = dict(target=tokens[:, 1:], losses=losses) if last else {}
            schedule.step(*inputs, **targets, return_outputs=False)  # no logits kept
            if args.dp == "zero1" and dp > 1:
                average_gradients()
        else:
            for i, tokens in enumerate(batches):
                with sync_gradients(i == accumulation - 1):
                    loss = lm_loss(stage(tokens[:, :-1]), tokens[:, 1:])
                    (loss / accumulation).backward()
                losses.append(loss.detach())
    optimizer.step()
    optimizer.zero_grad()
    if not last:
        return None
    # Under loss_parallel a loss is a replicated DTensor: its local tensor is the value.
    loss = torch.stack([l.to_local() if isinstance(l, DTensor) else l for l in losses]).mean()
    if dp > 1:
        dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
    return loss


printer = rank == (args.pp - 1) * dp * args.tp  # the first rank of the last stage
if printer:
    print(f"Llama {args.size}: {config.num_hidden_layers} layers, {params / 1e6:.1f}M "
          f"parameters (without the embedding), {config.num_key_value_heads} key/value heads; "
          f"{world} ranks = tp {args.tp} x pp {args.pp} x "
          f"dp {dp} ({args.dp}) on {torch_neuron._C._instance_info()['name']}; seq {args.seq}, "
          f"global batch {args.global_batch} = dp {dp} x micro-batch {args.micro_batch} x "
          f"{accumulation} accumulation steps", flush=True)
timer, times = common.Timer(), []
for step in range(args.steps):
    if mesh is not None:
        dist.barrier()  # every rank starts the step together
    timer.start()
    try:
        loss = train_step(step)
    except torch.OutOfMemoryError as error:  # the simulated HBM's capacity
        raise SystemExit(f"rank {rank}: does NOT fit in HBM: {str(error).splitlines()[0]}")
    ms = timer.stop()
    times += [ms] if step else []
    if printer:
        print(f"step {step}  loss {loss.item():.6f}  time {ms:.3f} ms"
              f"{' (warm-up)' if step == 0 else ''}", flush=True)

if printer and times:
    step_s = sum(times) / len(times) / 1e3
    tokens_per_s = args.global_batch * args.seq / step_s
    # PaLM's model FLOPs (Chowdhery et al. 2022, appendix B): 6N per token for the weights'
    # matmuls forward and backward, plus 12 L H Q T for attention's (L layers, H heads of
    # size Q, T tokens of context); activation recomputation is not counted.
    flops_per_token = 6 * params + 12 * config.num_hidden_layers * config.num_attention_heads \
        * config.head_dim * args.seq
    peak = torch_neuron._C._instance_info()["peak_bf16_tflops_per_core"] * 1e12 * world
    print(f"throughput: {args.global_batch / step_s:.2f} sequences/s, {tokens_per_s:.0f} "
          f"tokens/s, MFU {100 * flops_per_token * tokens_per_s / peak:.2f}% (step "
          f"{step_s * 1e3:.3f} ms, mean of {len(times)}; model FLOPs 6N + 12LHQT per token over "
          f"{world} NeuronCores' peak bf16)", flush=True)
print(common.memory_line(rank), flush=True)
if printer:
    print(common.host_line(began), flush=True)
if mesh is not None:
    dist.destroy_process_group()
