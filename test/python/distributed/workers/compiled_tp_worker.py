"""Compiled tensor-parallel training: the Llama examples' tensor-parallel plan
(examples/llama_common.py) on a one-layer tiny Llama over 2 ranks, with and without
--sequence-parallel, its decoder layer eager and compiled. Run with torchrun, `--device neuron
--out DIR`; each rank saves, per case, the loss and every parameter's local gradient of one
forward and backward under bf16 autocast and loss_parallel, as llama_pretrain.py runs them.

The compile backend is aot_eager: the failure this guards against (the embedding's pending
reduction entering a compiled layer, EmbeddingParallel's docstring) is in AOTAutograd's
backward whatever the backend, and aot_eager needs no C++ compiler, which keeps the test within
seconds; the neuron backend's kernels are tested in test/python/compile.
"""

import os
import sys

import torch
import torch.nn.functional as F
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

import _training_common as common

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))
sys.path.insert(0, os.path.join(REPO, "examples"))
import llama_common  # noqa: E402

args = common.parse_args()
rank, world, device = common.setup(args.device)
assert device.type == "neuron" and world == 2
mesh = init_device_mesh("neuron", (world,))
config = llama_common.llama_config("tiny", layers=1, tp=world)
SEQ = 16


def step(compiled, sequence_parallel):
    """Loss and local gradients of one step from the examples' seeded initial weights."""
    model = llama_common.model_on_meta(config)
    llama_common.tensor_parallel(model, mesh, logits="sharded",
                                 sequence_parallel=sequence_parallel)
    llama_common.materialise(model, config, mesh)
    if compiled:
        torch._dynamo.reset()
        for layer in model.model.layers:
            layer.compile(backend="aot_eager")
    tokens = torch.randint(0, config.vocab_size, (2, SEQ + 1),
                           generator=torch.Generator().manual_seed(0)).to(device)
    positions = torch.arange(SEQ, device=device).unsqueeze(0)
    with torch.autocast("neuron", dtype=torch.bfloat16), loss_parallel():
        logits = model.lm_head(model.model(input_ids=tokens[:, :-1], position_ids=positions,
                                           cache=transformers.DynamicCache(config=config))
                               .last_hidden_state)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        loss.backward()
    local = lambda t: (t.to_local() if isinstance(t, DTensor) else t).detach().cpu()  # noqa: E731
    return {"loss": local(loss),
            "grads": {name: local(p.grad) for name, p in model.named_parameters()}}


results = {f"{kind}_{'sp' if sp else 'tp'}": step(kind == "compiled", sp)
           for sp in (False, True) for kind in ("eager", "compiled")}
torch.save(results, os.path.join(args.out, f"neuron_rank{rank}.pt"))
print(f"compiled tensor parallel ok on rank {rank} (neuron)", flush=True)
