"""The workloads behind the anchors, written as ordinary PyTorch on device "neuron", and the
physical lower bound of each. They run in a worker process whose TORCH_NEURON_INSTANCE is the
anchor's instance, in predict-only mode (Note [Predict-only execution]): nothing is computed.

mode "compiled" runs the workload under torch.compile(backend="neuron"), as AWS's numbers were
measured on compiled graphs (torch-neuronx trace, XLA training); "eager" runs it op by op."""

import contextlib
import sys
from typing import Callable

PEAK_NOTE = ("documented peaks: the instance's per-chip BF16/FP32 TFLOPS and HBM GB/s "
             "(third_party/trnsim/src/instance.cpp cites the Trn1/Trn2 pages), divided by the "
             "NeuronCores per chip")


def timed_ms(fn: Callable[[], object]) -> float:
    """Simulated time of fn() on the current stream, in ms."""
    import torch

    torch.neuron.synchronize()
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def maybe_compile(fn, mode: str):
    import torch

    if mode == "compiled":
        return torch.compile(fn, backend="neuron")
    assert mode == "eager", mode
    return fn


# -- physical lower bounds -------------------------------------------------------------------


def core_peaks() -> dict:
    """The documented peaks of one NeuronCore of the current instance: TFLOPS per dtype and HBM
    bandwidth (GB/s), the product pages' per-chip figures over the cores of a chip. Not the
    model's own derived peaks, so a prediction can fail against them."""
    import torch_neuron

    info = torch_neuron._C._instance_info()
    cores = info["logical_cores_per_chip"]
    return {"bf16_tflops": info["bf16_tflops_per_chip"] / cores,
            "fp32_tflops": info["fp32_tflops_per_chip"] / cores,
            "hbm_gbps": info["hbm_gbps_per_chip"] / cores,
            "chip_hbm_gbps": info["hbm_gbps_per_chip"],
            "chip_link_gbps": info["link_gbps_per_chip"]}


def bound_ms(flops: float, nbytes: float, dtype: str) -> float:
    """Never faster than the FLOPs at the core's peak, nor than the bytes at its HBM bandwidth."""
    peaks = core_peaks()
    return max(flops / (peaks[f"{dtype}_tflops"] * 1e12), nbytes / (peaks["hbm_gbps"] * 1e9)) * 1e3


