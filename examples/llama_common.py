"""What examples/llama_pretrain.py and examples/llama_generate.py share: the Llama sizes, the
process group and device mesh, a model built on the meta device and initialised on neuron,
its tensor-parallel plan, and simulated-time measurement."""

import argparse
import functools
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
import torch.utils.checkpoint
import transformers
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard
from torch.distributed.tensor._random import manual_seed as dtensor_manual_seed
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, parallelize_module)
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

import torch_neuron

# Every rank prints to the same pipe, and an unbuffered stdout (PYTHONUNBUFFERED) writes a
# print's text and its newline separately, so two ranks' lines could run together: one write
# per line instead.
sys.stdout.reconfigure(write_through=False, line_buffering=True)

# Llama 3's rotary embedding, as both model cards' config.json give it.
LLAMA3_ROPE = dict(rope_theta=500000.0, rope_scaling=dict(
    rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=8192))
SIZES = {
    # For tests: 8 query and 4 key/value heads shard over up to 4 ranks; 4 layers over 2 stages.
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256),
    # huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
    "8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
               num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               max_position_embeddings=131072, rms_norm_eps=1e-5, **LLAMA3_ROPE),
    # huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json
    "70b": dict(vocab_size=128256, hidden_size=8192, intermediate_size=28672,
                num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                max_position_embeddings=131072, rms_norm_eps=1e-5, **LLAMA3_ROPE),
    # The models of AWS's published Trainium1 decoder latencies (fidelity anchors), from their
    # config.json on huggingface.co: meta-llama/Meta-Llama-3-8B, meta-llama/Llama-2-{7,13,70}b-hf,
    # codellama/CodeLlama-13b-hf, mistralai/Mistral-7B-Instruct-v0.2. Mistral v0.2 has no
    # sliding window (sliding_window null): the architecture is Llama's.
    "llama3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0),
    "llama2-7b": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                      max_position_embeddings=4096, rms_norm_eps=1e-5),
    "llama2-13b": dict(vocab_size=32000, hidden_size=5120, intermediate_size=13824,
                       num_hidden_layers=40, num_attention_heads=40, num_key_value_heads=40,
                       max_position_embeddings=4096, rms_norm_eps=1e-5),
    "llama2-70b": dict(vocab_size=32000, hidden_size=8192, intermediate_size=28672,
                       num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8,
                       max_position_embeddings=4096, rms_norm_eps=1e-5),
    "codellama-13b": dict(vocab_size=32016, hidden_size=5120, intermediate_size=13824,
                          num_hidden_layers=40, num_attention_heads=40, num_key_value_heads=40,
                          max_position_embeddings=16384, rms_norm_eps=1e-5,
                          rope_theta=1000000.0),
    "mistral-7b": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                       num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                       max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1000000.0),
}
SEED = 0


def recomputed_attention(module, query, key, value, attention_mask, **kwargs):
    """Selective activation checkpointing (Korthikanti et al. 2022, "Reducing Activation
    Recomputation in Large Transformer Models"): only the attention core, softmax(QK^T)V, is
    recomputed in the backward pass; everything else keeps its activations. It drops the
    activations that grow with the square of the sequence for a small share of the FLOPs. NxD
    Training's Llama recipes run this way (aws-neuron-sdk libraries/neuronx-distributed/
    activation_memory_reduction.rst, tutorials/training_llama_tp_zero1.rst)."""
    return torch.utils.checkpoint.checkpoint(sdpa_attention_forward, module, query, key, value,
                                             attention_mask, use_reentrant=False, **kwargs)


RECOMPUTED_ATTENTION = "sdpa_recomputed"
transformers.AttentionInterface.register(RECOMPUTED_ATTENTION, recomputed_attention)
AttentionMaskInterface.register(RECOMPUTED_ATTENTION, sdpa_mask)  # masks as for "sdpa"


