"""Scale anchors: AWS's published Llama training throughput and Llama inference latencies,
predicted through the virtual world (docs/scale.md) by the project's own examples run as a user
would run them (examples/llama_pretrain.py, examples/llama_generate.py; issue 26, item 8).

Each anchor's workload is one `python -m torch_neuron run --virtual ...` command with one
running rank; its prediction is the step time, time to first token or time per output token
the example prints. The examples are not AWS's code: each anchor's note says what its run does
differently from AWS's (the examples' flags are used as they are, never tuned to a row).

Every row of the trn1 decoder latency table (batch 1) and of its throughput table (the same
models at batch 4 or 8) is an anchor: the Llama-3, Llama-2, Mistral and CodeLlama rows with
bf16 weights count, the Llama-3-8B rows are excluded (their weights are stored as int8, which
the examples cannot do) and still predicted. The training table's
Llama-3.1-70B row (TP=32 DP=4 PP=8 ZeRO-1, 256 micro-batches a step, as NxD's
run_llama3_70B_tp_pp.sh runs it; one running rank per stage) is excluded and still predicted:
the layout as AWS ran it, with selective recomputation, does not fit in 16 GiB of HBM here
(FULL_RECOMPUTATION), so the example recomputes every layer."""

import functools
import math

from torch_neuron.fidelity import scale_workloads as s
from torch_neuron.fidelity.anchor import EXCLUDED, Anchor

SDK = "github.com/aws-neuron/aws-neuron-sdk@81ce03ae"
TRAINING = (f"{SDK} about-neuron/benchmarks/trn1/training_data_decoder.csv ({{model}} "
            "pre-training, trn1.32xlarge/trn1n.32xlarge, Autocast:BF16+FP32Optimizer, AdamW, "
            "{nodes} nodes, {topology}, microbatch 1, global batch 1024, sequence 8192, "
            "{seq_per_s} seq/s, Neuron 2.24.0, NxD)")
TRN1_LATENCY = (f"{SDK} about-neuron/benchmarks/trn1/latency_data_decoder.csv ({{model}}, "
                "Transformers NeuronX, TP 32, batch 1, sequence length {seq}, input {inp}, "
                "output {out}, FP16 with Matmult-BF16, weights {weights}, Neuron {release}: "
                "TTFT P50 {ttft} ms, TPOT P50 {tpot} ms)")
TRN1_THROUGHPUT = (f"{SDK} about-neuron/benchmarks/trn1/throughput_data_decoder.csv "
                   "({model}, Transformers NeuronX, TP 32, batch {batch}, sequence length {seq}, "
                   "input {inp}, output {out}, FP16 with Matmult-BF16, weights {weights}, Neuron "
                   "{release}: TTFT P50 {ttft} ms, TPOT P50 {tpot} ms)")
TRN2_LATENCY = ("github.com/aws-neuron/aws-neuron-sdk@ba1c08b0 libraries/nxd-inference/"
                "tutorials/llama70b_perf_comparison.csv, 'No speculative decoding' (Llama-3.3-"
                "70B-Instruct, trn2.48xlarge, TP 64 at LNC=2, batch 1, LLMPerf with 10,000 "
                "input and 1,500 output tokens, one request at a time, BF16; "
                "tutorials/trn2-llama3.3-70b-tutorial.rst: TTFT P50 814.2 ms, TPOT P50 19.6 ms; "
                "the first version of the table, @06f33784, gave 575.6 ms and 19.8 ms)")

# Only with --kind scale or --anchor (Note [On-request anchors] in anchor.py): minutes each.
ON_REQUEST = True

TRAINING_DIFFERENCES = (
    "eager (PyTorch 2.13 cannot compile checkpointed tensor-parallel layers), AWS compiled "
    "with XLA; ZeroRedundancyOptimizer (its step broadcasts each rank's updated shard) where NxD's "
    "ZeRO-1 all-gathers; Hugging Face's LlamaForCausalLM, not NxD's model (its q/k/v and gate/up "
    "projections coalesced and attention recomputed in the backward pass, as the NxD "
    "tutorial's are)")