def counted(fn: Callable[[], object]) -> float:
    """FLOPs of fn() as PyTorch's FlopCounterMode counts them (matmuls, convolutions,
    attention), run eagerly in predict-only mode."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())


# -- single ops ------------------------------------------------------------------------------


def matmul_ms(m: int, k: int, n: int, mode: str) -> float:
    import torch

    a = torch.empty(m, k, dtype=torch.bfloat16, device="neuron")
    b = torch.empty(k, n, dtype=torch.bfloat16, device="neuron")
    mm = maybe_compile(torch.mm, mode)
    mm(a, b)
    return timed_ms(lambda: mm(a, b))


def matmul_bound_ms(m: int, k: int, n: int, dtype: str = "bf16") -> float:
    size = {"bf16": 2, "fp32": 4}[dtype]
    return bound_ms(2.0 * m * k * n, size * (m * k + k * n + m * n), dtype)


def matmul_tensor_engine_busy(m: int, k: int, n: int, mode: str) -> float:
    """TensorE busy time over the op's duration, in % (eager: one op's profile record)."""
    import torch

    from torch_neuron import profiler

    a = torch.empty(m, k, dtype=torch.bfloat16, device="neuron")
    b = torch.empty(k, n, dtype=torch.bfloat16, device="neuron")
    with profiler.profile() as prof:
        torch.mm(a, b)
    (record,) = [r for r in prof.records if r["name"].startswith("aten::mm")]
    return 100.0 * record["engine_ns"]["TensorE"] / record["duration_ns"]


def layernorm_ms(rows: int, cols: int, mode: str) -> float:
    import torch

    x = torch.empty(rows, cols, device="neuron")
    weight = torch.empty(cols, device="neuron")
    bias = torch.empty(cols, device="neuron")
    ln = maybe_compile(torch.nn.functional.layer_norm, mode)
    ln(x, (cols,), weight, bias)
    return timed_ms(lambda: ln(x, (cols,), weight, bias))


def layernorm_bound_ms(rows: int, cols: int) -> float:
    return bound_ms(0.0, 2.0 * 4 * rows * cols, "fp32")  # read x, write y (float32)


def mamba_bound_ms(batch: int, channels: int, seq: int, states: int) -> float:
    # read delta and u, write the output (float32); A, B and C once
    return bound_ms(0.0, 4.0 * (3 * batch * channels * seq + channels * states
                                + 2 * batch * states * seq), "fp32")


class _LinearChain:
    """aws-neuron-samples' microbenchmark: one nn.Linear applied `loop` times to its own output,
    then the mean (torch-neuronx trace of an FP32 module; the compiler's default auto-cast runs
    the matmuls in BF16, as Matmult-BF16 does: MATMULT_BF16 below)."""

    def __init__(self, dim: int, loop: int):
        import torch

        self.loop = loop
        with torch.device("neuron"):
            self.linear = torch.nn.Linear(dim, dim)
        _matmult_bf16_linear(self.linear)

    def __call__(self, x):
        out = self.linear(x)
        for _ in range(1, self.loop):
            out = self.linear(out)
        return out.mean()


def linear_chain_ms(dim: int, loop: int, mode: str) -> float:
    import torch

    chain = _LinearChain(dim, loop)
    fn = maybe_compile(chain, mode)
    x = torch.empty(1, dim, dim, device="neuron")
    # Inductor walks the graph's dependencies recursively (memory.py's topological sort), two
    # nodes a Linear (the matmul, its bias add and casts): more than Python's default depth.
    depth = sys.getrecursionlimit()
    sys.setrecursionlimit(max(depth, 10 * loop))
    try:
        with torch.no_grad():
            fn(x)
            return timed_ms(lambda: fn(x))
    finally:
        sys.setrecursionlimit(depth)


def linear_chain_bound_ms(dim: int, loop: int) -> float:
    return bound_ms(2.0 * dim ** 3 * loop, 2.0 * dim * dim, "bf16")


# -- Hugging Face encoders -------------------------------------------------------------------


def hf_config(name: str):
    """The architecture of a Hugging Face checkpoint, from its published config values (no
    download: the weights are random)."""
    import transformers as tf

    bert_base = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072)
    bert_large = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                      intermediate_size=4096)
    roberta = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                   pad_token_id=1, bos_token_id=0, eos_token_id=2)
    return {
        "bert-base-uncased": lambda: tf.BertConfig(**bert_base),
        "bert-large-uncased": lambda: tf.BertConfig(**bert_large),
        "roberta-base": lambda: tf.RobertaConfig(**bert_base, **roberta),
        "roberta-large": lambda: tf.RobertaConfig(**bert_large, **roberta),
        "distilbert-base-uncased": lambda: tf.DistilBertConfig(),  # 6 layers of BERT-base
        "albert-base-v2": lambda: tf.AlbertConfig(
            embedding_size=128, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, vocab_size=30000, hidden_act="gelu_new"),
        # google/electra-base-discriminator's config.json: embedding_size 768, BERT-base body.
        "google/electra-base-discriminator": lambda: tf.ElectraConfig(
            embedding_size=768, vocab_size=30522, **bert_base),
        # xlm-roberta-base's config.json: RoBERTa-base with a 250,002-token vocabulary.
        "xlm-roberta-base": lambda: tf.XLMRobertaConfig(
            **bert_base, **dict(roberta, vocab_size=250002)),
    }[name]()


# The encoder table's "Compilation Autocast Data Type: Matmult-BF16" is neuronx-cc's
# `--auto-cast matmult`: "Only cast FP32 operations that use the Neuron matrix-multiplication
# engine" (aws-neuron-sdk compiler/neuronx-cc/api-reference-guide/index.rst); "the remaining
# operations are performed in the data type specified by the model", with accumulation in FP32
# (archive/appnotes/neuronx-cc/neuronx-cc-training-mixed-precision.rst). So a matmul reads its
# operands in BF16 and gives FP32, and every other op of the FP32 model stays FP32.
MATMULT_BF16 = "neuron_matmult_bf16"


def _matmult_bf16_attention(module, query, key, value, attention_mask, **kwargs):
    """Hugging Face's SDPA attention with the matmuls' operands in BF16 and an FP32 result
    (the softmax between them is charged at the BF16 inputs' rates: SDPA is one op here)."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    bf16 = torch.bfloat16
    if attention_mask is not None and attention_mask.is_floating_point():
        attention_mask = attention_mask.to(bf16)  # SDPA takes a float mask in q's dtype
    out, weights = sdpa_attention_forward(module, query.to(bf16), key.to(bf16),
                                          value.to(bf16), attention_mask, **kwargs)
    return out.float(), weights


def _matmult_bf16_linear(linear):
    """Makes an nn.Linear compute as Matmult-BF16 does: BF16 input and weight, FP32 result,
    the bias added in FP32. The weight's BF16 copy is made once, as the compiler casts a
    constant once (the FP32 weight stays: a masked-LM head shares it with the embedding)."""
    import torch
    import torch.nn.functional as F

    linear.register_buffer("matmult_weight", linear.weight.detach().to(torch.bfloat16),
                           persistent=False)

    def forward(x):
        y = F.linear(x.to(torch.bfloat16), linear.matmult_weight).float()
        return y if linear.bias is None else y + linear.bias

    linear.forward = forward


def _encoder(name: str, task: str):
    """The FP32 model as the encoder table compiled it, with Matmult-BF16 auto-cast
    (MATMULT_BF16 above): every nn.Linear and the attention's matmuls take BF16 operands and
    give FP32."""
    import torch
    import transformers as tf

    tf.AttentionInterface.register(MATMULT_BF16, _matmult_bf16_attention)
    auto = {"AutoModel": tf.AutoModel, "AutoModelForMaskedLM": tf.AutoModelForMaskedLM}[task]
    with torch.device("neuron"):
        model = auto.from_config(hf_config(name), attn_implementation=MATMULT_BF16).eval()
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            _matmult_bf16_linear(module)
    return model


def _traced_outputs(model):
    """What torch_neuronx.trace makes of an FP32 Hugging Face model loaded with
    torchscript=True (aws-neuron-sdk src/benchmark/pytorch/inf2_benchmark.py, the encoder
    table's script): the model's outputs as a tuple, in the graph's FP32 (Matmult-BF16
    auto-cast changes how the matmuls compute, not the dtypes the graph returns)."""

    def traced(input_ids):
        return tuple(t.float() for t in model(input_ids=input_ids).to_tuple())

    return traced


def _to_host(outputs) -> list:
    """The traced model's outputs copied to the host, as torch-neuronx returns them: a
    device-to-host DMA over the host link. Copying to the CPU needs values, so the copy runs
    with execution on (the tensors' bytes are whatever HBM holds); its charge is the same in
    both modes (Note [Predict-only execution])."""
    import torch_neuron

    executing = torch_neuron._C._execute_enabled()
    torch_neuron.set_execute(True)
    try:
        return [t.to("cpu") for t in outputs]
    finally:
        torch_neuron.set_execute(executing)


def inference_ms(name: str, task: str, batch: int, seq: int, mode: str) -> float:
    """One call of the model as AWS's benchmark times it (neuronperf: the time of one
    model(input)), after one warm-up call: batch x seq int32 input ids on the host copied to
    the device, the forward with its matmuls in bf16 (autocast), its FP32 outputs copied back
    to the host. The benchmark's second input, an all-zero attention mask, is left out:
    Hugging Face reads its values to decide whether to apply it, which predict-only mode
    cannot give; applying it is one add over each layer's [heads, seq, seq] scores."""
    import torch

    fn = maybe_compile(_traced_outputs(_encoder(name, task)), mode)
    ids = torch.zeros(batch, seq, dtype=torch.int32)  # the benchmark's example input

    def call():
        return _to_host(fn(ids.to("neuron")))

    with torch.no_grad():
        call()
        return timed_ms(call)


def inference_bound_ms(name: str, task: str, batch: int, seq: int) -> float:
    import torch

    model = _encoder(name, task)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    with torch.no_grad():
        flops = counted(lambda: model(input_ids=ids))
    weights = sum(b.numel() * b.element_size() for b in model.buffers()
                  if b.dim() == 2 and b.dtype == torch.bfloat16)
    return bound_ms(flops, weights, "bf16")


def _bert_pretraining(batch: int, seq: int):
    import torch
    import transformers as tf

    with torch.device("neuron"):
        model = tf.BertForPreTraining(hf_config("bert-large-uncased"))
    ids = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    labels = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    next_sentence = torch.zeros(batch, dtype=torch.long, device="neuron")
    return model, ids, labels, next_sentence


def _autocast(bf16: bool):
    import torch

    return torch.autocast("neuron", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def _pretraining_step(model, fn, ids, labels, next_sentence, bf16: bool):
    """BertForPreTraining's two losses (masked LM and next sentence), as its forward computes
    them when given labels, taken outside `fn`: Dynamo's graph of the label path reads a Long
    value while it compiles, which predict-only mode cannot give."""
    import torch.nn.functional as F

    def step():
        with _autocast(bf16):
            out = fn(input_ids=ids)
            vocab = model.config.vocab_size
            loss = (F.cross_entropy(out.prediction_logits.view(-1, vocab), labels.view(-1))
                    + F.cross_entropy(out.seq_relationship_logits.view(-1, 2),
                                      next_sentence.view(-1)))
        loss.backward()

    return step


def bert_pretraining_step_ms(batch: int, seq: int, bf16: bool, mode: str) -> float:
    """One BertForPreTraining forward and backward (masked-LM and next-sentence losses), after
    one warm-up step."""
    model, *inputs = _bert_pretraining(batch, seq)
    step = _pretraining_step(model, maybe_compile(model, mode), *inputs, bf16)
    step()
    return timed_ms(step)


def bert_pretraining_bound_ms(batch: int, seq: int, bf16: bool) -> float:
    model, *inputs = _bert_pretraining(batch, seq)
    flops = counted(_pretraining_step(model, model, *inputs, bf16))
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    return bound_ms(flops, weights, "bf16" if bf16 else "fp32")


# -- collectives -----------------------------------------------------------------------------


def collective_ms(op: str, nbytes: int, places: list, mode: str) -> float:
    """What the collective model charges (torch_neuron._C._collective_cost, its public entry
    point) for op of nccom-test size nbytes over the ranks at places [(node, chip), ...]."""
    import torch_neuron

    instance = torch_neuron._C._instance_info()["name"]
    return torch_neuron._C._collective_cost(op, nbytes, places, instance)["duration_ns"] / 1e6


# nccom-test's bus bandwidth factors (tools/neuron-sys-tools/nccom-test.rst): the bytes each
# rank must move per byte of size, for r ranks.
BUS_FACTOR = {"all_reduce": lambda r: 2 * (r - 1) / r, "all_gather": lambda r: (r - 1) / r,
              "reduce_scatter": lambda r: (r - 1) / r, "all_to_all": lambda r: (r - 1) / r,
              "send_recv": lambda r: 1.0}


def collective_bound_ms(op: str, nbytes: int, ranks: int) -> float:
    """The bytes each rank moves (nccom-test's bus bandwidth factor times size) at the fastest
    documented path of a chip: its HBM or its NeuronLink bandwidth, whichever is higher."""
    peaks = core_peaks()
    fastest = max(peaks["chip_hbm_gbps"], peaks["chip_link_gbps"])
    return BUS_FACTOR[op](ranks) * nbytes / (fastest * 1e9) * 1e3
