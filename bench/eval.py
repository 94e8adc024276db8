#!/usr/bin/env python3
"""Quality evaluation through an OpenAI-compatible server (standard library only).

Sends the evaluation items of the synthetic tasks (tools/train/tasks.py: seeded, hash-split
from training items, exact graders) to POST /v1/completions, greedy, and grades the text.

  python3 bench/eval.py --base-url http://127.0.0.1:8080 --model llama-tasks-f32 \
      --task all --n 500 --out results.jsonl [--extra-body '{"top_k": 1}']
  python3 bench/eval.py --paired A.jsonl B.jsonl     # is B significantly worse than A?

Per task it prints accuracy with a Wilson 95% interval, completion tokens per second
(sum of completion tokens / sum of request wall time, requests sent one at a time), and for
diffusion servers the forwards and tokens per forward from `usage.diffusion` when present.
--min-accuracy TASK=X,... makes the exit status 1 when a task scores below X.
"""
import argparse
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "train"))
import tasks  # noqa: E402  (standard library only)


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def binom_tail_ge(k, n):
    """P(X >= k) for X ~ Binomial(n, 1/2), exact."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n if n else 1.0


def mcnemar(a_only, b_only):
    """Exact McNemar: (two-sided p, one-sided p that B is worse) from the discordant pairs
    (a_only = items A got right and B wrong, b_only = the reverse)."""
    n = a_only + b_only
    one = binom_tail_ge(a_only, n)
    two = min(1.0, 2 * binom_tail_ge(max(a_only, b_only), n)) if n else 1.0
    return two, one


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def run(args):
    names = tasks.TASKS if args.task == "all" else args.task.split(",")
    for t in names:
        if t not in tasks.TASKS:
            sys.exit(f"unknown task {t!r} (known: {', '.join(tasks.TASKS)}, all)")
    extra = json.loads(args.extra_body) if args.extra_body else {}
    url = args.base_url.rstrip("/") + "/v1/completions"
    out = open(args.out, "w") if args.out else None
    summary = {}
    for task in names:
        k = toks = 0
        secs = 0.0
        forwards = diff_tokens = 0
        has_diffusion = False
        items = tasks.eval_items(task, args.n, args.seed)
        for it in items:
            body = {"model": args.model, "prompt": it["prompt"], "max_tokens": args.max_tokens,
                    "temperature": 0, **extra}
            t0 = time.perf_counter()
            try:
                resp = post(url, body, args.timeout)
            except urllib.error.HTTPError as e:
                sys.exit(f"{task} {it['id']}: HTTP {e.code}: {e.read().decode(errors='replace')}")
            dt = time.perf_counter() - t0
            text = resp["choices"][0]["text"]
            usage = resp.get("usage") or {}
            ok = tasks.grade(task, it["prompt"], it["answer"], text)
            k += ok
            toks += usage.get("completion_tokens", 0)
            secs += dt
            rec = {**it, "output": text, "correct": ok, "seconds": round(dt, 4),
                   "completion_tokens": usage.get("completion_tokens"),
                   "finish_reason": resp["choices"][0].get("finish_reason")}
            diff = usage.get("diffusion")
            if isinstance(diff, dict):
                has_diffusion = True
                rec["diffusion"] = diff
                forwards += diff.get("forwards", diff.get("steps", 0)) or 0
                diff_tokens += diff.get("tokens", usage.get("completion_tokens", 0)) or 0
            if out:
                out.write(json.dumps(rec) + "\n")
        lo, hi = wilson(k, args.n)
        line = (f"{task:9s} accuracy {k / args.n:.3f} ({k}/{args.n}) 95% CI [{lo:.3f}, {hi:.3f}]"
                f"  {toks / secs if secs else 0:.1f} tok/s")
        if has_diffusion:
            line += f"  forwards {forwards}  tokens/forward {diff_tokens / forwards if forwards else 0:.2f}"
        print(line, flush=True)
        summary[task] = k / args.n
    if out:
        out.close()
    failed = []
    for spec in filter(None, (args.min_accuracy or "").split(",")):
        t, x = spec.split("=")
        if t in summary and summary[t] < float(x):
            failed.append(f"{t}: {summary[t]:.3f} < {float(x):.3f}")
    if failed:
        print("BELOW MINIMUM: " + "; ".join(failed))
        return 1
    return 0


def paired(a_path, b_path, alpha):
    def read(p):
        with open(p) as f:
            return {(r["task"], r["id"]): r for r in map(json.loads, filter(str.strip, f))}
    a, b = read(a_path), read(b_path)
    common = sorted(set(a) & set(b))
    if not common:
        sys.exit("no items in common")
    worse = False
    for task in sorted({t for t, _ in common}) + ["all"]:
        keys = [c for c in common if task == "all" or c[0] == task]
        for c in keys:
            if a[c]["prompt"] != b[c]["prompt"]:
                sys.exit(f"{c}: the two files hold different prompts (other --seed?)")
        ka = sum(a[c]["correct"] for c in keys)
        kb = sum(b[c]["correct"] for c in keys)
        a_only = sum(a[c]["correct"] and not b[c]["correct"] for c in keys)
        b_only = sum(b[c]["correct"] and not a[c]["correct"] for c in keys)
        two, one = mcnemar(a_only, b_only)
        flag = "B significantly worse" if one < alpha else "no significant loss"
        if task == "all":
            worse = one < alpha
        print(f"{task:9s} n {len(keys)}  A {ka / len(keys):.3f}  B {kb / len(keys):.3f}  "
              f"A-only {a_only}  B-only {b_only}  McNemar exact p(two-sided) {two:.4g} "
              f"p(B worse) {one:.4g}  -> {flag}")
    return 1 if worse else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default=None)
    ap.add_argument("--task", default="all", help="a task name, a comma list, or all")
    ap.add_argument("--n", type=int, default=100, help="items per task")
    ap.add_argument("--seed", type=int, default=1234, help="evaluation item seed")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--extra-body", default=None, help="JSON merged into every request body")
    ap.add_argument("--out", default=None, help="per-item results (JSON lines)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--min-accuracy", default=None, help="TASK=X,...: exit 1 below X")
    ap.add_argument("--paired", nargs=2, metavar=("A.jsonl", "B.jsonl"))
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    if args.paired:
        return paired(*args.paired, args.alpha)
    if not args.model:
        req = urllib.request.Request(args.base_url.rstrip("/") + "/v1/models")
        with urllib.request.urlopen(req, timeout=args.timeout) as r:
            args.model = json.loads(r.read())["data"][0]["id"]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