INFERENCE_DIFFERENCES = (
    "Hugging Face's LlamaForCausalLM compiled with torch.compile(backend=\"neuron\") into one "
    "prefill and one decode graph (AWS: Transformers NeuronX or NxD Inference graphs of their "
    "own models); the prefill over a StaticCache of prompt + 4 positions, the decode steps over "
    "a cache as long as the row's mean token-generation bucket (--cache-len); TPOT the mean of "
    "3 decode steps after a warm-up generation")


# Why the 70B row runs with full recomputation, which makes it an excluded row: measured on
# the 2-core machine (2026-12-06) with 8 and 16 micro-batches a step.
FULL_RECOMPUTATION = (
    "AWS's layout with selective recomputation does not fit in 16 GiB here: PyTorch's pipeline "
    "stages allocate every micro-batch's receive buffers before the first runs (16 MiB a "
    "micro-batch on a middle stage), on top of a first stage that peaks at 15.16 GiB with 16 "
    "micro-batches (8 in flight under 1F1B, each layer's activations about 145 MB, twice the "
    "34sbh/t NxD states for its own); so every layer is recomputed, a forward pass more than "
    "AWS ran")


def _training(name, size, nodes, tp, pp, seq_per_s, topology, run_ranks, on_request,
              checkpointing="selective", **status):
    dp = nodes * 32 // (tp * pp)
    run = ("llama_pretrain.py", nodes, 32, "trn1.32xlarge", run_ranks,
           ("--size", size, "--tp", str(tp), "--pp", str(pp), "--sequence-parallel",
            "--activation-checkpointing", checkpointing, "--coalesce-projections", "--seq",
            "8192", "--global-batch", "1024", "--micro-batch", "1", "--steps", "2"))
    model = {"8b": "Llama-3.1-8B", "70b": "Llama-3.1-70B"}[size]
    pipeline = (f"; a pipeline of {pp} stages run by PyTorch's Schedule1F1B, the data-parallel "
                "gradients averaged after it" if pp > 1 else "")
    return [Anchor(
        name, "scale", "trn1.32xlarge",
        f"examples/llama_pretrain.py {size} virtual, {nodes} x 32 ranks, TP {tp} PP {pp} "
        f"DP {dp} (ZeRO-1), sequence parallel, {checkpointing} recomputation, sequence 8192, "
        "global batch 1024",
        1024 / seq_per_s * 1e3, "ms",
        TRAINING.format(model=model, nodes=nodes, topology=topology, seq_per_s=seq_per_s),
        functools.partial(s.step_ms, run), measured_as="eager",
        note=f"one step of 1024 sequences at {seq_per_s} seq/s; the example differs: "
        f"{TRAINING_DIFFERENCES}{pipeline}; trn1.32xlarge assumed of the two instance types "
        "the row names (trn1n.32xlarge has twice the EFA bandwidth)",
        worker=name, on_request=on_request, **status)]


# Note [Decode cache buckets]: a serving stack compiles its decode graph for a few cache
# lengths (buckets) and runs each step in the smallest that holds the step's positions, attending
# over the whole bucket. Transformers NeuronX (the trn1 rows, Neuron 2.18) makes its
# token-generation buckets powers of two from 128, and the sequence length
# (transformers-neuronx@0623de2 src/transformers_neuronx/bucket.py token_sizes,
# utils.py power_of_two_bucket_sizes; a step of position q runs in the first bucket >= q + 1,
# decoder.py find_bucket_id); NxD Inference (the trn2 row) powers of two from 128 below
# 2^round(log2(seq_len)), and seq_len (neuronx-distributed-inference
# src/neuronx_distributed_inference/modules/autobucketing.py generate_buckets). A row's decode
# steps run at its mean bucket: a step's time grows linearly with the positions it attends
# over, so the mean bucket's step takes the mean step's time. (The trn1 tables give a TPOT P50
# without naming its population, steps or requests; the mean stands for either.)
def token_buckets_tnx(seq: int) -> list[int]:
    buckets, size = [], 128
    while size < seq:
        buckets.append(size)
        size *= 2
    return buckets + [seq]


def token_buckets_nxdi(seq: int) -> list[int]:
    return [2 ** i for i in range(7, round(math.log2(seq)))] + [seq]


