"""Tiny configs for transformers architectures: the defaults with every size shrunk.

Sizes are given by attribute name (hidden_size, num_attention_heads, ...), applied to the
config and to its sub-configs (text_config, ...), and passed to the config's constructor so
that derived fields (layer_types, head_dim, ...) are recomputed from the tiny sizes. A few
architectures need a pattern or a size that the generic names cannot express; ARCH_OVERRIDES
lists those, each a config setting, never a change to the model.
"""

VOCAB = 512

# attribute name -> tiny value. Heads: 4 query heads of 16, 2 key/value heads.
SIZES = {
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "embed_dim", "dim", "model_dim",
                     "hidden_dim", "word_embed_proj_dim", "embedding_size"], 64),
    **dict.fromkeys(["decoder_layers", "encoder_layers", "num_decoder_layers"], 2),
    **dict.fromkeys(["num_attention_heads", "n_head", "num_heads", "decoder_attention_heads",
                     "encoder_attention_heads", "n_heads"], 4),
    **dict.fromkeys(["head_dim", "attention_head_dim", "kv_channels", "qk_nope_head_dim",
                     "v_head_dim", "global_head_dim", "linear_key_head_dim",
                     "linear_value_head_dim"], 16),
    "qk_rope_head_dim": 8,
    **dict.fromkeys(["intermediate_size", "ffn_dim", "decoder_ffn_dim", "encoder_ffn_dim",
                     "ffn_hidden_size", "moe_intermediate_size", "d_ff", "n_inner",
                     "shared_expert_intermediate_size", "expert_intermediate_size",
                     "intermediate_size_mlp", "dense_intermediate_size", "moe_ffn_hidden_size",
                     "ffn_inner_dim"], 128),
    **dict.fromkeys(["num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts",
                     "num_routed_experts", "n_experts"], 4),
    **dict.fromkeys(["num_experts_per_tok", "moe_topk", "num_experts_per_token",
                     "moe_k", "top_k_experts"], 2),
    **dict.fromkeys(["kv_lora_rank", "q_lora_rank"], 32),
    **dict.fromkeys(["n_group", "num_group", "topk_group", "num_expert_group", "first_k_dense_replace", "n_shared_experts",
                     "num_shared_experts", "moe_layer_freq"], 1),
    **dict.fromkeys(["vocab_size", "n_vocab", "input_vocab_size", "output_vocab_size"], VOCAB),
    **dict.fromkeys(["max_position_embeddings", "n_positions", "n_ctx", "max_seq_len",
                     "seq_length", "max_sequence_length"], 256),
    **dict.fromkeys(["linear_num_key_heads", "linear_num_value_heads"], 2),
    "mamba_dt_rank": 8,
    "rotary_dim": 8,
    **dict.fromkeys(["state_size", "ssm_state_size", "mamba_d_state"], 16),
    **dict.fromkeys(["hidden_size_per_layer_input", "laurel_rank", "d_rel"], 8),
    **dict.fromkeys(["vocab_size_per_layer_input", "unpadded_vocab_size"], VOCAB),
    "embedding_dim": 64,
    "swa_head_dim": 16,
    "swa_num_attention_heads": 4,
    "sliding_window_size": 8,
    "time_step_rank": 8,
    "sliding_window": 8,
    "num_codebooks": 2,
}

# Values derived from the number of query heads keep its relation (MHA stays MHA, MQA stays MQA).
KV_HEAD_NAMES = ["num_key_value_heads", "swa_num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv",
                 "num_key_value_groups"]

# Sizes whose default None some models use as is (config.head_dim ** -0.5): given a value.
DERIVE_WHEN_NONE = {name: SIZES[name] for name in
                    ("head_dim", "num_experts_per_tok", "n_routed_experts", "n_shared_experts")}
DERIVE_WHEN_NONE["num_key_value_heads"] = 2

QWEN4_EXP_INDEXER = {"indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 16,
                     "indexer_budget": 16, "indexer_compress_ratio": 4}

# Per-architecture settings the generic names cannot express (layer patterns of hybrid models).
ARCH_OVERRIDES = {
    # The default attention config lacks rope_theta and leaves clip_qkv None, which its
    # attention passes to torch.clamp; DBRX's released config sets both.
    "dbrx": {"attn_config": {"rope_theta": 10000.0, "clip_qkv": 8.0}},
    # layer_types=None: derived from these counts (its to_dict form interleaves MLP blocks).
    "dory": {"layer_types": None, "num_hidden_layers": 4, "n_input_layers": 1,
             "n_recurrent_layers": 2, "n_output_layers": 1},
    "gemma3n": {"text_config": {"num_kv_shared_layers": 0}},
    "gemma3n_text": {"num_kv_shared_layers": 0},
    "gemma4_assistant": {"hidden_size_per_layer_input": 0},  # its own default fails validation
    "mamba2": {"num_heads": 8, "n_groups": 2},  # num_heads * head_dim == expand * hidden_size
    "bamba": {"attn_layer_indices": [1]},  # the default has no attention layer at all
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "reformer": {"is_decoder": True, "axial_pos_embds_dim": [32, 32], "axial_pos_shape": [16, 16]},
    # Its query-sparse indexer has no defaults; these satisfy the config's own checks.
    "qwen4_exp": {"text_config": QWEN4_EXP_INDEXER},
    "qwen4_exp_text": QWEN4_EXP_INDEXER,
    # layers_block_type=None: derived from the tiny layer count and attention period.
    "zamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "num_hidden_layers": 5,
              "layers_block_type": None},
    # The default is Mamba layers only, which transformers' hybrid cache does not support.
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2,
              "expert_layer_offset": 1, "use_mamba_kernels": False},
}

