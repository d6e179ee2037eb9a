"""Published Trainium measurements beside the simulator's predictions.

    python -m torch_neuron fidelity [--sources] [--json]   # the table, ratios, median errors

Each anchor is a number AWS published for real Trainium hardware (a kernel's latency, a model's
inference latency or training throughput), the workload that produced it written as ordinary
PyTorch on device "neuron", and the instance it ran on. The workload runs in predict-only mode
(Note [Predict-only execution]): nothing is computed, so full-size models take seconds. Its
predicted time (torch.neuron.Event) is set beside the measurement.

The model is not fitted to these numbers: its constants come from the Neuron architecture and
performance guides (third_party/trnsim), and the unknowns are assumptions stated in
docs/design.md. Goals (issue 14): median absolute error <= 15% over the op-level anchors, no
anchor off by more than 2x, no prediction faster than a physical peak.

Anchors run in one worker process per instance (TORCH_NEURON_INSTANCE must be set before the
first device use).
"""

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
from typing import Callable, Optional

# -- the workloads ---------------------------------------------------------------------------


def _timed_ms(fn: Callable[[], object]) -> float:
    import torch

    torch.neuron.synchronize()
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def _matmul_ms(m: int, k: int, n: int) -> float:
    import torch

    a = torch.empty(m, k, dtype=torch.bfloat16, device="neuron")
    b = torch.empty(k, n, dtype=torch.bfloat16, device="neuron")
    return _timed_ms(lambda: torch.mm(a, b))


def _matmul_tensor_engine_busy(m: int, k: int, n: int) -> float:
    """TensorE busy time over the op's duration, in %."""
    import torch

    from torch_neuron import profiler

    a = torch.empty(m, k, dtype=torch.bfloat16, device="neuron")
    b = torch.empty(k, n, dtype=torch.bfloat16, device="neuron")
    with profiler.profile() as prof:
        torch.mm(a, b)
    (record,) = [r for r in prof.records if r["name"].startswith("aten::mm")]
    return 100.0 * record["engine_ns"]["TensorE"] / record["duration_ns"]


def _hf_config(name: str):
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
    }[name]()


def _inference_ms(name: str, batch: int, seq: int) -> float:
    """AutoModel (no head) forward in float32 with matmuls in bf16 (Neuron's "Matmult-BF16"
    autocast, which casts the weights once when it compiles): the second of two calls in one
    autocast region, whose weight casts the first call cached."""
    import torch
    import transformers as tf

    with torch.device("neuron"):
        model = tf.AutoModel.from_config(_hf_config(name), attn_implementation="sdpa").eval()
    ids = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    with torch.no_grad(), torch.autocast("neuron", dtype=torch.bfloat16):
        model(input_ids=ids)
        return _timed_ms(lambda: model(input_ids=ids))


def _bert_pretraining_step_ms(batch: int, seq: int, bf16: bool) -> float:
    """One BertForPreTraining forward and backward (masked-LM and next-sentence losses)."""
    import contextlib

    import torch
    import transformers as tf

    with torch.device("neuron"):
        model = tf.BertForPreTraining(_hf_config("bert-large-uncased"))
    ids = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    labels = torch.zeros(batch, seq, dtype=torch.long, device="neuron")
    next_sentence = torch.zeros(batch, dtype=torch.long, device="neuron")

    def step():
        autocast = (torch.autocast("neuron", dtype=torch.bfloat16) if bf16
                    else contextlib.nullcontext())
        with autocast:
            out = model(input_ids=ids, labels=labels, next_sentence_label=next_sentence)
        out.loss.backward()

    step()
    return _timed_ms(step)


# -- the anchors -----------------------------------------------------------------------------

SDK = "github.com/aws-neuron/aws-neuron-sdk"
TRN1_INFERENCE = (f"{SDK} about-neuron/benchmarks/trn1/latency_data_encoder.csv (Neuron 2.27, "
                  "P50 latency, batch 1, sequence 128, FP32 with Matmult-BF16)")
TRN1_TRAINING = (f"{SDK} about-neuron/benchmarks/trn1/training_data_encoder.csv (Neuron 2.27, "
                 "HF BERT-Large phase-1 pre-training, sequence 128)")


@dataclasses.dataclass
class Anchor:
    name: str
    kind: str          # "op" or "end-to-end"
    instance: str      # the instance it was measured on
    workload: str
    measured: float
    unit: str          # "ms", or "%" for a utilization
    source: str
    predict: Callable[[], float]
    note: str = ""