def mean_decode_bucket(buckets: list[int], prompt: int, out: int) -> int:
    """The mean cache length of the decode steps that produce output tokens 2..out (the first
    comes from the prefill): the step at position q attends over the first bucket >= q + 1."""
    steps = [next(b for b in buckets if b >= q + 1) for q in range(prompt, prompt + out - 1)]
    return round(sum(steps) / len(steps))


def _latency(prefix, instance, nproc, tp, size, prompt, ttft, tpot, source, note, cache_len,
             on_request=True, positions=None, attention="sdpa", batch=1, env=(), **status):
    # Compiled, as AWS measured it (a prefill and a decode graph): 2-3 minutes of wall time
    # for the 70B model on the 2-core machine lightly loaded, against 10-25 s eager.
    run = ("llama_generate.py", 1, nproc, instance, "0",
           ("--size", size, "--tp", str(tp), "--prompt-len", str(prompt), "--new-tokens", "4",
            "--cache-len", str(max(cache_len, prompt + 4)), "--compile", "--attention",
            attention)
           + (("--batch", str(batch)) if batch > 1 else ())
           + (("--positions", str(positions)) if positions else ()),
           env)
    workload = (f"examples/llama_generate.py {size} virtual, TP {tp} on {instance}, "
                f"{f'batch {batch}, ' if batch > 1 else ''}prompt {prompt} tokens, compiled, "
                f"{attention} attention"
                + "".join(f", {name}={value}" for name, value in env))
    worker = (f"{size}-tp{tp}-{instance}-{f'batch{batch}-' if batch > 1 else ''}"
              f"prompt{prompt}-cache{cache_len}")  # the run's anchors share it
    kw = dict(note=f"{note}; the example differs: {INFERENCE_DIFFERENCES}", worker=worker,
              on_request=on_request, measured_as="compiled", **status)
    return [Anchor(f"{prefix}-ttft", "scale", instance, workload + ", time to first token",
                   ttft, "ms", source, functools.partial(s.first_token_ms, run), **kw),
            Anchor(f"{prefix}-tpot", "scale", instance, workload + ", time per output token",
                   tpot, "ms", source, functools.partial(s.per_token_ms, run), **kw)]


# The trn1 decoder table's models as the examples' --size names them (examples/llama_common.py).
TRN1_SIZES = {"Llama-3-8B": "llama3-8b", "Llama-3-70B": "70b", "Llama-2-7b": "llama2-7b",
              "Llama-2-13b": "llama2-13b", "Llama-2-70b": "llama2-70b",
              "Mistral-7B-Instruct-v0.2": "mistral-7b", "CodeLlama-13b-hf": "codellama-13b"}
# Heads that do not split over TP 32 (Llama-2-13b's and CodeLlama-13b's 40) are padded to 64
# in the example, as NxD's pad_model pads them; the table does not say how Transformers NeuronX
# ran them (its developer guide asks for heads divisible by the TP degree).
PADDED_HEADS = ("Llama-2-13b", "CodeLlama-13b-hf")
INT8_WEIGHTS = ("weights stored as int8 (the table's Weight Storage Data Type), which halves "
                "the bytes a decode step reads; the example stores bf16")
# The table's rows are Neuron 2.18. Transformers NeuronX gained its flash attention kernel in
# 2.19 (aws-neuron-sdk@81ce03ae release-notes/prev/rn.rst, "Neuron 2.19.0 (07/03/2024)": "Flash
# Attention kernel support in the Transformers NeuronX library enables LLM inference for
# context lengths of up to 32k"), so these rows ran attention as its matmuls and softmax, the
# scores of every head through HBM: the example's --attention eager.
TNX_218_ATTENTION = ("attention as matmul, softmax and matmul (--attention eager): "
                     "Transformers NeuronX had no flash attention kernel before Neuron 2.19")


# The rows' runtime (Neuron 2.18: runtime-lib 2.20) ran a TP-32 group's all-reduces as Ring
# (trnsim Note [Collective algorithms by release]); the runs model its algorithms.
TNX_218_COLLECTIVES = (("TORCH_NEURON_COLLECTIVE_ALGORITHMS", "neuron-2.18"),)


