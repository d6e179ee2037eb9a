"""examples/llama_pretrain.py and examples/llama_generate.py run as users run them: alone, and
on 2 ranks under `python -m torch_neuron run`; their printed lines parse, agree with each
other and with numbers computed here, and a parallel run trains the same losses as one
process (the examples seed every weight and micro-batch by its place in the whole job).

Tolerances: pipeline parallel and ZeRO-1 data parallel losses are bit for bit one process's
(the same kernels on the same bytes; measured: equal). Tensor parallel, with and without
sequence parallel: relative 5e-5. Under bf16 autocast a rowwise-parallel projection rounds
each rank's partial product to bf16 before the all-reduce (or reduce-scatter) where one
device rounds the whole sum once (measured: 1e-5 relative). The check still tells the
weights apart: another seed's initial loss differs by 5e-4 relative.

Times (2-core machine): the one-process run 5-10 s; each 2-rank launch 10-30 s, each 4-rank
launch 15-25 s; all extended.
"""

import os
import re
import sys

import pytest
import torch

from conftest import run_process_group

transformers = pytest.importorskip("transformers", reason="install with scripts/install.sh")

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PRETRAIN = os.path.join(REPO, "examples", "llama_pretrain.py")
GENERATE = os.path.join(REPO, "examples", "llama_generate.py")
TIMEOUT = 180
# llama_pretrain.py's defaults: sequence 64, global batch 8, 3 steps (the first a warm-up).
SEQ, GLOBAL_BATCH, STEPS = 64, 8, 3

STEP = re.compile(r"^step (\d+)  loss (\S+)  time ([\d.]+) ms", re.M)
THROUGHPUT = re.compile(r"^throughput: ([\d.]+) sequences/s, (\d+) tokens/s, MFU ([\d.]+)%", re.M)
MEMORY = re.compile(r"^rank (\d+): peak HBM ([\d.]+ [MG]iB), (fits|does NOT fit) in", re.M)
LATENCY = re.compile(r"^time to first token: ([\d.]+) ms; per output token: ([\d.]+) ms", re.M)


def hbm_bytes(size):
    number, unit = size.split()
    return float(number) * (2**30 if unit == "GiB" else 2**20)


def run(script, *args, ranks=1, env=None):
    launcher = ([sys.executable, "-m", "torch_neuron", "run", "--nproc-per-node", str(ranks)]
                if ranks > 1 else [sys.executable])
    result = run_process_group([*launcher, script, "--size", "tiny", *args], env=env,
                               timeout=TIMEOUT)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def losses(stdout):
    steps = STEP.findall(stdout)
    assert [int(s[0]) for s in steps] == list(range(STEPS)), stdout  # one printing rank
    return [float(s[1]) for s in steps]


def tiny_parameters():
    """(all parameters, without the input embedding) of the tiny size, counted on meta."""
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=4, num_attention_heads=8,
                                      num_key_value_heads=4)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    total = sum(p.numel() for p in model.parameters())
    return total, total - model.model.embed_tokens.weight.numel()


@pytest.fixture(scope="module")
def one_process():  # about 5 s
    return run(PRETRAIN)


@pytest.mark.extended  # about 9 s with the fixture's run
def test_pretrain_one_process(one_process):
    import torch_neuron

    out = one_process
    values = losses(out)
    assert all(4 < v < 7 for v in values), values  # about ln(256) = 5.5 at random init
    times = [float(s[2]) for s in STEP.findall(out)][1:]  # after the warm-up
    seqs, tokens, mfu = map(float, THROUGHPUT.search(out).groups())
    step_s = sum(times) / len(times) / 1e3
    assert seqs == pytest.approx(GLOBAL_BATCH / step_s, rel=1e-3)
    assert tokens == pytest.approx(GLOBAL_BATCH * SEQ / step_s, rel=1e-3)
    peak = torch_neuron._C._instance_info()["peak_bf16_tflops_per_core"] * 1e12
    total, n = tiny_parameters()
    flops_per_token = 6 * n + 12 * 4 * 8 * 8 * SEQ  # PaLM's 6N + 12 L H Q T
    assert mfu == pytest.approx(100 * flops_per_token * tokens / peak, rel=1e-2, abs=0.01)
    # At least float32 weights, gradients and AdamW's two moments: 16 bytes a parameter.
    ((rank, size, fits),) = MEMORY.findall(out)
    assert rank == "0" and hbm_bytes(size) >= 16 * total and fits == "fits", (total, out)


@pytest.fixture(scope="module")
def tensor_parallel():  # 10-20 s
    return run(PRETRAIN, "--tp", "2", ranks=2)


