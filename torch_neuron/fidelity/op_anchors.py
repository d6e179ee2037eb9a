"""Op-level anchors: published latencies of single kernels, with their shapes.

AWS publishes few. Every table row used is here; rows that time a deliberately unoptimized
step of a tutorial are printed but do not count (the workload is the op, whose kernel is the
library's, not the tutorial's earlier steps)."""

import functools

from torch_neuron.fidelity import workloads as w
from torch_neuron.fidelity.anchor import COUNTS, EXCLUDED, SANITY, Anchor

SDK = "github.com/aws-neuron/aws-neuron-sdk"
SAMPLES = "github.com/aws-neuron/aws-neuron-samples"
# The NKI matmul tutorial's table of four kernels for [4096,8192] @ [8192,8192] in BF16 on
# "Trn1.32xlarge" (one NeuronCore-v2).
MATMUL_TUTORIAL = (f"{SDK}@49ee15c5 general/nki/tutorials/matrix_multiplication.rst "
                   "(table 'Kernels / Latency (ms) / HFU', Trn1.32xlarge)")
LAYERNORM_TUTORIAL = (f"{SDK}@49ee15c5 general/nki/tutorials/layernorm.rst (NCLatency p50, "
                      "input (300, 1000) float32, trn1)")
MICROBENCHMARK = (f"{SAMPLES}@8b2e521 torch-neuronx/microbenchmark/microbenchmark.ipynb "
                  "(output: 1000 timed calls in 27.6601 s; batch 1, 1024x1024, loop 1000, bias, "
                  "default compiler flags; 'Trn1/Inf2', both NeuronCore-v2)")
UNOPTIMIZED = ("a deliberately unoptimized step of the tutorial's kernel; the workload is the op, "
               "whose kernel is the library's (the tutorial's best row counts)")

_mm = (4096, 8192, 8192)


def _matmul_row(label: str, latency: float, status: str = COUNTS, reason: str = "") -> Anchor:
    return Anchor(f"matmul-bf16-4096x8192x8192{label}", "op", "trn1.32xlarge",
                  "torch.mm, [4096,8192] @ [8192,8192] bf16, one NeuronCore-v2", latency, "ms",
                  MATMUL_TUTORIAL, functools.partial(w.matmul_ms, *_mm),
                  functools.partial(w.matmul_bound_ms, *_mm), measured_as="eager",
                  status=status, reason=reason)


ANCHORS = [
    _matmul_row("", 6.97),
    _matmul_row("-original-tiled", 51.80, EXCLUDED, UNOPTIMIZED),
    _matmul_row("-optimization-1", 42.96, EXCLUDED, UNOPTIMIZED),
    _matmul_row("-optimization-2", 22.07, EXCLUDED, UNOPTIMIZED),
    Anchor("layernorm-fp32-300x1000", "op", "trn1.2xlarge",
           "F.layer_norm over the last dim of [300,1000] float32 (the tutorial's version 2)",
           1.969, "ms", LAYERNORM_TUTORIAL, functools.partial(w.layernorm_ms, 300, 1000),
           functools.partial(w.layernorm_bound_ms, 300, 1000), measured_as="eager"),
    Anchor("layernorm-fp32-300x1000-v1", "op", "trn1.2xlarge",
           "F.layer_norm over the last dim of [300,1000] float32 (the tutorial's version 1)",
           2.311, "ms", LAYERNORM_TUTORIAL, functools.partial(w.layernorm_ms, 300, 1000),
           functools.partial(w.layernorm_bound_ms, 300, 1000), measured_as="eager",
           status=EXCLUDED, reason=UNOPTIMIZED),
    Anchor("linear-1024-chain-x1000", "op", "trn1.2xlarge",
           "nn.Linear(1024, 1024) applied 1000 times to [1,1024,1024] float32, then mean; "
           "matmuls in bf16 (compiler auto-cast)", 27.6601, "ms", MICROBENCHMARK,
           functools.partial(w.linear_chain_ms, 1024, 1000),
           functools.partial(w.linear_chain_bound_ms, 1024, 1000),
           note="the time of one traced call, host input copy included (4 MiB)"),
    Anchor("matmul-bf16-tensore-busy", "op", "trn2.3xlarge",
           "TensorE active time of the 4096x8192x8192 matmul on Trainium2", 99.50, "%",
           f"{SDK}@fb4ce106 nki/guides/tutorials/kernel-optimization.rst (final kernel's "
           "profile, trn2)",
           functools.partial(w.matmul_tensor_engine_busy, *_mm), measured_as="eager",
           status=SANITY, reason="any large matmul keeps TensorE busy ~100% by construction: "
           "it cannot tell a good model from a bad one"),
]