def _trn1(model, seq, inp, out, ttft, tpot, weights, release, positions=None, batch=1):
    """A row of the latency table (batch 1) or of the throughput table (batch 4 or 8)."""
    prefix = f"{model.lower()}-trn1-tp32-{f'b{batch}-' if batch > 1 else ''}in{inp}-out{out}"
    table = TRN1_THROUGHPUT if batch > 1 else TRN1_LATENCY
    source = table.format(model=model, seq=seq, inp=inp, out=out, weights=weights,
                          release=release, ttft=ttft, tpot=tpot, batch=batch)
    cache_len = mean_decode_bucket(token_buckets_tnx(seq), inp, out)
    note = (f"AWS's KV cache holds {seq} positions and TPOT is over {out} output tokens, the "
            f"steps' mean bucket {cache_len} positions (Note [Decode cache buckets]); "
            f"{TNX_218_ATTENTION}; collectives as Neuron 2.18's runtime ran them (Ring for 32 "
            "ranks: Note [Collective algorithms by release])")
    if model in PADDED_HEADS:
        note += "; 40 heads padded to 64 over TP 32, as NxD's pad_model pads them"
    if positions:
        note += f"; the model's positions raised to the row's {positions} (its config has fewer)"
    status = dict(status=EXCLUDED, reason=INT8_WEIGHTS) if weights == "int8" else {}
    return _latency(prefix, "trn1.32xlarge", 32, 32, TRN1_SIZES[model], inp, ttft, tpot, source,
                    note=note, cache_len=cache_len, positions=positions, attention="eager",
                    batch=batch, env=TNX_218_COLLECTIVES, **status)