TOKEN_ID_NAMES = ["pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
                  "sep_token_id", "cls_token_id", "mask_token_id", "unk_token_id"]


LAYER_COUNT_NAMES = ["num_hidden_layers", "num_layers", "n_layer", "n_layers", "num_blocks"]
MAX_LAYERS = 8


def _layer_count(values):
    return next((values[n] for n in LAYER_COUNT_NAMES if isinstance(values.get(n), int)), None)


def _covering_prefix(pattern):
    """Length of the shortest prefix of a per-layer pattern that has every kind of layer."""
    kinds = set(map(str, pattern))
    seen = set()
    for i, kind in enumerate(pattern):
        seen.add(str(kind))
        if seen == kinds:
            return i + 1
    return len(pattern)


def _is_layer_pattern(name, value, full_layers):
    """A per-layer list (layer_types, ...) or a per-layer string (hybrid_override_pattern);
    plain strings of the same length (attention_type="block_sparse") are not patterns."""
    if not full_layers or not isinstance(value, (list, str)) or len(value) != full_layers:
        return False
    return isinstance(value, list) or "pattern" in name or "layer" in name


def _tiny_layers(values):
    """Number of layers of the tiny model: two, or as many as it takes for the per-layer
    patterns (layer_types, ...) to contain every kind of layer of the full model."""
    full = _layer_count(values)
    patterns = [v for n, v in values.items()
                if _is_layer_pattern(n, v, full) and len(set(map(str, v))) > 1]
    # A shorter list of layer kinds repeats over the layers (recurrent_gemma's block_types).
    patterns += [v for n, v in values.items()
                 if n.endswith("types") and isinstance(v, (list, tuple)) and full
                 and len(v) < full and len(set(map(str, v))) > 1]
    return min(max([2] + [_covering_prefix(p) for p in patterns]), MAX_LAYERS), full


def _shrink(values):
    """Returns the constructor arguments that shrink a config's to_dict() `values`."""
    layers, full_layers = _tiny_layers(values)
    out = {}
    for name, value in values.items():
        if isinstance(value, dict) and "model_type" in value:
            out[name] = {**value, **_shrink(value)}
        elif name in LAYER_COUNT_NAMES and isinstance(value, int):
            out[name] = layers
        elif _is_layer_pattern(name, value, full_layers):
            out[name] = [_shrink_value(name, v) for v in value[:layers]] \
                if isinstance(value, list) else value[:layers]
        elif name == "per_layer_config" and isinstance(value, dict):
            out[name] = {k: _shrink(v) for k, v in value.items() if int(k) < layers}
        elif name.endswith("layer_ids") or name.endswith("layer_indices"):
            out[name] = [i for i in value if i < layers] if isinstance(value, list) else value
        elif name == "head_dim" and "qk_rope_head_dim" in values:
            out[name] = _latent_attention_head_dim(values)
        elif name in SIZES and isinstance(value, int) and not isinstance(value, bool):
            out[name] = _shrink_value(name, value)
        elif value is None and name in DERIVE_WHEN_NONE:
            out[name] = DERIVE_WHEN_NONE[name]  # some models read these without deriving them
        elif name in KV_HEAD_NAMES and isinstance(value, int) and value > 1:
            heads = next((values[h] for h in ("num_attention_heads", "n_head", "num_heads")
                          if isinstance(values.get(h), int)), None)
            out[name] = 4 if value == heads else 2
        elif name in TOKEN_ID_NAMES:
            out[name] = _tiny_token_id(value)
        elif name.startswith("use_") and name.endswith("_kernels") and value is True:
            out[name] = False  # CUDA-only kernel packages
    return out


def _latent_attention_head_dim(values):
    """Multi-head latent attention: head_dim is the rope part or the whole query head."""
    rope, nope = SIZES["qk_rope_head_dim"], SIZES["qk_nope_head_dim"]
    if values["head_dim"] == values.get("qk_rope_head_dim"):
        return rope
    return rope + nope if values["head_dim"] == (values.get("qk_nope_head_dim") or 0) + \
        values["qk_rope_head_dim"] else SIZES["head_dim"]


def _shrink_value(name, value):
    if name not in SIZES or not isinstance(value, int) or isinstance(value, bool):
        return value
    return SIZES[name] if name == "sliding_window" else min(value, SIZES[name])


def _tiny_token_id(value):
    if isinstance(value, list):
        return [_tiny_token_id(v) for v in value]
    if isinstance(value, int) and value >= VOCAB:
        return VOCAB - 1 - (value % 8)
    return value


def tiny_config(model_type):
    from transformers import CONFIG_MAPPING
    config_cls = CONFIG_MAPPING[model_type]
    kwargs = _shrink(config_cls().to_dict())
    for name, value in ARCH_OVERRIDES.get(model_type, {}).items():
        kwargs[name] = {**kwargs[name], **value} if isinstance(value, dict) else value
    config = config_cls(**kwargs)
    config.use_cache = True
    return config
