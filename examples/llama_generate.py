"""Tensor-parallel Llama decoding on simulated Trainium: time to first token and per output token.

    python examples/llama_generate.py --size tiny
    python -m torch_neuron run --nproc-per-node 2 examples/llama_generate.py --size tiny --tp 2
    TORCH_NEURON_EXECUTE=0 python examples/llama_generate.py --size 8b --layers 2

Hugging Face's LlamaForCausalLM with random bf16 weights, built on the meta device and
materialised on neuron (examples/llama_common.py), its projections sharded over --tp ranks with
parallelize_module. Greedy decoding, our own loop over model(...): generate() stops when every
sequence has ended, which reads token values that predict-only mode does not compute. The
tokens never steer the loop, so it runs the same in predict-only mode (TORCH_NEURON_EXECUTE=0).
The KV cache is a StaticCache of prompt + new tokens, as Neuron serves models: fixed-shape
graphs over a preallocated cache (NxD Inference), so --compile compiles one prefill and one
decode graph. --cache-len N runs the decode steps over a cache of N positions instead, the
prefill's keys and values copied into it: a serving stack's decode graph attends over its whole
cache bucket, however few positions are filled (the tokens do not change). Times are neuron
events (simulated Trainium time) of a second generation, after a warm-up one. Attention is
one fused op (--attention sdpa, flash attention, as NxD Inference runs it); --attention eager
runs Hugging Face's matmul, softmax and matmul, whose scores go through HBM, as attention ran
on Neuron before its flash attention kernels (Neuron 2.19).
"""

import time

began = time.time()  # the host wall time printed at the end includes the imports


import torch  # noqa: E402
import transformers  # noqa: E402

import llama_common as common  # noqa: E402
import torch_neuron  # noqa: E402

parser = common.argument_parser(__doc__)
parser.add_argument("--batch", type=int, default=1)
parser.add_argument("--prompt-len", type=int, default=32)
parser.add_argument("--new-tokens", type=int, default=8)
parser.add_argument("--compile", action="store_true")
parser.add_argument("--positions", type=int, help="the model's maximum positions, where the "
                    "size's config has fewer than a run needs (rotary embeddings extend)")
parser.add_argument("--cache-len", type=int, help="positions of the KV cache the decode steps "
                    "attend over (default: prompt + new tokens, at least that)")
parser.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa",
                    help="sdpa: one fused attention op (flash attention); eager: matmul, "
                    "softmax, matmul, the scores through HBM")
args = parser.parse_args()

config = common.llama_config(args.size, args.layers, args.tp, positions=args.positions,
                             attention=args.attention)
common.check_tensor_parallel(config, args.tp)
mesh, rank, world, dp = common.start(args.tp, 1)
if dp != 1:
    raise SystemExit(f"error: launch --tp {args.tp} ranks, not {world}")
if args.new_tokens < 2 or args.prompt_len + args.new_tokens > config.max_position_embeddings:
    raise SystemExit("error: --new-tokens must be at least 2, and the prompt and new tokens "
                     f"at most the model's {config.max_position_embeddings} positions")
filled = args.prompt_len + args.new_tokens
cache_len = args.cache_len or filled
if not filled <= cache_len <= config.max_position_embeddings:
    raise SystemExit(f"error: --cache-len must be at least the prompt and new tokens ({filled}) "
                     f"and at most the model's {config.max_position_embeddings} positions")

model = common.model_on_meta(config).to(torch.bfloat16).eval()
if args.tp > 1:
    common.tensor_parallel(model, mesh["tp"], logits="replicated")
device = common.materialise(model, config, mesh["tp"] if args.tp > 1 else None)
forward = torch.compile(model, backend="neuron") if args.compile else model
prompt = torch.randint(0, config.vocab_size, (args.batch, args.prompt_len),
                       generator=torch.Generator().manual_seed(1)).to(device)


def grown(cache, positions):
    """A StaticCache of `positions` holding what `cache` holds (Hugging Face's StaticLayer
    allocates its tensors on first use; here from the filled cache's)."""
    if positions == filled:
        return cache
    bigger = transformers.StaticCache(config=config, max_cache_len=positions)
    for old, new in zip(cache.layers, bigger.layers):
        new.lazy_initialization(old.keys, old.values)
        new.keys[:, :, :old.max_cache_len].copy_(old.keys)
        new.values[:, :, :old.max_cache_len].copy_(old.values)
        new.cumulative_length.copy_(old.cumulative_length)
    return bigger


@torch.no_grad()
def generate():
    """Greedy tokens, the time to the first one and the mean time of each later one (ms)."""
    cache = transformers.StaticCache(config=config, max_cache_len=filled)
    timer = common.Timer()
    timer.start()
    logits = forward(input_ids=prompt, cache=cache, use_cache=True, logits_to_keep=1).logits
    tokens = [logits[:, -1].argmax(-1, keepdim=True)]
    first_ms = timer.stop()
    cache = grown(cache, cache_len)  # not timed: a serving stack's graphs share one cache
    timer.start()
    for _ in range(args.new_tokens - 1):
        logits = forward(input_ids=tokens[-1], cache=cache, use_cache=True).logits
        tokens.append(logits[:, -1].argmax(-1, keepdim=True))
    per_token_ms = timer.stop() / (args.new_tokens - 1)
    return torch.cat(tokens, dim=1), first_ms, per_token_ms


generate()  # warm-up (and compilation with --compile)
tokens, first_ms, per_token_ms = generate()
if rank == 0:
    info = torch_neuron._C._instance_info()
    print(f"Llama {args.size}: {config.num_hidden_layers} layers, {config.num_key_value_heads} "
          f"key/value heads, bf16, tensor parallel over "
          f"{args.tp} NeuronCores of a {info['name']}; batch {args.batch}, prompt "
          f"{args.prompt_len} tokens, {args.new_tokens} new tokens, decoding over a cache of "
          f"{cache_len} positions{', compiled' if args.compile else ''}", flush=True)
    if torch_neuron.get_execute():
        print(f"tokens: {tokens.cpu().tolist()}", flush=True)
    print(f"time to first token: {first_ms:.3f} ms; per output token: {per_token_ms:.3f} ms "
          f"({1e3 * args.batch / per_token_ms:.1f} tokens/s)", flush=True)
print(common.memory_line(rank), flush=True)
if rank == 0:
    print(common.host_line(began), flush=True)
if mesh is not None:
    torch.distributed.destroy_process_group()
