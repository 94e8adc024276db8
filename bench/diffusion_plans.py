#!/usr/bin/env python3
"""Diffusion canvases over a long mixed run: the step-plan count stays within the bucket
ladder and committed tokens per second do not drift (issue #17).

Starts `spillway serve --step-buckets` on a diffusion model (default: the trained llada
evaluation model), then --clients threads send /v1/completions requests with a mix of canvas
shapes for --minutes: max_tokens, steps and block_length drawn per request, the reference and
the turbo sampler, streamed and whole, so engine steps carry every row count the ladder has
to absorb. Every --interval seconds it reads /metrics and prints one row: live step plans
(`spillway_step_plans`), plan builds so far (`spillway_step_plan_builds_total`), committed
diffusion tokens per second over the interval (`spillway_diffusion_committed_tokens_total`),
forwards per second, requests completed and failed. At the end: plans at most the ladder's
size (12) and the first and last thirds' committed tok/s, whose ratio shows any drift.

    python3 bench/diffusion_plans.py build/rel/cli/spillway --minutes 20
    python3 bench/diffusion_plans.py build/rel/cli/spillway --minutes 2 --interval 20   # quick

Exit status 1 when a request fails or the plan count passes the ladder.
"""
import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import Server  # noqa: E402  (starts `spillway serve`, waits for /health)

LADDER_MAX = 12  # scheduler/step_plans.h: at most 12 bucket sizes
DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "eval", "llada",
                             "llada-tasks-f16.gguf")
PROMPTS = ["sort:8314045=", "rev:olpauhef=", "6657+9707=", "close:[]({{=", "set:cfjruv=", "kv:k5,w1,h1,a3?a="]


def metric_values(server):
    """{name: value} for the unlabelled series this run reads."""
    _, text = server.request("GET", "/metrics")
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("#") or "{" in line.split(" ", 1)[0]:
            continue
        name, _, value = line.partition(" ")
        out[name] = float(value)
    return out


def client(server, model, stop, rng, counts, lock):
    while not stop.is_set():
        max_tokens = rng.choice([8, 12, 16, 24, 32, 48])
        block = rng.choice([b for b in (4, 8, 12, 16, 32) if max_tokens % b == 0] or [max_tokens])
        diffusion = {"steps": rng.choice([max_tokens, max_tokens // 2 or 1]), "block_length": block}
        if rng.random() < 0.5:
            diffusion["sampler"] = "turbo"
        body = {"model": model, "prompt": rng.choice(PROMPTS), "max_tokens": max_tokens, "temperature": 0,
                "diffusion": diffusion, "stream": rng.random() < 0.3}
        try:
            status, payload = server.request("POST", "/v1/completions", body, timeout=300)
            ok = status == 200
            message = None if ok else payload[:200]
        except OSError as e:
            ok, message = False, str(e)
        with lock:
            counts["ok" if ok else "failed"] += 1
            if message and len(counts["errors"]) < 5:
                counts["errors"].append(message)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spillway")
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--interval", type=float, default=60, help="seconds between metric rows")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    server = Server([os.path.realpath(a.spillway), "serve", "--model", a.model, "--port", "0", "--threads",
                     str(a.threads), "--step-buckets", "--log-format", "json"], dict(os.environ))
    model = json.loads(server.request("GET", "/v1/models")[1])["data"][0]["id"]
    stop, lock = threading.Event(), threading.Lock()
    counts = {"ok": 0, "failed": 0, "errors": []}
    threads = [threading.Thread(target=client, args=(server, model, stop, random.Random(a.seed * 1000 + i), counts, lock),
                                daemon=True) for i in range(a.clients)]
    for t in threads:
        t.start()
    print(f"`bench/diffusion_plans.py {' '.join(sys.argv[2:])}`: {a.clients} clients, "
          f"{os.path.basename(a.model)}, --step-buckets, {a.threads} threads\n")
    print("| minute | live plans | plan builds | committed tok/s | forwards/s | requests ok | failed |")
    print("|---|---|---|---|---|---|---|")
    rows, t0 = [], time.time()
    last = metric_values(server)
    last_t = time.time()
    while time.time() - t0 < a.minutes * 60:
        time.sleep(a.interval)
        now, now_t = metric_values(server), time.time()
        dt = now_t - last_t
        row = {"t": (now_t - t0) / 60, "plans": now.get("spillway_step_plans", 0),
               "builds": now.get("spillway_step_plan_builds_total", 0),
               "tps": (now.get("spillway_diffusion_committed_tokens_total", 0)
                       - last.get("spillway_diffusion_committed_tokens_total", 0)) / dt,
               "fps": (now.get("spillway_diffusion_forwards_total", 0)
                       - last.get("spillway_diffusion_forwards_total", 0)) / dt}
        with lock:
            row.update(ok=counts["ok"], failed=counts["failed"])
        rows.append(row)
        print(f"| {row['t']:.1f} | {row['plans']:.0f} | {row['builds']:.0f} | {row['tps']:.1f} | {row['fps']:.1f} "
              f"| {row['ok']} | {row['failed']} |", flush=True)
        last, last_t = now, now_t
    stop.set()
    for t in threads:
        t.join(timeout=300)
    server.proc.terminate()
    server.proc.wait(timeout=60)

    third = max(1, len(rows) // 3)
    first = statistics.mean(r["tps"] for r in rows[:third])
    final = statistics.mean(r["tps"] for r in rows[-third:])
    most_plans = max(r["plans"] for r in rows)
    print(f"\nMost live plans {most_plans:.0f} (ladder {LADDER_MAX}); plan builds {rows[-1]['builds']:.0f}; "
          f"committed tok/s first third {first:.1f}, last third {final:.1f} (ratio {final / first:.2f}); "
          f"{counts['ok']} requests ok, {counts['failed']} failed.")
    for e in counts["errors"]:
        print(f"- failed: {e}")
    return 0 if counts["failed"] == 0 and most_plans <= LADDER_MAX else 1


if __name__ == "__main__":
    sys.exit(main())
