"""PyTorch definitions of the four architectures with the math Spillway (and llama.cpp) runs.

Written for torch 1.13 (Debian, CPU) and torch 2.x (CUDA) alike: no torch.compile, no
scaled_dot_product_attention, no F.rms_norm. Parameter shapes follow PyTorch's Linear
convention [out, in], which is exactly numpy order of the GGUF tensor (ggml ne = {in, out}).

- llama:    RMSNorm, rotary on adjacent pairs (2i, 2i+1) as GGUF llama files store q/k,
            GQA, SwiGLU, causal.
- qwen3moe: as llama, plus per-head q/k RMSNorm before a NeoX (i, i+hd/2) rotary, and an
            MoE FFN: softmax router over all experts, top-k, weights renormalised over the
            top-k (denominator clamped at 6.1035e-5), SwiGLU experts, no shared expert.
- qwen35:   layer i is gated attention iff (i+1) % full_attention_interval == 0, else a
            Gated DeltaNet (value head h reads key head h % Hk: "tiled"), dense SwiGLU FFN.
- llada:    llama-shaped, bidirectional attention (no causal mask), MHA.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

ROUTER_EPS = 6.1035e-5


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(n_rot, base, T, device):
    i = torch.arange(0, n_rot, 2, dtype=torch.float64, device=device)
    inv = base ** (-i / n_rot)
    pos = torch.arange(T, dtype=torch.float64, device=device)
    ang = pos[:, None] * inv[None, :]
    return torch.cos(ang), torch.sin(ang)  # [T, n_rot/2], float64


def rope(x, cos, sin, neox):
    """x [B, H, T, hd]; rotates the first 2*cos.shape[-1] dims of each head."""
    n_rot = cos.shape[-1] * 2
    xr, rest = x[..., :n_rot], x[..., n_rot:]
    if neox:
        x0, x1 = xr[..., : n_rot // 2], xr[..., n_rot // 2:]
        y = torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)
    else:
        x0, x1 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)
    return torch.cat([y, rest], -1)


def attend(q, k, v, causal, key_mask):
    """q [B,H,T,hd], k/v [B,Hkv,T,hd]; query head h uses kv head h // (H/Hkv)."""
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    T = q.shape[2]
    if causal:
        m = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(m, float("-inf"))
    if key_mask is not None:  # [B, T] True = real token
        s = s.masked_fill(~key_mask[:, None, None, :], float("-inf"))
    return torch.softmax(s, -1) @ v


def _linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False)