ANCHORS = [
    Anchor("matmul-bf16-4096x8192x8192", "op", "trn1.2xlarge",
           "[4096,8192] @ [8192,8192] bf16 on one NeuronCore-v2", 6.97, "ms",
           f"{SDK}@49ee15c5 general/nki/tutorials/matrix_multiplication.rst (NKI matmul "
           "tutorial, best kernel, 85.24% of peak)",
           lambda: _matmul_ms(4096, 8192, 8192)),
    Anchor("matmul-bf16-tensore-busy", "op", "trn2.3xlarge",
           "TensorE active time of the same matmul on Trainium2", 99.50, "%",
           f"{SDK} nki/guides/tutorials/kernel-optimization.rst (final kernel's profile)",
           lambda: _matmul_tensor_engine_busy(4096, 8192, 8192)),
] + [
    Anchor(f"{name}-inference", "end-to-end", "trn1.2xlarge",
           f"{name} AutoModel forward, batch 1, sequence 128", latency, "ms", TRN1_INFERENCE,
           lambda name=name: _inference_ms(name, 1, 128))
    for name, latency in [("bert-base-uncased", 0.94294548), ("bert-large-uncased", 2.66885757),
                          ("roberta-base", 0.95796585), ("roberta-large", 2.66981125),
                          ("distilbert-base-uncased", 0.54264069),
                          ("albert-base-v2", 0.85997581)]
] + [
    # 3836.4653 seq/s over 32 NeuronCores (one trn1.32xlarge, data parallel): a microbatch of
    # 16 every 16 / (3836.4653 / 32) s on each core.
    Anchor("bert-large-pretrain-bf16", "end-to-end", "trn1.32xlarge",
           "BERT-Large forward+backward, microbatch 16, bf16 autocast", 16 / (3836.4653 / 32) * 1e3,
           "ms", TRN1_TRAINING, lambda: _bert_pretraining_step_ms(16, 128, bf16=True),
           "the optimizer step and gradient all-reduce (once per 32 microbatches) not included"),
    # 32752.7891 seq/s over 16 x 32 NeuronCores: a microbatch of 8 per core.
    Anchor("bert-large-pretrain-fp32", "end-to-end", "trn1.32xlarge",
           "BERT-Large forward+backward, microbatch 8, fp32", 8 / (32752.7891 / 512) * 1e3,
           "ms", TRN1_TRAINING, lambda: _bert_pretraining_step_ms(8, 128, bf16=False),
           "the optimizer step and gradient all-reduce (once per 256 microbatches) not included"),
]


# -- running them ----------------------------------------------------------------------------


def _worker(instance: str) -> None:
    """Runs the anchors of `instance` (set as TORCH_NEURON_INSTANCE) and prints their
    predictions as JSON."""
    import torch_neuron

    torch_neuron.set_execute(False)
    predictions = {a.name: a.predict() for a in ANCHORS if a.instance == instance}
    print(json.dumps(predictions))


def predict_all(timeout: float = 600) -> dict[str, float]:
    """Each anchor's prediction, from one worker process per instance."""
    predictions = {}
    for instance in sorted({a.instance for a in ANCHORS}):
        env = dict(os.environ, TORCH_NEURON_INSTANCE=instance, TORCH_NEURON_EXECUTE="0")
        out = subprocess.run([sys.executable, "-m", "torch_neuron.fidelity", "--worker", instance],
                             env=env, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"the fidelity worker for {instance} failed:\n{out.stderr[-3000:]}")
        predictions.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return predictions


def ratio(anchor: Anchor, predicted: float) -> float:
    return predicted / anchor.measured


def summary(predictions: dict[str, float]) -> dict:
    """Median absolute error per kind (|predicted / measured - 1|) and the worst anchor."""
    out = {}
    for kind in ("op", "end-to-end"):
        errors = [abs(ratio(a, predictions[a.name]) - 1) for a in ANCHORS if a.kind == kind]
        out[kind] = {"anchors": len(errors), "median_abs_error": statistics.median(errors)}
    worst = max(ANCHORS, key=lambda a: max(ratio(a, predictions[a.name]),
                                           1 / ratio(a, predictions[a.name])))
    out["worst"] = {"name": worst.name, "ratio": ratio(worst, predictions[worst.name])}
    return out


def table(predictions: dict[str, float]) -> str:
    width = max(len(a.name) for a in ANCHORS) + 2
    lines = [f"{'anchor':<{width}}{'kind':<12}{'instance':<15}{'measured':>11}"
             f"{'predicted':>11}{'ratio':>8}"]
    for a in ANCHORS:
        p = predictions[a.name]
        lines.append(f"{a.name:<{width}}{a.kind:<12}{a.instance:<15}"
                     f"{a.measured:>9.2f}{a.unit:<2}{p:>9.2f}{a.unit:<2}{ratio(a, p):>8.2f}")
    s = summary(predictions)
    lines.append("")
    for kind in ("op", "end-to-end"):
        lines.append(f"median absolute error, {kind} anchors ({s[kind]['anchors']}): "
                     f"{s[kind]['median_abs_error']:.1%}")
    lines.append(f"worst anchor: {s['worst']['name']} (predicted / measured "
                 f"{s['worst']['ratio']:.2f})")
    return "\n".join(lines)


def sources() -> str:
    return "\n".join(f"{a.name}: {a.workload}; {a.source}" + (f"; {a.note}" if a.note else "")
                     for a in ANCHORS)


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # one instance's predictions, in a process of its own
        _worker(argv[1])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m torch_neuron fidelity",
        description="Published Trainium measurements beside the simulator's predictions.")
    parser.add_argument("--sources", action="store_true",
                        help="also print where each measurement was published")
    parser.add_argument("--json", action="store_true",
                        help="also print one JSON document (predictions and summary) last")
    args = parser.parse_args(argv)
    predictions = predict_all()
    print(table(predictions))
    if args.sources:
        print("\n" + sources())
    if args.json:  # for tests and scripts: one JSON document on the last line
        print(json.dumps({"predictions": predictions, "summary": summary(predictions)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