@pytest.mark.extended  # a 2-rank launch (module docstring)
@pytest.mark.parametrize("options", [(), ("--sequence-parallel",), (
    "--sequence-parallel", "--coalesce-projections", "--activation-checkpointing", "selective")])
def test_pretrain_tensor_parallel_matches_one_process(one_process, tensor_parallel, options):
    """The last case is the layout of the fidelity suite's Llama-3.1-8B anchor: coalesced
    projections multiply each rank's shards (their input gradient a partial sum reduced across
    the ranks), and the vocabulary-parallel embedding's gradient covers each rank's rows."""
    out = run(PRETRAIN, "--tp", "2", *options, ranks=2) if options else tensor_parallel
    assert "2 ranks = tp 2 x pp 1 x dp 1" in out, out
    torch.testing.assert_close(torch.tensor(losses(out), dtype=torch.float64),
                               torch.tensor(losses(one_process), dtype=torch.float64),
                               rtol=5e-5, atol=0)
    assert sorted(r for r, _, _ in MEMORY.findall(out)) == ["0", "1"]
    assert THROUGHPUT.search(out), out


@pytest.mark.extended  # a one-process run and a 2-rank launch
def test_sequence_parallel_micro_batches_of_one_sequence_match_one_process():
    """A micro-batch of one sequence takes the other path of the sequence-parallel
    projections (its shards moved as contiguous rows, llama_common._sequence_dim), the one the
    fidelity suite's Llama runs take: the same losses as one process, as in the test above."""
    options = ("--micro-batch", "1")
    alone = run(PRETRAIN, *options)
    out = run(PRETRAIN, "--tp", "2", "--sequence-parallel", "--coalesce-projections",
              "--activation-checkpointing", "selective", *options, ranks=2)
    torch.testing.assert_close(torch.tensor(losses(out), dtype=torch.float64),
                               torch.tensor(losses(alone), dtype=torch.float64),
                               rtol=5e-5, atol=0)


@pytest.mark.extended  # three one-process runs, about 5 s each
def test_pretrain_recomputation_and_coalescing_keep_the_losses(one_process):
    """--activation-checkpointing recomputes in the backward pass what the forward computed,
    each decoder layer (full) or attention's softmax(QK^T)V (selective): the losses are those
    of keeping every activation, bit for bit, and recomputing costs simulated time, full more
    than selective. --coalesce-projections runs q/k/v and gate/up as one matmul each: under
    bf16 autocast the wider matmul rounds as the separate ones do up to accumulation order
    (measured: 5e-6 relative), and the step is faster (fewer, larger matmuls; one cast of
    their input instead of three)."""
    def step_ms(out):
        return float(STEP.findall(out)[-1][2])

    full = run(PRETRAIN, "--activation-checkpointing")
    selective = run(PRETRAIN, "--activation-checkpointing", "selective")
    coalesced = run(PRETRAIN, "--coalesce-projections")
    assert losses(full) == losses(selective) == losses(one_process)
    assert step_ms(one_process) < step_ms(selective) < step_ms(full), (one_process, selective)
    torch.testing.assert_close(torch.tensor(losses(coalesced), dtype=torch.float64),
                               torch.tensor(losses(one_process), dtype=torch.float64),
                               rtol=5e-5, atol=0)
    assert step_ms(coalesced) < step_ms(one_process), coalesced


@pytest.mark.extended  # a 2- or 4-rank launch each (module docstring)
@pytest.mark.parametrize("layout, args, ranks", [
    ("tp 1 x pp 2 x dp 1", ["--pp", "2"], 2), ("tp 1 x pp 1 x dp 2 (zero1)", [], 2),
    ("tp 1 x pp 2 x dp 2 (zero1)", ["--pp", "2"], 4)])
def test_pretrain_pipeline_and_zero1_match_one_process(one_process, layout, args, ranks):
    """The last layout averages a pipeline stage's gradients after the schedule (DDP cannot
    wrap a stage): the same losses as one process, bit for bit (measured: equal)."""
    out = run(PRETRAIN, *args, ranks=ranks)
    assert layout in out, out
    assert losses(out) == losses(one_process)
    assert THROUGHPUT.search(out), out


@pytest.mark.extended  # 4 ranks, 15-25 s each
@pytest.mark.parametrize("layout, args", [("tp 2 x pp 2 x dp 1", ["--pp", "2"]),
                                          ("tp 2 x pp 1 x dp 2 (zero1)", [])])