def llama_config(size, layers=None, tp=1, recompute_attention=False, positions=None,
                 attention="sdpa"):
    """--layers N keeps the size's widths with N decoder layers (a quick look at a big model).
    Heads that do not split over the tensor-parallel ranks are padded to the next multiple of
    them, as NxD's pad_model does (aws-neuron-sdk libraries/neuronx-distributed/api_guide.rst,
    "Padding Tensor-Parallel Layers": 40 heads at TP 32 become 64, two a rank; key/value heads
    too when there are as many). With more tensor-parallel ranks than key/value heads, each
    key/value head is replicated so that every rank holds one, as NxD Inference's
    GQA.REPLICATE_TO_TP_DEGREE does (8 heads at TP 32 become 32; aws-neuron/
    neuronx-distributed-inference, src/neuronx_distributed_inference/modules/attention/gqa.py).
    The weights are random, so padded heads and copies are not zero or tied: shapes and costs
    are the padded, replicated model's. With `recompute_attention`, attention is checkpointed
    (recomputed_attention). `positions` replaces the config's maximum positions (rotary
    embeddings extend to any position). `attention` is Hugging Face's attention implementation:
    "sdpa" (one fused op, flash attention on Neuron: the scores stay on chip) or "eager"
    (matmul, softmax and matmul as separate ops: every head's scores go through HBM)."""
    if attention not in ("sdpa", "eager") or (recompute_attention and attention != "sdpa"):
        raise ValueError(f"attention {attention!r}: choose 'sdpa' or 'eager' (recomputed "
                         "attention is sdpa)")
    config = dict(SIZES[size],
                  attn_implementation=RECOMPUTED_ATTENTION if recompute_attention else attention)
    if layers is not None:
        config["num_hidden_layers"] = layers
    if positions is not None:
        config["max_position_embeddings"] = positions
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    config["head_dim"] = config["hidden_size"] // heads
    if heads % tp:
        padded = -(-heads // tp) * tp
        config["num_key_value_heads"] = padded if kv_heads == heads else kv_heads
        config["num_attention_heads"] = heads = padded
        kv_heads = config["num_key_value_heads"]
    if tp % kv_heads == 0 and heads % tp == 0:
        config["num_key_value_heads"] = max(kv_heads, tp)
    return transformers.LlamaConfig(**config)


def check_tensor_parallel(config, tp):
    if config.num_attention_heads % tp or config.num_key_value_heads % tp:
        raise SystemExit(f"error: {config.num_attention_heads} query and "
                         f"{config.num_key_value_heads} key/value heads do not split over --tp "
                         f"{tp}")


def start(tp, pp):
    """The process group and a ("pp", "dp", "tp") mesh when launched on several ranks (tp
    innermost: a tensor-parallel group's ranks are neighbouring NeuronCores); (None, dp 1)
    for a single process. Returns (mesh, rank, world, dp)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world % (tp * pp):
        raise SystemExit(f"error: {world} ranks do not divide into --tp {tp} x --pp {pp}; "
                         f"launch a multiple of {tp * pp} ranks")
    dp = world // (tp * pp)
    if world == 1:
        return None, 0, 1, 1
    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron")
    mesh = init_device_mesh("neuron", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    return mesh, dist.get_rank(), world, dp


def model_on_meta(config):
    """The whole model without memory: parameters on the meta device, shapes only."""
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config)


def parameter_count(model):
    """Parameters, without the input embedding (a lookup, not a matmul)."""
    return sum(p.numel() for p in model.parameters()) - model.model.embed_tokens.weight.numel()


class EmbeddingParallel(RowwiseParallel):
    """The embedding split by vocabulary, as Megatron's and NxD's vocabulary-parallel
    embeddings are: each rank looks up the ids in its rows, zeroes the others, and the ranks'
    outputs are summed (reduced to `output_layouts`). RowwiseParallel alone gives the same
    forward, but DTensor (PyTorch 2.13) has no row-sharded strategy for the embedding's
    backward: every rank would compute the whole vocabulary's gradient (for Llama 3, 2 GB in
    float32) and reduce-scatter it. Here each rank's gradient covers its own rows. The output's
    reduction is waited for at once: a pending one (an AsyncCollectiveTensor) entering a
    compiled layer makes PyTorch 2.13's backward fail."""

    def _apply(self, module, device_mesh):
        if module.padding_idx is not None:
            raise ValueError("EmbeddingParallel supports embeddings without padding_idx")
        module = super()._apply(module, device_mesh)
        module.forward = lambda ids: _vocabulary_parallel_lookup(module, ids)
        return module

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        if outputs.placements != output_layouts:
            outputs = outputs.redistribute(placements=output_layouts, async_op=False)
        return outputs.to_local() if use_local_output else outputs


