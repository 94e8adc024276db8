"""Hugging Face folder export of a qwen35 model, in the layout of transformers'
Qwen3_5ForCausalLM (model_type qwen3_5_text): config.json, model.safetensors, tokenizer.json.

    python3 tools/train/export_hf.py MODEL.gguf OUT_DIR [--f16]

The model is read back from its GGUF (load.py) and written the way a real HF checkpoint
stores it, i.e. undoing what llama.cpp's converter (conversion/qwen.py) does to one:
- RMSNorm weights are zero-centred (HF computes x_norm * (1 + w); the GGUF stores w + 1),
  except linear_attn.norm (ssm_norm), stored as it is;
- linear_attn.A_log (the GGUF stores ssm_a = -exp(A_log));
- linear_attn.conv1d.weight is [conv_dim, 1, K] (the GGUF squeezes the middle axis);
- the value heads of every delta-net tensor are in HF's grouped order (value head g*r + j
  belongs to key head g; repeat_interleave in transformers), where the converter tiles them
  (GGUF head j*Hk + g, read with h % Hk): the v rows of in_proj_qkv and their conv1d
  channels, in_proj_z, in_proj_b, in_proj_a, dt_bias, A_log and out_proj's columns.
Attention layers need nothing: q_proj already holds [q | gate] per head, q/k rotate-half.

Matrices are F16 with --f16 (the trained GGUFs' type, so the values are the same bits),
F32 otherwise; 1-D tensors are F32. The tokenizer.json is a SentencePiece-style BPE one over
the character vocabulary (no merges: one token per character, as in the GGUF).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402
import vocab  # noqa: E402


def hf_tensors(model, cfg):
    """name -> float32 numpy array, HF layout (see the module docstring)."""
    assert cfg["arch"] == "qwen35", "export_hf writes qwen35 (Qwen3.5) models"
    nk, nv, S = cfg["ssm_group_count"], cfg["ssm_time_step_rank"], cfg["ssm_state_size"]
    r = nv // nk
    tiled = np.array([(h % r) * nk + h // r for h in range(nv)])        # HF head -> model head
    v_rows = (tiled[:, None] * S + np.arange(S)[None, :]).reshape(-1)   # HF v row -> model v row
    n = lambda t: t.detach().cpu().double().numpy()  # noqa: E731
    out = {"model.embed_tokens.weight": n(model.embed.weight),
           "model.norm.weight": n(model.out_norm) - 1,
           "lm_head.weight": n(model.output.weight)}
    for i, b in enumerate(model.blocks):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = n(b.attn_norm) - 1
        out[p + "post_attention_layernorm.weight"] = n(b.ffn_norm) - 1
        m = b.mixer
        if b.is_attention:
            for mod, name in ((m.q, "q_proj"), (m.k, "k_proj"), (m.v, "v_proj"), (m.o, "o_proj")):
                out[p + "self_attn." + name + ".weight"] = n(mod.weight)
            out[p + "self_attn.q_norm.weight"] = n(m.q_norm) - 1
            out[p + "self_attn.k_norm.weight"] = n(m.k_norm) - 1
        else:
            la = p + "linear_attn."
            qk = 2 * nk * S
            qkv = n(m.qkv.weight)
            out[la + "in_proj_qkv.weight"] = np.concatenate([qkv[:qk], qkv[qk:][v_rows]])
            out[la + "in_proj_z.weight"] = n(m.gate.weight)[v_rows]
            out[la + "in_proj_b.weight"] = n(m.beta.weight)[tiled]
            out[la + "in_proj_a.weight"] = n(m.alpha.weight)[tiled]
            conv = n(m.conv)                                            # [conv_dim, K]
            out[la + "conv1d.weight"] = np.concatenate([conv[:qk], conv[qk:][v_rows]])[:, None, :]
            out[la + "dt_bias"] = n(m.dt_bias)[tiled]
            out[la + "A_log"] = n(m.A_log)[tiled]
            out[la + "norm.weight"] = n(m.norm)
            out[la + "out_proj.weight"] = n(m.out.weight)[:, v_rows]
        for mod, name in ((b.ffn.gate, "gate_proj"), (b.ffn.up, "up_proj"), (b.ffn.down, "down_proj")):
            out[p + "mlp." + name + ".weight"] = n(mod.weight)
    return out


def hf_config(cfg):
    layer_types = ["full_attention" if (i + 1) % cfg["full_attention_interval"] == 0 else "linear_attention"
                   for i in range(cfg["n_layer"])]
    return {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
        "hidden_size": cfg["n_embd"], "num_hidden_layers": cfg["n_layer"], "intermediate_size": cfg["n_ff"],
        "num_attention_heads": cfg["n_head"], "num_key_value_heads": cfg["n_head_kv"],
        "head_dim": cfg["head_dim"], "rms_norm_eps": cfg["rms_eps"], "vocab_size": cfg["n_vocab"],
        "max_position_embeddings": 256, "tie_word_embeddings": False, "hidden_act": "silu",
        "attention_bias": False, "layer_types": layer_types,
        "rope_parameters": {"rope_type": "default", "rope_theta": cfg["rope_base"],
                            "partial_rotary_factor": cfg["rope_dim"] / cfg["head_dim"],
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        "linear_conv_kernel_dim": cfg["ssm_conv_kernel"], "linear_key_head_dim": cfg["ssm_state_size"],
        "linear_value_head_dim": cfg["ssm_state_size"], "linear_num_key_heads": cfg["ssm_group_count"],
        "linear_num_value_heads": cfg["ssm_time_step_rank"],
        "bos_token_id": vocab.BOS, "eos_token_id": vocab.EOS, "torch_dtype": "float32",
    }


def write_safetensors(path, tensors, f16):
    """F32 tensors first, then the F16 matrices: every tensor starts aligned to its element."""
    arrays = {k: np.ascontiguousarray(v, dtype=np.float16 if f16 and v.ndim >= 2 else np.float32)
              for k, v in tensors.items()}
    order = sorted(arrays, key=lambda k: (arrays[k].dtype != np.float32, k))
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for k in order:
        a = arrays[k]
        header[k] = {"dtype": "F16" if a.dtype == np.float16 else "F32", "shape": list(a.shape),
                     "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for k in order:
            f.write(arrays[k].tobytes())


def write_tokenizer(path):
    specials = set(vocab.SPECIALS)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}
                         for i, t in enumerate(vocab.TOKENS) if t in specials],
        # SentencePiece-style like the GGUF's "llama" tokenizer, no space prefix.
        "normalizer": None, "post_processor": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(vocab.TOKENS)}, "merges": []},
    }
    with open(path, "w") as f:
        json.dump(tok, f, indent=1)


def export_hf(model, cfg, out_dir, f16=False):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), hf_tensors(model, cfg), f16)
    write_tokenizer(os.path.join(out_dir, "tokenizer.json"))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--f16", action="store_true", help="matrices in F16 (the trained GGUFs' type)")
    args = ap.parse_args()
    with torch.no_grad():
        model, cfg = load.load(args.gguf)
    export_hf(model, cfg, args.out_dir, args.f16)
