"""Rewrites an HF GLM checkpoint folder (GlmForCausalLM, save_pretrained) in place as THUDM's
ChatGLM2 / ChatGLM3 files store the same model: config.json with ChatGLMConfig's keys and the
tensors under their original names, q / k / v fused into query_key_value, plus the rotary
frequencies buffer those files carry. It is the inverse of HF's convert_glm_weights_to_hf.py
(STATE_DICT_MAPPING and convert_config), which is the oracle for what a name means.

usage: chatglm_layout.py FOLDER"""
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file, save_file

# HF GLM name fragment -> ChatGLM's, applied in this order (convert_glm_weights_to_hf.py reversed).
RENAMES = [
    ("lm_head.", "transformer.output_layer."),
    ("model.embed_tokens.", "transformer.embedding.word_embeddings."),
    ("model.layers.", "transformer.encoder.layers."),
    ("model.norm.", "transformer.encoder.final_layernorm."),
    ("self_attn.o_proj.", "self_attention.dense."),
    ("mlp.gate_up_proj.", "mlp.dense_h_to_4h."),
    ("mlp.down_proj.", "mlp.dense_4h_to_h."),
]


def chatglm_name(name):
    for old, new in RENAMES:
        name = name.replace(old, new)
    return name


def chatglm_config(glm):
    theta = glm["rope_parameters"]["rope_theta"]
    if glm["rope_parameters"].get("partial_rotary_factor", 0.5) != 0.5:
        raise SystemExit("ChatGLM rotates half of each head")
    return {
        "architectures": ["ChatGLMModel"], "model_type": "chatglm",
        "auto_map": {"AutoConfig": "configuration_chatglm.ChatGLMConfig",
                     "AutoModel": "modeling_chatglm.ChatGLMForConditionalGeneration",
                     "AutoModelForCausalLM": "modeling_chatglm.ChatGLMForConditionalGeneration"},
        "padded_vocab_size": glm["vocab_size"], "hidden_size": glm["hidden_size"],
        "ffn_hidden_size": glm["intermediate_size"], "num_layers": glm["num_hidden_layers"],
        "num_attention_heads": glm["num_attention_heads"], "kv_channels": glm["head_dim"],
        "multi_query_attention": True, "multi_query_group_num": glm["num_key_value_heads"],
        "seq_length": glm["max_position_embeddings"], "layernorm_epsilon": glm["rms_norm_eps"],
        "rope_ratio": theta / 10000.0, "add_qkv_bias": glm["attention_bias"],
        "add_bias_linear": False, "rmsnorm": True, "post_layer_norm": True,
        "apply_residual_connection_post_layernorm": False, "original_rope": True,
        "hidden_dropout": 0.0, "attention_dropout": glm["attention_dropout"],
        "apply_query_key_layer_scaling": True, "attention_softmax_in_fp32": True,
        "bias_dropout_fusion": True, "fp32_residual_connection": False, "quantization_bit": 0,
        "pre_seq_len": None, "prefix_projection": False, "tie_word_embeddings": False,
        "use_cache": True, "torch_dtype": "float32", "eos_token_id": glm["eos_token_id"],
        "pad_token_id": glm["pad_token_id"], "transformers_version": "4.30.2",
    }


def convert(folder):
    folder = pathlib.Path(folder)
    glm = json.loads((folder / "config.json").read_text())
    if glm.get("tie_word_embeddings"):
        raise SystemExit("ChatGLM's output_layer is its own tensor")
    weights = load_file(str(folder / "model.safetensors"))
    out = {}
    for name, tensor in weights.items():
        if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            continue
        if ".self_attn.q_proj." in name:
            parts = [weights[name.replace(".q_proj.", f".{p}_proj.")] for p in "qkv"]
            name = name.replace("self_attn.q_proj.", "self_attention.query_key_value.")
            tensor = torch.cat(parts, 0)
        out[chatglm_name(name)] = tensor.contiguous()
    rotary = glm["head_dim"] // 2  # ChatGLM's RotaryEmbedding(kv_channels // 2)
    theta = glm["rope_parameters"]["rope_theta"]
    out["transformer.rotary_pos_emb.inv_freq"] = 1.0 / (
        theta ** (torch.arange(0, rotary, 2, dtype=torch.float32) / rotary))
    save_file(out, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(chatglm_config(glm), indent=2, sort_keys=True)
                                        + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    convert(sys.argv[1])
