"""Loads an exported GGUF back into the PyTorch model (checks the export, re-evaluates a
committed file): `python3 tools/train/load.py MODEL.gguf [--n N] [--n-used K]`."""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deps  # noqa: E402,F401  (installs PyTorch on first use)
import torch  # noqa: E402

import gguf  # noqa: E402
import models  # noqa: E402


def config_from(r):
    m = r.metadata
    arch = m["general.architecture"]
    a = arch + "."
    cfg = dict(arch=arch, n_embd=m[a + "embedding_length"], n_layer=m[a + "block_count"],
               n_head=m[a + "attention.head_count"], n_head_kv=m[a + "attention.head_count_kv"],
               head_dim=m[a + "attention.key_length"], n_ff=m[a + "feed_forward_length"],
               rms_eps=m[a + "attention.layer_norm_rms_epsilon"], rope_base=m[a + "rope.freq_base"],
               rope_dim=m[a + "rope.dimension_count"], n_vocab=len(m["tokenizer.ggml.tokens"]))
    if arch == "qwen3moe":
        cfg.update(n_expert=m[a + "expert_count"], n_expert_used=m[a + "expert_used_count"],
                   expert_ff=m[a + "expert_feed_forward_length"])
    if arch == "qwen35":
        cfg.update(full_attention_interval=m[a + "full_attention_interval"],
                   ssm_conv_kernel=m[a + "ssm.conv_kernel"], ssm_state_size=m[a + "ssm.state_size"],
                   ssm_group_count=m[a + "ssm.group_count"], ssm_time_step_rank=m[a + "ssm.time_step_rank"])
    return cfg


def load(path):
    r = gguf.GGUFReader(path)
    cfg = config_from(r)
    model = models.Model(cfg)
    T = lambda n: torch.from_numpy(r.tensor(n).copy())  # noqa: E731
    with torch.no_grad():
        model.embed.weight.copy_(T("token_embd.weight"))
        model.out_norm.copy_(T("output_norm.weight"))
        model.output.weight.copy_(T("output.weight"))
        for i, b in enumerate(model.blocks):
            p = f"blk.{i}."
            b.attn_norm.copy_(T(p + "attn_norm.weight"))
            b.ffn_norm.copy_(T(p + ("post_attention_norm.weight" if cfg["arch"] == "qwen35" else "ffn_norm.weight")))
            m = b.mixer
            if b.is_attention:
                for mod, n in ((m.q, "attn_q"), (m.k, "attn_k"), (m.v, "attn_v"), (m.o, "attn_output")):
                    mod.weight.copy_(T(p + n + ".weight"))
                if m.qk_norm:
                    m.q_norm.copy_(T(p + "attn_q_norm.weight"))
                    m.k_norm.copy_(T(p + "attn_k_norm.weight"))
            else:
                for mod, n in ((m.qkv, "attn_qkv"), (m.gate, "attn_gate"), (m.beta, "ssm_beta"),
                               (m.alpha, "ssm_alpha"), (m.out, "ssm_out")):
                    mod.weight.copy_(T(p + n + ".weight"))
                m.conv.copy_(T(p + "ssm_conv1d.weight"))
                m.dt_bias.copy_(T(p + "ssm_dt.bias"))
                m.A_log.copy_(torch.log(-T(p + "ssm_a")))
                m.norm.copy_(T(p + "ssm_norm.weight"))
            f = b.ffn
            if hasattr(f, "router"):
                f.router.weight.copy_(T(p + "ffn_gate_inp.weight"))
                f.gate.copy_(T(p + "ffn_gate_exps.weight"))
                f.up.copy_(T(p + "ffn_up_exps.weight"))
                f.down.copy_(T(p + "ffn_down_exps.weight"))
            else:
                f.gate.weight.copy_(T(p + "ffn_gate.weight"))
                f.up.weight.copy_(T(p + "ffn_up.weight"))
                f.down.weight.copy_(T(p + "ffn_down.weight"))
    return model.eval(), cfg


if __name__ == "__main__":
    import train
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--n-used", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--jsonl", default=None, help="per-item outputs, in bench/eval.py's --out format")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, cfg = load(args.gguf)
    import json
    import tasks
    out = open(args.jsonl, "w") if args.jsonl else None
    for task in tasks.TASKS:
        items = tasks.eval_items(task, args.n)
        outs = train.generate(model, cfg["arch"], [it["prompt"] for it in items], "cpu", args.n_used)
        k = 0
        for it, o in zip(items, outs):
            ok = tasks.grade(task, it["prompt"], it["answer"], o)
            k += ok
            if out:
                out.write(json.dumps({**it, "output": o, "correct": ok}) + "\n")
        print(f"{task} {k / args.n:.3f} ({k}/{args.n})", flush=True)