def _local(tensor):
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _vocabulary_parallel_lookup(module, ids):
    weight = module.weight  # a DTensor split by rows, as torch.chunk splits (Shard(0))
    mesh = weight.device_mesh
    rows = -(-weight.shape[0] // mesh.size())
    first = min(mesh.get_local_rank() * rows, weight.shape[0])
    local_weight = weight.to_local()
    ids = _local(ids)
    elsewhere = (ids < first) | (ids >= first + local_weight.shape[0])
    local = F.embedding((ids - first).masked_fill(elsewhere, 0), local_weight)
    local = local.masked_fill(elsewhere.unsqueeze(-1), 0)
    return DTensor.from_local(local, mesh, [Partial()], run_check=False)


# Selective checkpointing's policy for a sequence-parallel projection: keep the matmul's output,
# recompute the rest (the all-gather of the input and its bf16 cast) in the backward pass.
_MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)


def _recompute_all_but_matmuls(ctx, op, *args, **kwargs):
    del ctx, args, kwargs
    return (torch.utils.checkpoint.CheckpointPolicy.MUST_SAVE if op in _MATMULS
            else torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE)


def _sequence_dim(t):
    """The dim the sequence is split along: 1 of [batch, sequence, hidden], or 0 of the
    [sequence, hidden] view of one sequence, whose shards are contiguous rows: moved without
    the copy that joining or splitting along dim 1 takes (Megatron keeps the sequence first for
    this)."""
    return (t[0], 0) if t.shape[0] == 1 else (t, 1)


def _all_gather_sequence(shard, group):
    t, dim = _sequence_dim(shard)
    whole = funcol.wait_tensor(funcol.all_gather_single(t.contiguous(), dim, group))
    return whole.unsqueeze(0) if dim == 0 else whole


def _reduce_scatter_sequence(whole, group):
    t, dim = _sequence_dim(whole)
    shard = funcol.wait_tensor(funcol.reduce_scatter_single(t.contiguous(), "sum", dim, group))
    return shard.unsqueeze(0) if dim == 0 else shard