def test_pretrain_3d_layouts_match_tensor_parallel(tensor_parallel, layout, args):
    """Pipeline stages and ZeRO-1 on top of TP=2 add no rounding of their own: the losses
    are the 2-rank TP run's, bit for bit (measured: equal)."""
    out = run(PRETRAIN, "--tp", "2", *args, ranks=4)
    assert layout in out, out
    assert losses(out) == losses(tensor_parallel)


@pytest.mark.extended  # a 2-rank launch (module docstring)
def test_pretrain_fsdp_trains():
    """FSDP2 shards o_proj and down_proj by rows, so their initial weights are another (equally
    distributed) draw than one process's (llama_common.py, Note [Initialising a model built
    on meta]): the losses are checked to be a random init's, not equal."""
    out = run(PRETRAIN, "--dp", "fsdp", ranks=2)
    assert "dp 2 (fsdp)" in out, out
    assert all(4 < v < 7 for v in losses(out)), out


@pytest.mark.extended  # a 2-rank launch (module docstring)
def test_generate_tensor_parallel():
    alone = run(GENERATE)
    out = run(GENERATE, "--tp", "2", ranks=2)
    tokens = re.compile(r"^tokens: (.*)$", re.M)
    assert tokens.search(out).group(1) == tokens.search(alone).group(1), (alone, out)
    for text in (alone, out):
        first, per_token = map(float, LATENCY.search(text).groups())
        assert first > 0 and per_token > 0, text
    assert sorted(r for r, _, _ in MEMORY.findall(out)) == ["0", "1"]


@pytest.mark.extended  # two one-process runs, about 5 s each
def test_generate_eager_attention_matches_sdpa_and_moves_the_scores():
    """--attention eager (matmul, softmax, matmul) generates the tokens the fused attention
    does, and its prefill takes longer: every head's 512 x 512 scores go through HBM."""
    tokens = re.compile(r"^tokens: (.*)$", re.M)
    fused = run(GENERATE, "--prompt-len", "512", "--positions", "520")
    eager = run(GENERATE, "--prompt-len", "512", "--positions", "520", "--attention", "eager")
    assert tokens.search(eager).group(1) == tokens.search(fused).group(1), (fused, eager)
    first = [float(LATENCY.search(out).group(1)) for out in (fused, eager)]
    assert first[1] > first[0], (fused, eager)


@pytest.mark.extended  # two one-process runs, about 5 s each
def test_generate_decodes_over_a_longer_cache_to_the_same_tokens():
    """--cache-len: the decode steps attend over a cache of that many positions (the prefill's
    keys and values copied in), so they take longer and generate the same tokens; the prefill
    does not change."""
    tokens = re.compile(r"^tokens: (.*)$", re.M)
    options = ("--prompt-len", "64", "--positions", "2048", "--attention", "eager")
    short = run(GENERATE, *options)
    long = run(GENERATE, *options, "--cache-len", "2048")
    assert tokens.search(long).group(1) == tokens.search(short).group(1), (short, long)
    assert "decoding over a cache of 2048 positions" in long, long
    (first_short, step_short), (first_long, step_long) = (
        map(float, LATENCY.search(out).groups()) for out in (short, long))
    assert first_long == first_short and step_long > step_short, (short, long)
    bad = run_process_group([sys.executable, GENERATE, "--size", "tiny", "--cache-len", "8"],
                            timeout=TIMEOUT)
    assert bad.returncode != 0 and "--cache-len must be at least" in bad.stderr, bad.stderr


@pytest.mark.extended  # about 5 s
def test_generate_8b_predict_only():
    """Two of Llama-3.1-8B's layers at full width, predicted only: the peak HBM holds at least
    the bf16 weights (embedding, 2 layers, lm_head; counted here on the meta device)."""
    config = transformers.LlamaConfig(vocab_size=128256, hidden_size=4096,
                                      intermediate_size=14336, num_hidden_layers=2,
                                      num_attention_heads=32, num_key_value_heads=8)
    with torch.device("meta"):
        weights = sum(p.numel() for p in transformers.LlamaForCausalLM(config).parameters()) * 2
    result = run_process_group([sys.executable, GENERATE, "--size", "8b", "--layers", "2",
                                "--prompt-len", "128", "--new-tokens", "4"],
                               env={"TORCH_NEURON_EXECUTE": "0"}, timeout=TIMEOUT)
    out = result.stdout
    assert result.returncode == 0, f"{out}\n{result.stderr}"
    assert "Llama 8b: 2 layers" in out and "tokens:" not in out, out  # values not computed
    first, per_token = map(float, LATENCY.search(out).groups())
    assert first > per_token > 0, out
    ((_, size, fits),) = MEMORY.findall(out)
    assert weights <= hbm_bytes(size) and fits == "fits", (weights, out)


