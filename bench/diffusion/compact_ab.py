#!/usr/bin/env python3
"""Compacted active set vs full recompute on a served diffusion model, interleaved (issue #17).

  python3 bench/diffusion/compact_ab.py --base-url http://127.0.0.1:8080 --pid SERVER_PID \
      --n 40 [--arm ref='{"diffusion": {...}}' --arm compact='{...}']

For each evaluation item (bench/eval.py's tasks, seed 1234, n per task) it sends one request
per arm, alternating the arm order item by item, one request at a time, and records per arm:
accuracy, the server process's CPU time (utime + stime from /proc/PID/stat, so the noise of
other processes on a shared machine does not count), wall time, completion tokens, and from
usage.diffusion the forwards and rows evaluated (rows per forward = rows per step). Prints one
line per arm and the ratios against the first arm. Standard library only.
"""
import argparse
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "train"))
import tasks  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", default="http://127.0.0.1:8080")
    ap.add_argument("--pid", type=int, required=True, help="the server's process id (CPU time)")
    ap.add_argument("--n", type=int, default=40, help="items per task")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--model", default=None, help="model id (default: the server's first, from /v1/models)")
    ap.add_argument("--arm", action="append", default=None, help="NAME=JSON extra body")
    args = ap.parse_args()
    arms = args.arm or ['ref={"diffusion": {"steps": 12, "block_length": 12}}',
                        'compact={"diffusion": {"steps": 12, "block_length": 12, "cache": "compact"}}']
    arms = [(a.split("=", 1)[0], json.loads(a.split("=", 1)[1])) for a in arms]
    url = args.base_url.rstrip("/") + "/v1/completions"
    if not args.model:
        with urllib.request.urlopen(args.base_url.rstrip("/") + "/v1/models", timeout=30) as r:
            args.model = json.loads(r.read())["data"][0]["id"]
    stats = {name: dict(correct=0, items=0, cpu=0.0, wall=0.0, tokens=0, forwards=0, rows=0) for name, _ in arms}
    i = 0
    for task in tasks.TASKS:
        for it in tasks.eval_items(task, args.n, args.seed):
            order = arms if i % 2 == 0 else list(reversed(arms))
            i += 1
            for name, extra in order:
                body = {"model": args.model, "prompt": it["prompt"], "max_tokens": args.max_tokens, "temperature": 0, **extra}
                c0, w0 = cpu_seconds(args.pid), time.perf_counter()
                resp = post(url, body)
                s = stats[name]
                s["wall"] += time.perf_counter() - w0
                s["cpu"] += cpu_seconds(args.pid) - c0
                usage = resp.get("usage") or {}
                d = usage.get("diffusion") or {}
                s["items"] += 1
                s["correct"] += tasks.grade(task, it["prompt"], it["answer"], resp["choices"][0]["text"])
                s["tokens"] += usage.get("completion_tokens", 0)
                s["forwards"] += d.get("forwards", 0)
                s["rows"] += d.get("rows_evaluated", 0)
    base = stats[arms[0][0]]
    for name, _ in arms:
        s = stats[name]
        print(f"{name:10s} items {s['items']} acc {s['correct'] / s['items']:.3f}  forwards {s['forwards']}  "
              f"rows {s['rows']}  rows/forward {s['rows'] / max(1, s['forwards']):.1f}  "
              f"cpu {s['cpu']:.2f}s  wall {s['wall']:.2f}s  tok/cpu-s {s['tokens'] / max(1e-9, s['cpu']):.1f}  "
              f"tok/wall-s {s['tokens'] / max(1e-9, s['wall']):.1f}  "
              f"cpu ratio {s['cpu'] / max(1e-9, base['cpu']):.3f}  rows ratio {s['rows'] / max(1, base['rows']):.3f}")


if __name__ == "__main__":
    main()
