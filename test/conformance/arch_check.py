"""Checks one transformers causal-LM architecture on neuron against the CPU (see hf_arch_sweep.py).

    python test/conformance/arch_check.py llama        # one architecture, prints the result
    python test/conformance/arch_check.py --serve      # worker: reads names, prints RESULT lines
"""

import copy
import json
import os
import sys
import time
import traceback
import warnings

import torch
import torch_neuron

sys.path.insert(0, os.path.dirname(__file__))
from tiny_config import VOCAB, tiny_config  # noqa: E402

NEW_TOKENS = 8


def _error(exc):
    """The exception's message and the innermost frame that raised it."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message} ({frame.filename.split('site-packages/')[-1]}:" \
           f"{frame.lineno})"


def _run(model, device):
    generator = torch.Generator().manual_seed(0)
    vocab = min(VOCAB, getattr(model.config.get_text_config(), "vocab_size", None) or VOCAB)
    input_ids = torch.randint(8, vocab - 8, (2, 8), generator=generator).to(device)
    attention_mask = torch.ones_like(input_ids)
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        tokens = model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                do_sample=False, num_beams=1)
    return logits.float().cpu(), tokens.cpu()


def build(arch):
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    config = tiny_config(arch)
    model_cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[arch])
    if model_cls.config_class and not isinstance(config, model_cls.config_class):
        # A composite config (multimodal, encoder-decoder) whose CausalLM takes one part.
        config = next((value for value in vars(config).values()
                       if isinstance(value, model_cls.config_class)), None) \
            or config.get_text_config()
    torch.manual_seed(0)
    model = model_cls(config).eval()
    if hasattr(model, "set_default_language"):  # X-MOD's adapters need a language first
        model.set_default_language(config.languages[0])
    return model


def check(arch):
    start = time.monotonic()
    try:
        model = build(arch)
        cpu_logits, cpu_tokens = _run(model, "cpu")
    except Exception as exc:  # the tiny model does not run on the CPU either
        return {"status": "no_cpu_reference", "error": _error(exc)}
    try:
        neuron_model = copy.deepcopy(model).to("neuron")
        torch_neuron.clear_op_tracking()
        logits, tokens = _run(neuron_model, "neuron")
        fallback_ops = sorted(torch_neuron.get_fallback_ops())
    except Exception as exc:
        return {"status": "error", "error": _error(exc)}
    result = {"seconds": round(time.monotonic() - start, 1)}
    if fallback_ops:
        result["fallback_ops"] = fallback_ops
    if logits.shape != cpu_logits.shape or not torch.allclose(logits, cpu_logits, rtol=1e-4,
                                                              atol=1e-4):
        diff = (logits - cpu_logits).abs().max().item() if logits.shape == cpu_logits.shape \
            else None
        return {**result, "status": "mismatch", "error": f"logits differ (max abs diff {diff})"}
    if not torch.equal(tokens, cpu_tokens):
        return {**result, "status": "mismatch", "error": "generated tokens differ"}
    return {**result, "status": "fallback" if fallback_ops else "pass"}


def main():
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    if sys.argv[1:] == ["--serve"]:
        for line in sys.stdin:
            print("RESULT " + json.dumps(check(line.strip())), flush=True)
    else:
        for arch in sys.argv[1:]:
            print(arch, json.dumps(check(arch)))


if __name__ == "__main__":
    main()