class _GatherSequence(torch.autograd.Function):
    """The sequence shards all-gathered in the dtype the matmul reads (bf16 under autocast, as
    NxD's bf16 model moves them), the gradient, a partial sum over the ranks, reduce-scattered in
    the shard's dtype (float32 here, so the sum rounds as DTensor's would)."""

    @staticmethod
    def forward(ctx, shard, dtype, group):
        ctx.shard_dtype, ctx.group = shard.dtype, group
        return _all_gather_sequence(shard.to(dtype), group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_sequence(grad.to(ctx.shard_dtype), ctx.group), None, None


class _ScatterSequence(torch.autograd.Function):
    """A row-parallel projection's partial sums reduce-scattered into sequence shards; the
    gradient, split by sequence, all-gathered."""

    @staticmethod
    def forward(ctx, partial, group):
        ctx.group = group
        return _reduce_scatter_sequence(partial, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_sequence(grad, ctx.group), None


def _scatter_output(module, inputs, output):
    """Forward hook of o_proj and down_proj under sequence parallelism with coalesced
    projections: their Partial output becomes this rank's sequence shard by _ScatterSequence,
    where DTensor would split along dim 1 with a copy. A plain tensor, as RowwiseParallel
    returns its output by default: the residual stream between the blocks."""
    del module, inputs
    local = output.to_local(grad_placements=[Replicate()])
    return _ScatterSequence.apply(local, output.device_mesh.get_group())


def _gather_and_multiply(x, *weights):
    """The sequence-sharded input gathered, then one matmul with this rank's weight shards."""
    dtype = (torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type)
             else x.dtype)
    whole = _GatherSequence.apply(x.to_local(), dtype, x.device_mesh.get_group())
    return F.linear(whole, torch.cat(weights))


class CoalescedProjections:
    """Linears that read the same input (attention's q, k, v; the MLP's gate and up) run as one
    matmul of it with their weights concatenated, as NxD Training's Llama coalesces them
    (aws-neuron-sdk libraries/neuronx-distributed/tutorials/training_llama_tp_zero1.rst): the
    input is read once, one bf16 copy of it is saved for the backward, and its gradient is one
    matmul. The weights stay separate parameters (names, shards and initialisation unchanged):
    the model is the same, its results the separate projections' up to the order in which a
    matmul accumulates. The first projection called with a new input
    computes the product; each returns its slice. Under tensor parallelism each rank multiplies
    its own shards: the input's gradient is a partial sum, reduced where DTensor would.

    Given a sequence-sharded input (sequence parallelism; tensor_parallel(coalesced=True)), the
    projection gathers it itself and keeps only the shard for the backward pass, which gathers
    it again: Megatron's sequence parallelism (Korthikanti et al. 2022, section 4.2.2), whose
    activation memory per layer is sbh(34 + 5as/h)/t, as NxD states for its own
    (libraries/neuronx-distributed/activation_memory_reduction.rst). Saving the gathered input
    instead, as DTensor's SequenceParallel does, costs t times that input per projection. The
    gather moves the bf16 copy the matmul reads, not the float32 shard (_GatherSequence)."""

    def __init__(self, linears):
        if any(linear.bias is not None for linear in linears):
            raise ValueError("CoalescedProjections supports linears without bias")
        self.linears, self.input, self.parts = linears, None, None
        for index, linear in enumerate(linears):
            linear.forward = functools.partial(self.project, index)

    def project(self, index, x):
        if self.input is not x:
            weights = [_local(linear.weight) for linear in self.linears]
            if isinstance(x, DTensor) and x.placements[0].is_shard():
                product = torch.utils.checkpoint.checkpoint(
                    _gather_and_multiply, x, *weights, use_reentrant=False,
                    context_fn=functools.partial(
                        torch.utils.checkpoint.create_selective_checkpoint_contexts,
                        _recompute_all_but_matmuls))
            else:
                local = x.to_local(grad_placements=[Partial()]) if isinstance(x, DTensor) else x
                product = F.linear(local, torch.cat(weights))
            self.input, self.parts = x, product.split([w.shape[0] for w in weights], dim=-1)
        part = self.parts[index]
        if index == len(self.linears) - 1:  # the last reader: keep nothing past the layer
            self.input = self.parts = None
        weight = self.linears[index].weight
        if isinstance(weight, DTensor):  # a column shard of the output, as ColwiseParallel's
            return DTensor.from_local(part, weight.device_mesh, [Shard(-1)], run_check=False)
        return part


def coalesce_projections(model):
    """CoalescedProjections for every decoder layer's q/k/v and gate/up (after
    tensor_parallel, which shards them)."""
    for layer in model.model.layers:
        attention, mlp = layer.self_attn, layer.mlp
        CoalescedProjections([attention.q_proj, attention.k_proj, attention.v_proj])
        CoalescedProjections([mlp.gate_proj, mlp.up_proj])


def tensor_parallel(model, tp_mesh, logits, sequence_parallel=False, coalesced=False):
    """Megatron-style tensor parallelism: q, k, v, gate and up split by output features
    (Colwise), o and down by input features (Rowwise, an all-reduce after each), the
    embedding by vocabulary. `logits`: "sharded" leaves the lm_head's output a DTensor split
    by vocabulary (for loss_parallel), "replicated" all-gathers it. `sequence_parallel`
    (Megatron's too): between the blocks, activations and norms are split by sequence
    (Shard(1)); each all-reduce becomes a reduce-scatter, and an all-gather brings the whole
    sequence into attention and the MLP. The layers then see 1/tp of the sequence, so the
    model must be given the whole sequence's position ids. `coalesced`: the caller coalesces
    the projections next (coalesce_projections), and under sequence parallelism they gather
    the sequence themselves (CoalescedProjections), and o and down reduce-scatter it
    (_scatter_output), as Megatron's and NxD's layers do."""
    between = Shard(1) if sequence_parallel else Replicate()
    # The attention's and the MLP's input enters as one replicated DTensor, so the backward
    # adds the q, k and v (gate and up) input gradients before one reduction, as Megatron's
    # fused projections do, instead of reducing each; coalesced, it enters as it is.
    enters = between if coalesced else Replicate()
    layer_plan = {
        "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": between},
                                        desired_input_kwarg_layouts={"hidden_states": enters}),
        "mlp": PrepareModuleInput(input_layouts=(between,), desired_input_layouts=(enters,))}
    layer_plan.update({name: ColwiseParallel() for name in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
        "mlp.gate_proj", "mlp.up_proj")})
    scatters = sequence_parallel and coalesced  # by _scatter_output, after RowwiseParallel
    layer_plan.update({name: RowwiseParallel(output_layouts=Partial() if scatters else between,
                                             use_local_output=not scatters)
                       for name in ("self_attn.o_proj", "mlp.down_proj")})
    if sequence_parallel:
        layer_plan.update({name: SequenceParallel()
                           for name in ("input_layernorm", "post_attention_layernorm")})
    for layer in model.model.layers:
        parallelize_module(layer, tp_mesh, layer_plan)
        if scatters:
            for projection in (layer.self_attn.o_proj, layer.mlp.down_proj):
                projection.register_forward_hook(_scatter_output)
    plan = {}
    if model.model.embed_tokens is not None:
        plan["model.embed_tokens"] = EmbeddingParallel(input_layouts=Replicate(),
                                                       output_layouts=between)
    if model.lm_head is not None:
        if sequence_parallel:
            plan["model.norm"] = SequenceParallel()
        plan["lm_head"] = (ColwiseParallel(input_layouts=between, use_local_output=False)
                           if logits == "sharded" else
                           ColwiseParallel(input_layouts=between, output_layouts=Replicate()))
    parallelize_module(model, tp_mesh, plan)