class SwiGLU(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.gate, self.up, self.down = _linear(d, ff), _linear(d, ff), _linear(ff, d)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """All experts are computed densely (tiny sizes), then mixed with the sparse top-k weights."""

    def __init__(self, d, ff, n_expert, n_used):
        super().__init__()
        self.n_expert, self.n_used = n_expert, n_used
        self.router = _linear(d, n_expert)
        self.gate = nn.Parameter(torch.randn(n_expert, ff, d) * 0.02)
        self.up = nn.Parameter(torch.randn(n_expert, ff, d) * 0.02)
        self.down = nn.Parameter(torch.randn(n_expert, d, ff) * 0.02)
        self.aux_loss = None

    def forward(self, x, n_used=None):
        k = n_used or self.n_used
        p = torch.softmax(self.router(x), -1)          # [B,T,E]
        topv, topi = p.topk(k, dim=-1)
        w = topv / topv.sum(-1, keepdim=True).clamp(min=ROUTER_EPS)
        weights = torch.zeros_like(p).scatter(-1, topi, w)       # [B,T,E]
        h = F.silu(torch.einsum("btd,efd->btef", x, self.gate)) * \
            torch.einsum("btd,efd->btef", x, self.up)
        y = torch.einsum("btef,edf->bted", h, self.down)
        # switch-style load balancing: fraction routed x mean probability
        frac = torch.zeros_like(p).scatter(-1, topi, 1.0).mean((0, 1)) / k
        self.aux_loss = self.n_expert * (frac * p.mean((0, 1))).sum()
        return torch.einsum("bted,bte->btd", y, weights)


class Attention(nn.Module):
    def __init__(self, cfg, qk_norm, neox, gated):
        super().__init__()
        d, H, Hkv, hd = cfg["n_embd"], cfg["n_head"], cfg["n_head_kv"], cfg["head_dim"]
        self.H, self.Hkv, self.hd, self.gated = H, Hkv, hd, gated
        self.q = _linear(d, H * hd * (2 if gated else 1))
        self.k, self.v, self.o = _linear(d, Hkv * hd), _linear(d, Hkv * hd), _linear(H * hd, d)
        self.qk_norm, self.neox, self.eps = qk_norm, neox, cfg["rms_eps"]
        if qk_norm:
            self.q_norm = nn.Parameter(torch.ones(hd))
            self.k_norm = nn.Parameter(torch.ones(hd))

    def forward(self, x, cos, sin, causal, key_mask):
        B, T, _ = x.shape
        qg = self.q(x).view(B, T, self.H, -1)
        if self.gated:  # [q_h | gate_h] interleaved per head
            q, gate = qg[..., : self.hd], qg[..., self.hd:]
        else:
            q = qg
        k = self.k(x).view(B, T, self.Hkv, self.hd)
        v = self.v(x).view(B, T, self.Hkv, self.hd)
        if self.qk_norm:
            q, k = rms_norm(q, self.q_norm, self.eps), rms_norm(k, self.k_norm, self.eps)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = rope(q, cos, sin, self.neox), rope(k, cos, sin, self.neox)
        a = attend(q, k, v, causal, key_mask).transpose(1, 2)    # [B,T,H,hd]
        if self.gated:
            a = a * torch.sigmoid(gate)
        return self.o(a.reshape(B, T, -1))


def delta_rule_sequential(q, k, v, g, beta):
    """The gated delta rule token by token, from a zero state: per head, S <- exp(g_t) S;
    d = beta_t (v_t - S^T k_t); S <- S + k_t d^T; o_t = S^T q_t. q, k, v: [B, T, H, d];
    g, beta: [B, T, H]. Returns o [B, T, H, dv] (unscaled)."""
    B, T, H, dk = k.shape
    S = torch.zeros(B, H, dk, v.shape[-1], device=k.device, dtype=k.dtype)
    decay = torch.exp(g)
    outs = []
    for t in range(T):
        S = decay[:, t, :, None, None] * S
        kt, qt = k[:, t], q[:, t]
        mem = torch.einsum("bhkv,bhk->bhv", S, kt)
        dlt = beta[:, t, :, None] * (v[:, t] - mem)
        S = S + kt[..., :, None] * dlt[..., None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, qt))
    return torch.stack(outs, 1)


def delta_rule_chunked(q, k, v, g, beta, chunk=64):
    """The same recurrence in chunks of `chunk` tokens with a handful of matmuls each (the
    WY form of the gated delta net papers): with G_t the cumulative log-decay inside a chunk
    and S0 the state entering it, the writes d solve the unit lower-triangular system
    d_s + sum_{r<s} beta_s e^{G_s-G_r} (k_s.k_r) d_r = beta_s (v_s - e^{G_s} S0^T k_s), and
    o_t = e^{G_t} S0^T q_t + sum_{r<=t} e^{G_t-G_r} (q_t.k_r) d_r. Equal to
    delta_rule_sequential up to rounding (tools/train/models.py --self-test)."""
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))           # [B, H, T, d]
    g, beta = g.transpose(1, 2), beta.transpose(1, 2)           # [B, H, T]
    S = torch.zeros(B, H, dk, dv, device=k.device, dtype=k.dtype)
    outs = []
    for c0 in range(0, T, chunk):
        qc, kc, vc = q[:, :, c0:c0 + chunk], k[:, :, c0:c0 + chunk], v[:, :, c0:c0 + chunk]
        G = torch.cumsum(g[:, :, c0:c0 + chunk], dim=-1)         # [B, H, C]
        bc = beta[:, :, c0:c0 + chunk]
        C = G.shape[-1]
        diff = G[..., :, None] - G[..., None, :]                 # G_t - G_r
        lower = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()
        decay = torch.exp(diff.masked_fill(~lower, float("-inf")))  # e^{G_t-G_r}, r <= t
        eye = torch.eye(C, dtype=k.dtype, device=k.device)
        A = (bc[..., :, None] * decay * (kc @ kc.transpose(-1, -2))).tril(-1) + eye
        rhs = bc[..., None] * (vc - torch.exp(G)[..., None] * (kc @ S))
        d = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
        o = torch.exp(G)[..., None] * (qc @ S) + (decay * (qc @ kc.transpose(-1, -2))) @ d
        outs.append(o)
        GC = G[..., -1:]                                         # [B, H, 1]
        S = torch.exp(GC)[..., None] * S + (torch.exp(GC - G)[..., None] * kc).transpose(-1, -2) @ d
    return torch.cat(outs, 2).transpose(1, 2)