ANCHORS = (
    _training("llama-3.1-8b-pretrain-32-nodes", "8b", 32, 32, 1, 47.95,
              "TP=32 DP=32 PP=1 ZeRO-1", "0", ON_REQUEST)
    # Ranks are (pp, dp, tp), tp fastest: each stage's first rank is a multiple of dp x tp.
    + _training("llama-3.1-70b-pretrain-32-nodes", "70b", 32, 32, 8, 7.94, "TP=32 DP=4 PP=8",
                ",".join(str(stage * 4 * 32) for stage in range(8)), ON_REQUEST,
                checkpointing="full", status=EXCLUDED, reason=FULL_RECOMPUTATION)
    # The table's rows in its order (sequence length, input, output, TTFT and TPOT P50 in
    # ms, weight storage, Neuron release); rows of a model with the same input length share
    # one run.
    + _trn1("Llama-3-8B", 8192, 128, 8064, 17.09, 7.03, "int8", "2.18.1")
    + _trn1("Llama-3-8B", 8192, 4096, 4096, 153.02, 7.04, "int8", "2.18.1")
    + _trn1("Llama-3-8B", 4096, 128, 3968, 14.75, 5.86, "int8", "2.18.1")
    + _trn1("Llama-3-70B", 4096, 2048, 2048, 547, 26.2, "bf16", "2.18.1")
    + _trn1("Llama-3-70B", 1152, 128, 1024, 53.2, 24.48, "bf16", "2.18.1")
    + _trn1("Llama-3-70B", 256, 128, 128, 52.53, 26.48, "bf16", "2.18.1")
    + _trn1("Llama-2-7b", 8192, 128, 8064, 13.32402229, 6.69956207, "bf16", "2.18.0",
            positions=8192)
    + _trn1("Llama-2-13b", 8192, 4096, 4096, 864.1381264, 9.84406471, "bf16", "2.18.0",
            positions=8192)
    + _trn1("Llama-2-13b", 16384, 8192, 8192, 2367.928505, 13.40842247, "bf16", "2.18.0",
            positions=16384)
    + _trn1("Llama-2-70b", 256, 128, 128, 53.91026, 25.18129, "bf16", "2.18.0")
    + _trn1("Llama-2-70b", 512, 256, 256, 81.882, 25.26712, "bf16", "2.18.0")
    + _trn1("Llama-2-70b", 1152, 128, 1024, 57.75213, 25.44856, "bf16", "2.18.0")
    + _trn1("Llama-2-70b", 2048, 1024, 1024, 232.47981, 26.03793, "bf16", "2.18.0")
    + _trn1("Llama-2-70b", 3072, 1024, 2048, 236.78207, 26.62468, "bf16", "2.18.0")
    + _trn1("Llama-2-70b", 4096, 2048, 2048, 690.95588, 26.85046, "bf16", "2.18.0")
    + _trn1("Mistral-7B-Instruct-v0.2", 16384, 8192, 8192, 1322.874308, 9.89246368, "bf16",
            "2.18.0")
    + _trn1("CodeLlama-13b-hf", 8192, 4096, 4096, 868.635416, 9.86456871, "bf16", "2.18.0")
    + _trn1("CodeLlama-13b-hf", 16384, 8192, 8192, 2372.928381, 13.3998394, "bf16", "2.18.0")
    # The throughput table's rows, the same models at batch 4 or 8 (batch, sequence length,
    # input, output, TTFT and TPOT P50 in ms, weight storage, Neuron release).
    + _trn1("Llama-3-8B", 8192, 128, 8064, 55.16, 9.95, "int8", "2.18.1", batch=8)
    + _trn1("Llama-3-8B", 8192, 4096, 4096, 1265.95, 10.04, "int8", "2.18.1", batch=8)
    + _trn1("Llama-3-8B", 4096, 128, 3968, 49.05, 7.65, "int8", "2.18.1", batch=8)
    + _trn1("Llama-3-70B", 4096, 2048, 2048, 1661.12, 32.33, "bf16", "2.18.1", batch=4)
    + _trn1("Llama-3-70B", 1152, 128, 1024, 129.86, 28.38, "bf16", "2.18.1", batch=4)
    + _trn1("Llama-3-70B", 256, 128, 128, 130.37, 28.08, "bf16", "2.18.1", batch=4)
    + _trn1("Llama-2-7b", 8192, 128, 8064, 66.4024353, 10.09511948, "bf16", "2.18.0",
            positions=8192, batch=8)
    + _trn1("Llama-2-13b", 8192, 4096, 4096, 6668.70475, 19.85741, "bf16", "2.18.0",
            positions=8192, batch=8)
    + _trn1("Llama-2-13b", 16384, 8192, 8192, 4628.44729, 21.09194, "bf16", "2.18.0",
            positions=16384, batch=4)
    + _trn1("Llama-2-70b", 256, 128, 128, 156.84581, 26.72362, "bf16", "2.18.0", batch=4)
    + _trn1("Llama-2-70b", 512, 256, 256, 270.15853, 26.9084, "bf16", "2.18.0", batch=4)
    + _trn1("Llama-2-70b", 1152, 128, 1024, 156.68869, 27.21453, "bf16", "2.18.0", batch=4)
    + _trn1("Llama-2-70b", 2048, 1024, 1024, 1478.64008, 28.55039, "bf16", "2.18.0", batch=4)
    + _trn1("Llama-2-70b", 3072, 1024, 2048, 1478.84846, 31.67439, "bf16", "2.18.0", batch=4)
    + _trn1("Llama-2-70b", 4096, 2048, 2048, 2722.03422, 31.78978, "bf16", "2.18.0", batch=4)
    + _trn1("Mistral-7B-Instruct-v0.2", 16384, 8192, 8192, 8614.85291, 15.43713, "bf16",
            "2.18.0", batch=8)
    + _trn1("CodeLlama-13b-hf", 8192, 4096, 4096, 6625.1595, 19.91653, "bf16", "2.18.0",
            batch=8)
    + _trn1("CodeLlama-13b-hf", 16384, 8192, 8192, 4626.17469, 21.09528, "bf16", "2.18.0",
            batch=4)
    # In the CI set (scripts/fidelity.sh): one compiled run, 165 s of wall time on the 2-core
    # machine lightly loaded.
    + _latency("llama-3.3-70b-trn2-tp64-in10000", "trn2.48xlarge", 64, 64, "70b", 10000,
               814.2, 19.6, TRN2_LATENCY,
               note="AWS's run compiles context-encoding buckets of 2048/4096/8192/12288 "
               "tokens (10,000 input tokens run in the 12,288 bucket) with sequence "
               "parallelism, fused QKV and NKI attention/MLP kernels, and samples on device; "
               "TPOT is the mean over 1,500 output tokens, through vLLM, whose steps all run "
               "in the 12,800-position bucket (Note [Decode cache buckets])",
               cache_len=mean_decode_bucket(token_buckets_nxdi(12800), 10000, 1500),
               on_request=False)
)