def materialise(model, config, tp_mesh, first_layer=0):
    """Note [Initialising a model built on meta]: to_empty(device="neuron") allocates each
    rank's shard; then every weight is drawn as HF's _init_weights draws it (normal, std
    initializer_range; norms one). Each module is seeded by its place in the whole model (the
    embedding SEED, layer i SEED + 1 + i, lm_head after the last layer), so a pipeline
    stage draws the same weights as one process does. DTensor draws a row-sharded (Shard(0))
    weight as one device draws the whole tensor; o_proj and down_proj are sharded by columns
    (Shard(1)), so their transposes are drawn, which are sharded by rows: the weights are the
    same for any --tp and --pp, so a parallel run's losses are one process's."""
    device = torch.device("neuron", torch.neuron.current_device())
    model.to_empty(device=device)
    if tp_mesh is not None:  # DTensor's RNG tracker, without syncing seeds over the world
        dtensor_manual_seed(SEED, tp_mesh)
    std = config.initializer_range
    modules = [(SEED, model.model.embed_tokens)]
    modules += [(SEED + 1 + first_layer + i, layer) for i, layer in enumerate(model.model.layers)]
    modules += [(SEED + 1 + config.num_hidden_layers, model.lm_head)]
    with torch.no_grad():
        for seed, module in modules:
            if module is None:
                continue
            torch.manual_seed(seed)
            for name, sub in module.named_modules():
                if isinstance(sub, (nn.Linear, nn.Embedding)):
                    by_columns = name.endswith(("o_proj", "down_proj"))
                    nn.init.normal_(sub.weight.t() if by_columns else sub.weight, 0.0, std)
        for sub in model.modules():
            if isinstance(sub, LlamaRMSNorm):
                sub.weight.fill_(1.0)
    # The rotary embedding's frequencies are a buffer __init__ computes, not a parameter.
    model.model.rotary_emb = LlamaRotaryEmbedding(config).to(device)
    return device


class Timer:
    """Simulated device time between start() and stop(), in ms (neuron events on the current
    stream: the Trainium time the simulator predicts, not this machine's)."""

    def start(self):
        self.begin = torch.neuron.Event(enable_timing=True)
        self.end = torch.neuron.Event(enable_timing=True)
        self.begin.record()

    def stop(self):
        self.end.record()
        self.end.synchronize()
        return self.begin.elapsed_time(self.end)


def argument_parser(doc):
    """The examples' command line, with the options they share: the model's size, its number
    of layers, and the tensor-parallel degree."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--layers", type=int,
                        help="override the size's number of decoder layers")
    parser.add_argument("--tp", type=int, default=1)
    return parser


def memory_line(rank):
    """This rank's peak HBM and whether it fits its NeuronCore's."""
    peak = torch.neuron.max_memory_allocated()
    capacity = torch_neuron._C._instance_info()["hbm_bytes_per_core"]
    fits = "fits" if peak <= capacity else "does NOT fit"
    size = f"{peak / 2**30:.2f} GiB" if peak >= 2**30 else f"{peak / 2**20:.1f} MiB"
    return f"rank {rank}: peak HBM {size}, {fits} in the NeuronCore's {capacity / 2**30:.0f} GiB"


def host_line(began):
    import resource
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return f"(host: {time.time() - began:.1f} s wall, {rss:.2f} GiB peak RSS)"
