"""End-to-end anchors: every row of AWS's trn1 encoder inference tables (latency at batch 1,
throughput at larger batches) and of its BERT-Large pre-training throughput table, Neuron
2.27.0 (aws-neuron-sdk commit 337e6041, "Release 2.27.0"). All were measured on compiled
graphs (torch-neuronx trace; XLA training compiled by neuronx-cc), so the workloads run under
torch.compile(backend="neuron")."""

import functools

from torch_neuron.fidelity import workloads as w
from torch_neuron.fidelity.anchor import Anchor

SDK = "github.com/aws-neuron/aws-neuron-sdk@337e6041"
INFERENCE = (SDK + " about-neuron/benchmarks/trn1/{table}_data_encoder.csv (P50 latency, "
             "batch {batch}, sequence 128, FP32 with Matmult-BF16 auto-cast, Neuron {release})")
TRAINING = (f"{SDK} about-neuron/benchmarks/trn1/training_data_encoder.csv (HF BERT-Large "
            "phase-1 pre-training, sequence 128, Neuron 2.27.0)")

# (model, instance, task, P50 ms, Neuron release), in the CSV's order.
INFERENCE_ROWS = [
    ("albert-base-v2", "trn1.2xlarge", "AutoModel", 0.85997581, "2.27.0"),
    ("bert-base-uncased", "trn1.2xlarge", "AutoModel", 0.94294548, "2.26.0"),
    ("bert-large-uncased", "trn1.2xlarge", "AutoModel", 2.66885757, "2.27.0"),
    ("distilbert-base-uncased", "trn1.2xlarge", "AutoModel", 0.54264069, "2.27.0"),
    ("google/electra-base-discriminator", "trn1.2xlarge", "AutoModel", 0.93317032, "2.27.0"),
    ("roberta-base", "trn1.2xlarge", "AutoModel", 0.95796585, "2.27.0"),
    ("roberta-large", "trn1.2xlarge", "AutoModel", 2.66981125, "2.27.0"),
    ("xlm-roberta-base", "trn1.32xlarge", "AutoModelForMaskedLM", 42.62268543, "2.27.0"),
]


# The throughput table's rows: (model, instance, task, batch, P50 ms of one batch, release).
# Its latency is one call of a batch, with two calls in flight as in the latency table
# (throughput x latency = 2 x batch in every row).
THROUGHPUT_ROWS = [
    ("albert-base-v2", "trn1.2xlarge", "AutoModel", 16, 9.28854942, "2.27.0"),
    ("bert-base-uncased", "trn1.2xlarge", "AutoModel", 16, 9.34481621, "2.27.0"),
    ("bert-large-uncased", "trn1.2xlarge", "AutoModel", 4, 7.24101067, "2.27.0"),
    ("distilbert-base-uncased", "trn1.2xlarge", "AutoModel", 16, 5.07259369, "2.26.0"),
    ("google/electra-base-discriminator", "trn1.2xlarge", "AutoModel", 16, 9.33480263,
     "2.27.0"),
    ("roberta-base", "trn1.2xlarge", "AutoModel", 16, 9.46807861, "2.27.0"),
    ("roberta-large", "trn1.2xlarge", "AutoModel", 8, 14.23048973, "2.27.0"),
    ("xlm-roberta-base", "trn1.32xlarge", "AutoModelForMaskedLM", 8, 342.50581264, "2.27.0"),
]


def _inference(model, instance, task, latency, release, batch=1) -> Anchor:
    short = model.split("/")[-1]
    table = "latency" if batch == 1 else "throughput"
    return Anchor(f"{short}-inference" + (f"-batch{batch}" if batch > 1 else ""), "end-to-end",
                  instance, f"{model} {task} forward, batch {batch}, sequence 128, one "
                  f"NeuronCore", latency, "ms",
                  INFERENCE.format(table=table, batch=batch, release=release),
                  functools.partial(w.inference_ms, model, task, batch, 128),
                  functools.partial(w.inference_bound_ms, model, task, batch, 128),
                  note=(f"the {table} table's Neuron {release} row"
                        if release != "2.27.0" else ""))


def _training(name, bf16, microbatch, seq_per_s, cores, accumulation) -> Anchor:
    # seq/s over `cores` NeuronCores, data parallel: one microbatch every
    # microbatch / (seq_per_s / cores) s on each core.
    dtype = "bf16 autocast" if bf16 else "fp32"
    return Anchor(name, "end-to-end", "trn1.32xlarge",
                  f"BERT-Large forward+backward, microbatch {microbatch}, {dtype}",
                  microbatch / (seq_per_s / cores) * 1e3, "ms", TRAINING,
                  functools.partial(w.bert_pretraining_step_ms, microbatch, 128, bf16),
                  functools.partial(w.bert_pretraining_bound_ms, microbatch, 128, bf16),
                  note=f"{seq_per_s} seq/s on {cores} NeuronCores; the optimizer step and "
                  f"gradient all-reduce (once per {accumulation} microbatches) not included",
                  worker=f"bert-large-pretrain-{dtype}-{microbatch}")


ANCHORS = [_inference(*row) for row in INFERENCE_ROWS] + [
    _inference(model, instance, task, latency, release, batch)
    for model, instance, task, batch, latency, release in THROUGHPUT_ROWS] + [
    # The table's three rows: 16 nodes bf16 (global batch 1048576 = 128 microbatches of 16
    # per core), 16 nodes fp32 (256 of 8), 1 node bf16 (16384 = 32 of 16).
    _training("bert-large-pretrain-bf16-16-nodes", True, 16, 56923.6521, 512, 128),
    _training("bert-large-pretrain-fp32-16-nodes", False, 8, 32752.7891, 512, 256),
    _training("bert-large-pretrain-bf16", True, 16, 3836.4653, 32, 32),
]