class GatedDeltaNet(nn.Module):
    """Decay, read, write, output from the updated state (delta_rule_* above)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.Hk, self.Hv, self.dk = cfg["ssm_group_count"], cfg["ssm_time_step_rank"], cfg["ssm_state_size"]
        self.dv, self.K, self.eps = self.dk, cfg["ssm_conv_kernel"], cfg["rms_eps"]
        self.conv_dim = 2 * self.Hk * self.dk + self.Hv * self.dv
        self.qkv = _linear(d, self.conv_dim)
        self.gate = _linear(d, self.Hv * self.dv)          # z
        self.beta = _linear(d, self.Hv)
        self.alpha = _linear(d, self.Hv)
        self.conv = nn.Parameter(torch.randn(self.conv_dim, self.K) / math.sqrt(self.K))
        self.dt_bias = nn.Parameter(torch.zeros(self.Hv))
        self.A_log = nn.Parameter(torch.log(torch.empty(self.Hv).uniform_(1, 16)))
        self.norm = nn.Parameter(torch.ones(self.dv))
        self.out = _linear(self.Hv * self.dv, d)

    # The token-by-token recurrence (the engine's order of operations: evaluation, parity
    # files) or the chunked form (training: tools/train/train.py --delta-rule).
    sequential = True

    def ssm_a(self):
        return -torch.exp(self.A_log)

    def forward(self, x):
        B, T, _ = x.shape
        qkv = self.qkv(x)
        z = self.gate(x).view(B, T, self.Hv, self.dv)
        beta = torch.sigmoid(self.beta(x))
        g = F.softplus(self.alpha(x) + self.dt_bias) * self.ssm_a()
        u = F.conv1d(F.pad(qkv.transpose(1, 2), (self.K - 1, 0)), self.conv[:, None, :],
                     groups=self.conv_dim)
        u = F.silu(u.transpose(1, 2))
        nq = self.Hk * self.dk
        q = u[..., :nq].reshape(B, T, self.Hk, self.dk)
        k = u[..., nq:2 * nq].reshape(B, T, self.Hk, self.dk)
        v = u[..., 2 * nq:].reshape(B, T, self.Hv, self.dv)
        q = q / q.norm(dim=-1, keepdim=True).clamp(min=self.eps)
        k = k / k.norm(dim=-1, keepdim=True).clamp(min=self.eps)
        idx = torch.arange(self.Hv, device=x.device) % self.Hk    # tiled V->K map (qwen35)
        q, k = q[:, :, idx], k[:, :, idx]
        recurrence = delta_rule_sequential if self.sequential else delta_rule_chunked
        o = recurrence(q, k, v, g, beta) / math.sqrt(self.dk)          # [B,T,Hv,dv]
        o = rms_norm(o, self.norm, self.eps) * F.silu(z)
        return self.out(o.reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        arch, d = cfg["arch"], cfg["n_embd"]
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.ffn_norm = nn.Parameter(torch.ones(d))
        self.eps = cfg["rms_eps"]
        self.is_attention = True
        if arch == "qwen35" and (index + 1) % cfg["full_attention_interval"] != 0:
            self.is_attention = False
            self.mixer = GatedDeltaNet(cfg)
        else:
            self.mixer = Attention(cfg, qk_norm=arch in ("qwen3moe", "qwen35"),
                                   neox=arch in ("qwen3moe", "qwen35"), gated=arch == "qwen35")
        if arch == "qwen3moe":
            self.ffn = MoE(d, cfg["expert_ff"], cfg["n_expert"], cfg["n_expert_used"])
        else:
            self.ffn = SwiGLU(d, cfg["n_ff"])

    def forward(self, x, cos, sin, causal, key_mask, n_used):
        h = rms_norm(x, self.attn_norm, self.eps)
        x = x + (self.mixer(h, cos, sin, causal, key_mask) if self.is_attention else self.mixer(h))
        h = rms_norm(x, self.ffn_norm, self.eps)
        return x + (self.ffn(h, n_used) if isinstance(self.ffn, MoE) else self.ffn(h))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg["n_vocab"], cfg["n_embd"])
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg["n_layer"]))
        self.out_norm = nn.Parameter(torch.ones(cfg["n_embd"]))
        self.output = _linear(cfg["n_embd"], cfg["n_vocab"])
        self.causal = cfg["arch"] != "llada"
        self.n_rot = cfg.get("rope_dim", cfg["head_dim"])
        for name, p in self.named_parameters():
            if p.dim() == 2 and "conv" not in name:
                nn.init.normal_(p, std=0.02)
        for b in self.blocks:
            o = b.mixer.o if b.is_attention else b.mixer.out
            nn.init.normal_(o.weight, std=0.02 / math.sqrt(2 * cfg["n_layer"]))

    def forward(self, tokens, key_mask=None, n_used=None):
        B, T = tokens.shape
        x = self.embed(tokens)
        cos, sin = rope_tables(self.n_rot, self.cfg["rope_base"], T, tokens.device)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        for b in self.blocks:
            x = b(x, cos, sin, self.causal, key_mask, n_used)
        return self.output(rms_norm(x, self.out_norm, self.cfg["rms_eps"]))

    def aux_loss(self):
        losses = [b.ffn.aux_loss for b in self.blocks if isinstance(b.ffn, MoE)]
        return sum(losses) / len(losses) if losses else None


CONFIGS = {
    # "s": sized for ~20 minutes of training on 2 CPU cores; "l": larger, for a GPU.
    ("llama", "s"): dict(arch="llama", n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                         head_dim=32, n_ff=384, rms_eps=1e-5, rope_base=10000.0),
    ("llama", "l"): dict(arch="llama", n_embd=192, n_layer=6, n_head=6, n_head_kv=2,
                         head_dim=32, n_ff=512, rms_eps=1e-5, rope_base=10000.0),
    ("qwen3moe", "s"): dict(arch="qwen3moe", n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                            head_dim=32, n_ff=64, expert_ff=64, n_expert=16, n_expert_used=4,
                            rms_eps=1e-6, rope_base=10000.0),
    ("qwen3moe", "l"): dict(arch="qwen3moe", n_embd=128, n_layer=6, n_head=4, n_head_kv=2,
                            head_dim=32, n_ff=96, expert_ff=96, n_expert=16, n_expert_used=4,
                            rms_eps=1e-6, rope_base=10000.0),
    ("qwen35", "s"): dict(arch="qwen35", n_embd=128, n_layer=4, n_head=4, n_head_kv=2,
                          head_dim=32, rope_dim=16, n_ff=384, rms_eps=1e-6, rope_base=10000000.0,
                          full_attention_interval=4, ssm_conv_kernel=4, ssm_state_size=32,
                          ssm_group_count=2, ssm_time_step_rank=4),
    ("qwen35", "l"): dict(arch="qwen35", n_embd=128, n_layer=8, n_head=4, n_head_kv=2,
                          head_dim=32, rope_dim=16, n_ff=384, rms_eps=1e-6, rope_base=10000000.0,
                          full_attention_interval=4, ssm_conv_kernel=4, ssm_state_size=32,
                          ssm_group_count=2, ssm_time_step_rank=4),
    ("llada", "s"): dict(arch="llada", n_embd=128, n_layer=4, n_head=4, n_head_kv=4,
                         head_dim=32, n_ff=384, rms_eps=1e-5, rope_base=10000.0),
    ("llada", "l"): dict(arch="llada", n_embd=192, n_layer=6, n_head=6, n_head_kv=6,
                         head_dim=32, n_ff=512, rms_eps=1e-5, rope_base=10000.0),
}
ARCHS = sorted({a for a, _ in CONFIGS})


def _self_test():
    """The chunked delta rule against the sequential one, values and gradients (float64)."""
    torch.manual_seed(0)
    B, T, H, d = 3, 70, 4, 16
    q, k, v = (torch.randn(B, T, H, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    g = (-F.softplus(torch.randn(B, T, H, dtype=torch.float64))).requires_grad_()
    beta = torch.sigmoid(torch.randn(B, T, H, dtype=torch.float64)).requires_grad_()
    worst = 0.0
    for chunk in (1, 7, 32, 64, 128):
        kn = k / k.norm(dim=-1, keepdim=True)
        qn = q / q.norm(dim=-1, keepdim=True)
        a = delta_rule_sequential(qn, kn, v, g, beta)
        b = delta_rule_chunked(qn, kn, v, g, beta, chunk=chunk)
        ga = torch.autograd.grad(a.square().sum(), (q, k, v, g, beta), retain_graph=True)
        gb = torch.autograd.grad(b.square().sum(), (q, k, v, g, beta))
        err = max([(a - b).abs().max().item()] + [(x - y).abs().max().item() for x, y in zip(ga, gb)])
        worst = max(worst, err)
        assert err < 1e-9, f"chunk {chunk}: max difference {err}"
    print(f"delta_rule_chunked == delta_rule_sequential (values and gradients, chunks 1..128): max |diff| {worst:.2e}")


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--self-test"]:
        _self_test()
