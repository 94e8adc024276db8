"""GGUF export (real llama.cpp tensor names and metadata keys per architecture) and the
parity fixtures (PyTorch float64 logits on fixed inputs) stored beside each model."""
import copy
import json

import torch

import gguf
import tasks
import vocab
from gguf import U32

IDENTITY_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
GEN_LEN = 12


def _np(t):
    return t.detach().cpu().float().numpy()


def export_gguf(model, cfg, path, f16=False):
    arch = cfg["arch"]
    w = gguf.GGUFWriter()
    w.add("general.architecture", arch)
    w.add("general.name", f"spillway-{arch}-tasks")
    w.add("general.alignment", U32(gguf.ALIGNMENT))
    w.add("general.file_type", U32(1 if f16 else 0))
    a = arch + "."
    w.add(a + "context_length", U32(256))
    w.add(a + "embedding_length", U32(cfg["n_embd"]))
    w.add(a + "block_count", U32(cfg["n_layer"]))
    w.add(a + "feed_forward_length", U32(cfg["n_ff"]))
    w.add(a + "attention.head_count", U32(cfg["n_head"]))
    w.add(a + "attention.head_count_kv", U32(cfg["n_head_kv"]))
    w.add(a + "attention.key_length", U32(cfg["head_dim"]))
    w.add(a + "attention.value_length", U32(cfg["head_dim"]))
    w.add(a + "attention.layer_norm_rms_epsilon", float(cfg["rms_eps"]))
    w.add(a + "rope.freq_base", float(cfg["rope_base"]))
    w.add(a + "rope.dimension_count", U32(cfg.get("rope_dim", cfg["head_dim"])))
    w.add(a + "vocab_size", U32(cfg["n_vocab"]))
    if arch == "qwen3moe":
        w.add(a + "expert_count", U32(cfg["n_expert"]))
        w.add(a + "expert_used_count", U32(cfg["n_expert_used"]))
        w.add(a + "expert_feed_forward_length", U32(cfg["expert_ff"]))
    if arch == "qwen35":
        half = cfg["rope_dim"] // 2
        w.add(a + "rope.dimension_sections", [half - 2 * (half // 3), half // 3, half // 3, 0],
              array_type=gguf.T_INT32)
        w.add(a + "full_attention_interval", U32(cfg["full_attention_interval"]))
        w.add(a + "ssm.conv_kernel", U32(cfg["ssm_conv_kernel"]))
        w.add(a + "ssm.state_size", U32(cfg["ssm_state_size"]))
        w.add(a + "ssm.group_count", U32(cfg["ssm_group_count"]))
        w.add(a + "ssm.time_step_rank", U32(cfg["ssm_time_step_rank"]))
        w.add(a + "ssm.inner_size", U32(cfg["ssm_time_step_rank"] * cfg["ssm_state_size"]))
    if arch == "llada":
        w.add(a + "attention.causal", False)
        w.add("diffusion.shift_logits", False)

    toks = vocab.tokens_for(arch)
    types = [vocab.TYPE_UNKNOWN, vocab.TYPE_CONTROL, vocab.TYPE_CONTROL] + \
        [vocab.TYPE_NORMAL] * len(vocab.CHARS) + ([vocab.TYPE_CONTROL] if arch == "llada" else [])
    w.add("tokenizer.ggml.model", "llama")
    w.add("tokenizer.ggml.pre", "default")
    w.add("tokenizer.ggml.tokens", toks)
    w.add("tokenizer.ggml.scores", [0.0] * len(toks), array_type=gguf.T_FLOAT32)
    w.add("tokenizer.ggml.token_type", types, array_type=gguf.T_INT32)
    w.add("tokenizer.ggml.unknown_token_id", U32(vocab.UNK))
    w.add("tokenizer.ggml.bos_token_id", U32(vocab.BOS))
    w.add("tokenizer.ggml.eos_token_id", U32(vocab.EOS))
    w.add("tokenizer.ggml.padding_token_id", U32(vocab.EOS))
    if arch == "llada":
        w.add("tokenizer.ggml.mask_token_id", U32(vocab.mask_id(arch)))
    w.add("tokenizer.ggml.add_bos_token", True)
    w.add("tokenizer.ggml.add_eos_token", False)
    w.add("tokenizer.ggml.add_space_prefix", False)
    w.add("tokenizer.chat_template", IDENTITY_TEMPLATE)

    def t(name, x):  # 1-D tensors and the router stay F32, as llama.cpp's converter keeps them
        w.add_tensor(name, _np(x), f16=f16 and x.dim() >= 2 and "gate_inp" not in name)
    t("token_embd.weight", model.embed.weight)
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        t(p + "attn_norm.weight", b.attn_norm)
        t(p + ("post_attention_norm.weight" if arch == "qwen35" else "ffn_norm.weight"), b.ffn_norm)
        m = b.mixer
        if b.is_attention:
            t(p + "attn_q.weight", m.q.weight)
            t(p + "attn_k.weight", m.k.weight)
            t(p + "attn_v.weight", m.v.weight)
            t(p + "attn_output.weight", m.o.weight)
            if m.qk_norm:
                t(p + "attn_q_norm.weight", m.q_norm)
                t(p + "attn_k_norm.weight", m.k_norm)
        else:
            t(p + "attn_qkv.weight", m.qkv.weight)
            t(p + "attn_gate.weight", m.gate.weight)
            t(p + "ssm_beta.weight", m.beta.weight)
            t(p + "ssm_alpha.weight", m.alpha.weight)
            t(p + "ssm_conv1d.weight", m.conv)          # ne {K, conv_dim}
            t(p + "ssm_dt.bias", m.dt_bias)
            t(p + "ssm_a", m.ssm_a())                   # -exp(A_log), as the converter stores
            t(p + "ssm_norm.weight", m.norm)
            t(p + "ssm_out.weight", m.out.weight)
        f = b.ffn
        if hasattr(f, "router"):
            t(p + "ffn_gate_inp.weight", f.router.weight)  # ne {n_embd, n_expert}
            t(p + "ffn_gate_exps.weight", f.gate)          # ne {n_embd, n_ff_exp, n_expert}
            t(p + "ffn_up_exps.weight", f.up)
            t(p + "ffn_down_exps.weight", f.down)          # ne {n_ff_exp, n_embd, n_expert}
        else:
            t(p + "ffn_gate.weight", f.gate.weight)
            t(p + "ffn_up.weight", f.up.weight)
            t(p + "ffn_down.weight", f.down.weight)
    t("output_norm.weight", model.out_norm)
    t("output.weight", model.output.weight)
    w.write(path)


def parity_inputs(arch):
    """Fixed token sequences: BOS + an evaluation prompt + its answer + EOS (AR), or
    BOS + prompt + a canvas with masks (diffusion)."""
    seqs = []
    for task in ("add", "recall", "brackets"):
        it = tasks.eval_items(task, 1)[0]
        p = [vocab.BOS] + vocab.encode(it["prompt"])
        a = vocab.encode(it["answer"]) + [vocab.EOS]
        if arch == "llada":
            m = vocab.mask_id(arch)
            a = (a + [vocab.EOS] * GEN_LEN)[:GEN_LEN]
            a = [x if j % 3 == 0 else m for j, x in enumerate(a)] if task != "add" else [m] * GEN_LEN
        seqs.append(p + a)
    return seqs


def write_parity(model, cfg, path, gguf_name, sha256):
    ref = copy.deepcopy(model).double().cpu().eval()
    cases = []
    with torch.no_grad():
        for seq in parity_inputs(cfg["arch"]):
            logits = ref(torch.tensor([seq]))[0]
            cases.append({"tokens": seq, "logits": [[float(f"{v:.9g}") for v in row]
                                                    for row in logits.tolist()]})
    doc = {"model": gguf_name, "model_sha256": sha256, "arch": cfg["arch"],
           "n_vocab": cfg["n_vocab"], "attention": "bidirectional" if cfg["arch"] == "llada" else "causal",
           "reference": "tools/train/models.py in float64 (torch), all positions' logits",
           "cases": cases}
    if cfg["arch"] == "qwen3moe":
        with torch.no_grad():
            doc["cases_top2"] = [{"tokens": c["tokens"], "logits": [[float(f"{v:.9g}") for v in row]
                                  for row in ref(torch.tensor([c["tokens"]]), n_used=2)[0].tolist()]}
                                 for c in cases]
    with open(path, "w") as f:
        json.dump(doc, f)
