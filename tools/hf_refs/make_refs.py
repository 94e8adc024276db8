#!/usr/bin/env python3
"""Tiny random Hugging Face checkpoints of the hybrid families, saved and run by transformers.

Spillway reads Qwen3.5 / Qwen3.5-MoE / Qwen3-Next folders (config.json + safetensors) with its
own loader; these folders are the independent reference for it: written by transformers'
`save_pretrained` (so the tensor names, shapes and config keys are the library's own) and
with the logits transformers computes for fixed token ids (float32, CPU).
tests/engine/test_hf_hybrid.cpp (HfTransformersReference) loads each folder in Spillway and compares.

Needs transformers >= 5 with the qwen3_5 / qwen3_5_moe / qwen3_next models (not a Debian
package: this was run once on a machine that had it; the output is committed under
tests/data/hf_refs/). Usage: make_refs.py --out DIR [--seed N]

Every parameter is re-drawn so that nothing keeps its initial value (zero norm offsets, unit
dt_bias, ...): a loader that forgets the +1 of a norm or the sign of A_log gives other logits.
The vocabulary size is that of models/eval/qwen35/hf/tokenizer.json (50 characters), which
tests/data/hf_refs/README.md copies beside each folder (this script writes no tokenizer).
"""
import argparse
import json
import math
import os
import sys

import torch

SEQUENCES = [[1, 17, 4, 33, 8, 21, 45, 12, 3, 29, 40, 6], [1, 9, 9, 48, 27, 5, 14]]
VOCAB = 50


def text_common():
    return dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
                linear_num_key_heads=2, linear_num_value_heads=4, tie_word_embeddings=False,
                bos_token_id=1, eos_token_id=2, max_position_embeddings=256)


def qwen35_rope():
    # head_dim 16, half rotated: 8 dims = 4 frequency pairs = the M-RoPE sections' sum; text
    # positions make the interleaved sections one plain NeoX rotation.
    return {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "mrope_section": [2, 1, 1], "mrope_interleaved": True}


def moe_common():
    return dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                shared_expert_intermediate_size=48)


def build(name):
    import transformers as tf
    if name == "qwen3_5_text":
        cfg = tf.Qwen3_5TextConfig(**text_common(), intermediate_size=96, rope_parameters=qwen35_rope())
        return tf.Qwen3_5ForCausalLM(cfg)
    if name == "qwen3_5_moe_text":
        cfg = tf.Qwen3_5MoeTextConfig(**text_common(), **moe_common(), rope_parameters=qwen35_rope())
        return tf.Qwen3_5MoeForCausalLM(cfg)
    if name == "qwen3_5_moe":  # the image-text wrapper real checkpoints come in
        text = dict(text_common(), **moe_common(), rope_parameters=qwen35_rope())
        vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                      patch_size=8, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16)
        cfg = tf.Qwen3_5MoeConfig(text_config=text, vision_config=vision)
        return tf.Qwen3_5MoeForConditionalGeneration(cfg)
    if name == "qwen3_next":
        rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
        cfg = tf.Qwen3NextConfig(**text_common(), **moe_common(), intermediate_size=96, decoder_sparse_step=1,
                                 norm_topk_prob=True, rope_parameters=rope)
        return tf.Qwen3NextForCausalLM(cfg)
    raise ValueError(name)


def redraw(model, gen):
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
            else:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", default="qwen3_5_text,qwen3_5_moe_text,qwen3_5_moe,qwen3_next")
    args = ap.parse_args()
    import transformers
    print(f"transformers {transformers.__version__} torch {torch.__version__}", flush=True)
    failed = 0
    for name in args.only.split(","):
        try:
            torch.manual_seed(args.seed)
            model = build(name).float().eval()
            redraw(model, torch.Generator().manual_seed(args.seed))
            cases = []
            with torch.no_grad():
                for ids in SEQUENCES:
                    out = model(input_ids=torch.tensor([ids]), use_cache=False)
                    cases.append({"tokens": ids, "logits": out.logits[0].double().tolist()})
            d = os.path.join(args.out, name)
            model.save_pretrained(d, safe_serialization=True)
            with open(os.path.join(d, "reference.json"), "w") as f:
                json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                           "class": type(model).__name__, "seed": args.seed, "cases": cases}, f)
            from safetensors import safe_open
            with open(os.path.join(d, "keys.txt"), "w") as f:
                for fn in sorted(os.listdir(d)):
                    if fn.endswith(".safetensors"):
                        with safe_open(os.path.join(d, fn), "pt") as st:
                            for k in sorted(st.keys()):
                                f.write(f"{fn} {k} {list(st.get_slice(k).get_shape())} {st.get_slice(k).get_dtype()}\n")
            print(f"{name}: {type(model).__name__} saved, {sum(p.numel() for p in model.parameters())} params", flush=True)
        except Exception as e:  # one family failing must not lose the others
            failed += 1
            import traceback
            traceback.print_exc()
            print(f"{name}: FAILED {e!r}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