def llama_common():
    sys.path.insert(0, os.path.join(REPO, "examples"))
    try:
        import llama_common
    finally:
        sys.path.pop(0)
    return llama_common


def test_llama_configs_pad_heads_that_do_not_split_over_tp():
    """40 heads at TP 32 (Llama-2-13b) become 64, key/value heads with them, each head keeping
    its width; Llama-2-70b's 8 key/value heads are replicated to one a rank; heads that split
    are untouched; --positions replaces the config's maximum positions."""
    common = llama_common()
    padded = common.llama_config("llama2-13b", tp=32)
    assert (padded.num_attention_heads, padded.num_key_value_heads) == (64, 64)
    assert (padded.hidden_size, padded.head_dim) == (5120, 128)
    gqa = common.llama_config("llama2-70b", tp=32)
    assert (gqa.num_attention_heads, gqa.num_key_value_heads, gqa.head_dim) == (64, 32, 128)
    alone = common.llama_config("llama2-13b")
    assert (alone.num_attention_heads, alone.num_key_value_heads) == (40, 40)
    assert common.llama_config("llama2-13b", positions=16384).max_position_embeddings == 16384
    assert common.llama_config("tiny", attention="eager")._attn_implementation == "eager"
    with pytest.raises(ValueError, match="choose 'sdpa' or 'eager'"):
        common.llama_config("tiny", attention="flash")


@pytest.mark.extended  # a virtual world of 32 ranks, one running; about 15 s
def test_generate_padded_heads_in_a_virtual_world():
    """Llama-2-13b's widths at TP 32 with its heads padded, predicted only: the running rank
    holds two of the 64 heads."""
    result = run_process_group([
        sys.executable, "-m", "torch_neuron", "run", "--virtual", "--nproc-per-node", "32",
        "--instance", "trn1.32xlarge", GENERATE, "--size", "llama2-13b", "--layers", "1",
        "--tp", "32", "--prompt-len", "64", "--new-tokens", "2"], timeout=TIMEOUT)
    out = result.stdout
    assert result.returncode == 0, f"{out}\n{result.stderr}"
    assert "Llama llama2-13b: 1 layers, 64 key/value heads" in out, out
    first, per_token = map(float, LATENCY.search(out).groups())
    assert first > per_token > 0, out


def virtual_peak_hbm(*args):
    """Rank 0's peak HBM of llama_pretrain.py in a virtual world of 32 trn1.32xlarge."""
    result = run_process_group(
        [sys.executable, "-m", "torch_neuron", "run", "--virtual", "--nnodes", "32",
         "--nproc-per-node", "32", "--instance", "trn1.32xlarge", PRETRAIN, *args],
        timeout=TIMEOUT)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return hbm_bytes(dict((r, s) for r, s, _ in MEMORY.findall(result.stdout))["0"])


@pytest.mark.extended  # two one-rank virtual runs, about 5 s each
def test_sequence_parallel_projections_keep_only_the_shard():
    """With --sequence-parallel and --coalesce-projections, q/k/v and gate/up gather the
    sequence themselves and keep only their shard for the backward pass, which gathers it again
    (Megatron's design; NxD states sbh(34 + 5as/h)/t of activations per layer). At
    Llama-3.1-8B's widths, TP 32 and sequence 8192, each decoder layer adds less to the peak HBM
    than its parameters, gradients and ZeRO-1 share of AdamW's state plus the two gathered bf16
    inputs alone (2 x 8192 x 4096 x 2 bytes), which a design keeping them would add on top of
    the rest of its activations (keeping them measured 256 MiB a layer; this design 128)."""
    common = llama_common()
    tp, dp, seq, hidden = 32, 32, 8192, 4096
    args = ("--size", "8b", "--tp", str(tp), "--sequence-parallel", "--coalesce-projections",
            "--activation-checkpointing", "selective", "--seq", str(seq), "--global-batch",
            str(dp), "--micro-batch", "1", "--steps", "2")
    per_layer = (virtual_peak_hbm(*args, "--layers", "4")
                 - virtual_peak_hbm(*args, "--layers", "2")) / 2
    layer = common.model_on_meta(common.llama_config("8b", 1, tp)).model.layers[0]
    local_parameters = sum(p.numel() for p in layer.parameters()) / tp
    state = local_parameters * (4 + 4 + 8 / dp)  # float32 weight and gradient, AdamW's 2 / dp
    assert per_layer < state + 2 * seq * hidden * 2, (per_layer, state)
