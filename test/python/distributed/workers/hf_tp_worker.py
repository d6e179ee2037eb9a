"""Hugging Face tensor parallelism on neuron (test_hf_tensor_parallel.py): every model directory
given is loaded with `from_pretrained(path, tp_plan="auto")` and generates greedily with each
cache; each rank writes what it saw to OUT/rank<R>.json, for the test to compare with the same
saved models run unsharded on the CPU in the pytest process.

    torchrun --nproc-per-node 2 hf_tp_worker.py --spec SPEC.json --out DIR

SPEC.json: {"models": {name: directory}, "prompt": [[token ids]], "new_tokens": n,
"caches": ["dynamic", "static"]}. Per model the rank records where the weights are and how
they are sharded, and per cache the tokens, the CPU fallbacks during generation, the
collectives the simulator ran (torch_neuron.profiler records) next to the c10d ops PyTorch's
profiler saw, and the logits of a forward pass over the generated sequence.
"""

import argparse
import collections
import json
import os

import torch
import torch._dynamo
import torch.distributed as dist
import transformers
from torch.distributed.tensor import DTensor

import torch_neuron

parser = argparse.ArgumentParser()
parser.add_argument("--spec", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
with open(args.spec) as f:
    spec = json.load(f)
transformers.utils.logging.disable_progress_bar()


def weights(model):
    """Per parameter: DTensor or not, placements, local and global shape, the local device."""
    out = {}
    for name, p in model.named_parameters():
        local = p.to_local() if isinstance(p, DTensor) else p
        out[name] = {"dtensor": isinstance(p, DTensor),
                     "placements": str(p.placements) if isinstance(p, DTensor) else None,
                     "local_shape": list(local.shape), "shape": list(p.shape),
                     "device": str(local.device)}
    return out


def generate(model, ids, cache):
    kwargs = dict(max_new_tokens=spec["new_tokens"], do_sample=False,
                  attention_mask=torch.ones_like(ids))
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    torch_neuron.clear_op_tracking()
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    with torch_neuron.profiler.profile() as prof, torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]) as kineto:
        out = model.generate(ids, **kwargs)
    records = prof.collective_records()
    details = [torch_neuron.profiler.collectives.collective_detail(r) for r in records]
    return out, {
        "tokens": out.cpu().tolist(),
        # transformers compiles a static-cache decode step on neuron (backend "neuron").
        "compiled_graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs,
        "fallback_ops": torch_neuron.get_fallback_ops(),
        "executed_mm": torch_neuron.get_executed_ops().get("aten::mm", 0),
        "collectives": dict(collections.Counter(r["name"] for r in records)),
        "collective_devices": sorted({r["device"] for r in records}),
        "collective_group_sizes": sorted({d.get("ranks") for d in details}),
        "c10d_ops": {e.key: e.count for e in kineto.key_averages() if e.key.startswith("c10d::")},
    }


rank = None
results = {}
for name, path in spec["models"].items():
    model = transformers.AutoModelForCausalLM.from_pretrained(path, tp_plan="auto")
    rank = dist.get_rank()  # transformers started the process group
    ids = torch.tensor(spec["prompt"], device=model.device)
    result = {"model_device": str(model.device), "current_device": torch.neuron.current_device(),
              "backend": dist.get_backend(), "world": dist.get_world_size(),
              "weights": weights(model), "generate": {}}
    for cache in spec["caches"]:
        out, result["generate"][cache] = generate(model, ids, cache)
        if cache == spec["caches"][0]:
            with torch.no_grad():
                logits = model(out).logits
            if isinstance(logits, DTensor):
                logits = logits.full_tensor()
            result["logits"] = logits.cpu().tolist()
    results[name] = result
    del model

with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
