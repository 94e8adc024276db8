"""Train one of the four small models on the mixed synthetic tasks, evaluate it, export GGUF.

    python3 tools/train/train.py --arch llama --seed 1 --steps 4000 --out models/eval/llama

Runs on torch 1.13 CPU (Debian) and torch 2.x CUDA; the device is picked automatically
(--device to force). Writes into --out: the GGUF, parity.json (float64 PyTorch logits on
fixed inputs), eval.json (reference accuracy per task, PyTorch greedy / diffusion sampler),
train.log. `--time-steps N` only times N training steps and exits.
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deps  # noqa: E402,F401  (installs PyTorch on first use)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import export  # noqa: E402
import models  # noqa: E402
import tasks  # noqa: E402
import vocab  # noqa: E402

GEN_LEN = 12  # answer region: the longest answer (10) + EOS, with room


def make_batch(rng, batch, arch, device):
    """AR: (inputs, targets, loss mask). Diffusion: (clean canvas, answer-region mask, key mask)."""
    seqs, starts = [], []
    for _ in range(batch):
        task = rng.choice(tasks.TASKS)
        prompt, answer = tasks.training_item(rng, task)
        p = [vocab.BOS] + vocab.encode(prompt)
        a = vocab.encode(answer) + [vocab.EOS]
        if arch == "llada":
            a = a + [vocab.EOS] * (GEN_LEN - len(a))
        seqs.append(p + a)
        starts.append(len(p))
    T = max(len(s) for s in seqs)
    tok = torch.full((batch, T), vocab.EOS, dtype=torch.long)
    ans = torch.zeros(batch, T, dtype=torch.bool)
    real = torch.zeros(batch, T, dtype=torch.bool)
    for i, (s, st) in enumerate(zip(seqs, starts)):
        tok[i, : len(s)] = torch.tensor(s)
        ans[i, st: len(s)] = True
        real[i, : len(s)] = True
    return tok.to(device), ans.to(device), real.to(device)


def loss_on(model, arch, batch, rng_t):
    tok, ans, real = batch
    if arch != "llada":
        logits = model(tok[:, :-1])
        tgt, m = tok[:, 1:], ans[:, 1:]
        loss = F.cross_entropy(logits[m], tgt[m])
    else:
        B = tok.shape[0]
        eps = 1e-3
        t = (1 - eps) * torch.rand(B, 1, generator=rng_t).to(tok.device) + eps
        masked = (torch.rand(tok.shape, generator=rng_t).to(tok.device) < t) & ans
        noisy = tok.masked_fill(masked, vocab.mask_id(arch))
        logits = model(noisy, key_mask=real)
        ce = F.cross_entropy(logits.transpose(1, 2), tok, reduction="none")
        loss = (ce * masked / t).sum() / ans.sum()
    aux = model.aux_loss()
    return loss, aux


@torch.no_grad()
def generate(model, arch, prompts, device, n_used=None):
    """Greedy AR completion, or the diffusion sampler committing one token per step (the
    most confident masked position). Prompts of equal length are batched together."""
    by_len = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    outs = [None] * len(prompts)
    for L, idx in by_len.items():
        for c in range(0, len(idx), 256):
            chunk = idx[c: c + 256]
            base = torch.tensor([[vocab.BOS] + vocab.encode(prompts[i]) for i in chunk],
                                device=device)
            if arch != "llada":
                seq = base
                for _ in range(GEN_LEN):
                    nxt = model(seq, n_used=n_used)[:, -1].argmax(-1)
                    seq = torch.cat([seq, nxt[:, None]], 1)
                res = seq[:, base.shape[1]:]
            else:
                mask = vocab.mask_id(arch)
                canvas = torch.cat([base, torch.full((len(chunk), GEN_LEN), mask, device=device)], 1)
                for _ in range(GEN_LEN):
                    logits = model(canvas)
                    prob = torch.softmax(logits.double(), -1)
                    conf, arg = prob.max(-1)
                    conf = conf.masked_fill(canvas != mask, -1.0)
                    pos = conf.argmax(-1)
                    rows = torch.arange(len(chunk), device=device)
                    canvas[rows, pos] = arg[rows, pos]
                res = canvas[:, base.shape[1]:]
            for j, i in enumerate(chunk):
                outs[i] = vocab.decode(res[j].tolist())
    return outs


def evaluate(model, arch, n, device, n_used=None, seed=1234):
    model.eval()
    result = {}
    for task in tasks.TASKS:
        items = tasks.eval_items(task, n, seed)
        outs = generate(model, arch, [it["prompt"] for it in items], device, n_used)
        ok = sum(tasks.grade(task, it["prompt"], it["answer"], o) for it, o in zip(items, outs))
        result[task] = {"n": n, "correct": ok, "accuracy": ok / n}
    model.train()
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", required=True, choices=models.ARCHS)
    ap.add_argument("--size", default="s", choices=["s", "l"])
    ap.add_argument("--f16", action="store_true", help="export F16 (weights rounded before eval)")
    ap.add_argument("--save-state", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--aux", type=float, default=0.01, help="MoE load-balancing loss weight")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--eval-n", type=int, default=500)
    ap.add_argument("--time-steps", type=int, default=0)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop early (0: no limit)")
    ap.add_argument("--delta-rule", default="chunked", choices=["chunked", "sequential"],
                    help="qwen35 training steps: the Gated DeltaNet recurrence in chunks (matmuls) or "
                         "token by token; evaluation and export always run it token by token")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    models.GatedDeltaNet.sequential = args.delta_rule == "sequential"
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    rng_t = torch.Generator().manual_seed(args.seed)
    cfg = dict(models.CONFIGS[(args.arch, args.size)], n_vocab=vocab.n_vocab(args.arch))
    model = models.Model(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.05)
    warm = max(1, min(200, args.steps // 20))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    log = []

    def say(msg):
        print(msg, flush=True)
        log.append(msg)

    say(f"arch={args.arch} params={n_params} device={device} torch={torch.__version__} "
        f"args={vars(args)}")
    t0 = time.time()
    steps = args.time_steps or args.steps
    for step in range(steps):
        batch = make_batch(rng, args.batch, args.arch, device)
        loss, aux = loss_on(model, args.arch, batch, rng_t)
        total = loss + (args.aux * aux if aux is not None else 0)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == steps - 1:
            say(f"step {step} loss {loss.item():.4f} aux {aux.item() if aux is not None else 0:.3f} "
                f"lr {sched.get_last_lr()[0]:.2e} t {time.time() - t0:.1f}s")
        if args.max_minutes and time.time() - t0 > 60 * args.max_minutes:
            say(f"stopping at step {step}: --max-minutes reached")
            break
    train_s = time.time() - t0
    if args.time_steps:
        say(f"{args.time_steps} steps in {train_s:.2f}s = {train_s / args.time_steps:.3f}s/step")
        return
    say(f"trained {step + 1} steps in {train_s:.1f}s")
    if not args.out:
        return
    os.makedirs(args.out, exist_ok=True)
    if args.f16:  # evaluate exactly the weights the file will hold
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    models.GatedDeltaNet.sequential = True  # evaluate and export in the engine's order of operations
    ev = {"reference": evaluate(model, args.arch, args.eval_n, device)}
    if args.arch == "qwen3moe":
        ev["top2"] = evaluate(model, args.arch, args.eval_n, device, n_used=2)
    model = model.cpu()
    for k, v in ev.items():
        say(f"eval {k}: " + ", ".join(f"{t} {r['accuracy']:.3f}" for t, r in v.items()))
    gguf_path = os.path.join(args.out, f"{args.arch}-tasks-{'f16' if args.f16 else 'f32'}.gguf")
    export.export_gguf(model, cfg, gguf_path, f16=args.f16)
    sha = hashlib.sha256(open(gguf_path, "rb").read()).hexdigest()
    export.write_parity(model, cfg, os.path.join(args.out, "parity.json"), os.path.basename(gguf_path), sha)
    meta = {"arch": args.arch, "params": n_params, "size": args.size, "config": cfg, "device": device, "torch": torch.__version__,
            "steps": step + 1, "train_seconds": round(train_s, 1), "args": vars(args),
            "gguf": os.path.basename(gguf_path), "sha256": sha, "eval_seed": 1234, **ev}
    with open(os.path.join(args.out, "eval.json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(args.out, "train.log"), "w") as f:
        f.write("\n".join(log) + "\n")
    if args.save_state:
        torch.save(model.state_dict(), os.path.join(args.out, "state.pt"))


if __name__ == "__main__":
    main()
