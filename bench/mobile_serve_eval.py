#!/usr/bin/env python3
"""MoBiLE figures through `spillway serve` + bench/eval.py (bench/README.md, "MoBiLE").

Starts one `spillway serve` (MoBiLE off by default) and runs bench/eval.py once per arm,
choosing the arm with the request body's "moe" field (--extra-body):

  full      {"moe": {"little_experts": "off"}}                       the model's top-k
  little    {"moe": {"little_experts": "auto", "fallback_confidence": 0}}   K/2, never back
  g0.5 ...  {"moe": {"little_experts": "auto", "fallback_confidence": γ}}   K/2 + fallback

Accuracy (--n items per task, greedy, deterministic): one pass per arm; the fallback rate is
the change of spillway_moe_fallback_tokens_total over little + fallback tokens; McNemar vs
full with `eval.py --paired`.

Speed (--speed-rounds > 0): a second server started with --speed-flags (experts streamed:
a small --expert-cache, O_DIRECT reads) runs --speed-n items per task per arm, the arms
alternating round after round; per arm it reports completion tokens per second of request
wall time (eval.py's figure: prefill and HTTP included) and the server's CPU seconds per
completion token (/proc/PID/stat utime + stime over the arm's requests), medians over rounds.

  python3 bench/mobile_serve_eval.py --bin build/rel/cli/spillway \\
      --model models/eval/qwen3moe/qwen3moe-tasks-f16.gguf --n 500 --out-dir /tmp/mobile-eval \\
      --speed-n 50 --speed-rounds 3 --speed-flags "--memory-budget 256M --expert-cache 600K --read-mode direct"
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL = os.path.join(HERE, "eval.py")


def arms(gammas):
    out = [("full", {"little_experts": "off"}), ("little", {"little_experts": "auto", "fallback_confidence": 0})]
    for g in gammas:
        out.append((f"g{g}", {"little_experts": "auto", "fallback_confidence": g}))
    return out


class Server:
    def __init__(self, binary, model, port, flags):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([binary, "serve", "--model", model, "--port", str(port), "--log-format", "json",
                                      *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                time.sleep(0.2)
        self.close()
        sys.exit("server did not become ready")

    def counter(self, name):
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{}"):
                    return float(line.split()[-1])
        return 0.0

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_eval(server, model_id, moe, n, out, seed):
    cmd = [sys.executable, EVAL, "--base-url", server.url, "--model", model_id, "--task", "all", "--n", str(n),
           "--seed", str(seed), "--extra-body", json.dumps({"moe": moe}), "--out", out]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    correct = total = 0
    per_task = {}
    for m in re.finditer(r"^(\w+)\s+accuracy [\d.]+ \((\d+)/(\d+)\).*?([\d.]+) tok/s", text, re.M):
        per_task[m.group(1)] = int(m.group(2))
        correct += int(m.group(2))
        total += int(m.group(3))
    tokens = seconds = 0.0
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            tokens += r.get("completion_tokens") or 0
            seconds += r["seconds"]
    return {"correct": correct, "total": total, "per_task": per_task, "tokens": tokens, "seconds": seconds}


def expert_counters(server):
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    def value(pattern):
        m = re.search(pattern + r" ([0-9.e+]+)$", text, re.M)
        return float(m.group(1)) if m else 0.0
    return (value(r'spillway_moe_expert_requests_total\{result="hit"\}'),
            value(r'spillway_moe_expert_requests_total\{result="miss"\}'),
            value(r"spillway_moe_expert_bytes_read_total"))


def counters(server):
    return (server.counter("spillway_moe_little_tokens_total"), server.counter("spillway_moe_fallback_tokens_total"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-id", default=None)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--gammas", default="0.5,0.7,0.8")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--port", type=int, default=18461)
    ap.add_argument("--threads", default="1", help="serve --threads (both servers)")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--speed-n", type=int, default=50)
    ap.add_argument("--speed-rounds", type=int, default=0)
    ap.add_argument("--speed-flags", default="--memory-budget 256M --expert-cache 600K --read-mode direct")
    args = ap.parse_args()
    model_id = args.model_id or os.path.basename(args.model).removesuffix(".gguf")
    os.makedirs(args.out_dir, exist_ok=True)
    arm_list = arms([float(g) for g in args.gammas.split(",")])
    common = ["--threads", args.threads]

    if not args.skip_accuracy:
        server = Server(args.bin, args.model, args.port, common)
        rows = {}
        try:
            for name, moe in arm_list:
                before = counters(server)
                r = run_eval(server, model_id, moe, args.n, os.path.join(args.out_dir, f"{name}.jsonl"), args.seed)
                after = counters(server)
                little, fallback = after[0] - before[0], after[1] - before[1]
                r["fallback_rate"] = fallback / (little + fallback) if little + fallback else 0.0
                rows[name] = r
                print(f"{name:7s} accuracy {r['correct']}/{r['total']} = {r['correct'] / r['total']:.4f}  "
                      f"fallback {r['fallback_rate']:.3f}  {r['tokens'] / r['seconds']:.1f} tok/s  "
                      f"{json.dumps(r['per_task'])}", flush=True)
        finally:
            server.close()
        for name, _ in arm_list[1:]:
            out = subprocess.run([sys.executable, EVAL, "--paired", os.path.join(args.out_dir, "full.jsonl"),
                                  os.path.join(args.out_dir, f"{name}.jsonl")], capture_output=True, text=True)
            print(f"--- paired full vs {name}\n{out.stdout.strip()}", flush=True)
        with open(os.path.join(args.out_dir, "accuracy.json"), "w") as f:
            json.dump(rows, f, indent=1)

    if args.speed_rounds > 0:
        server = Server(args.bin, args.model, args.port + 1, common + shlex.split(args.speed_flags))
        samples = {name: {"tps": [], "cpu_per_token": [], "fallback": [], "expert_bytes_per_token": [],
                          "hit_rate": []} for name, _ in arm_list}
        try:
            # One untimed pass so that every arm meets a warm server.
            run_eval(server, model_id, arm_list[0][1], 5, os.path.join(args.out_dir, "warm.jsonl"), args.seed)
            for rnd in range(args.speed_rounds):
                order = arm_list if rnd % 2 == 0 else list(reversed(arm_list))
                for name, moe in order:
                    c0, cpu0 = counters(server), server.cpu_seconds()
                    e0 = expert_counters(server)
                    r = run_eval(server, model_id, moe, args.speed_n,
                                 os.path.join(args.out_dir, f"speed-{name}-{rnd}.jsonl"), args.seed + 1)
                    cpu1, c1 = server.cpu_seconds(), counters(server)
                    e1 = expert_counters(server)
                    s = samples[name]
                    s["tps"].append(r["tokens"] / r["seconds"])
                    s["cpu_per_token"].append((cpu1 - cpu0) / r["tokens"])
                    lt, fb = c1[0] - c0[0], c1[1] - c0[1]
                    s["fallback"].append(fb / (lt + fb) if lt + fb else 0.0)
                    hits, misses, read = (b - a for a, b in zip(e0, e1))
                    s["expert_bytes_per_token"].append(read / r["tokens"])
                    s["hit_rate"].append(hits / (hits + misses) if hits + misses else 0.0)
                    print(f"round {rnd} {name:7s} {s['tps'][-1]:.1f} tok/s  {1e3 * s['cpu_per_token'][-1]:.3f} "
                          f"CPU ms/token  fallback {s['fallback'][-1]:.3f}  expert KiB/token "
                          f"{s['expert_bytes_per_token'][-1] / 1024:.1f}  hit rate {s['hit_rate'][-1]:.3f}", flush=True)
        finally:
            server.close()
        base_tps = statistics.median(samples["full"]["tps"])
        base_cpu = statistics.median(samples["full"]["cpu_per_token"])
        print("--- speed (medians over rounds; ratios vs full)")
        for name, _ in arm_list:
            s = samples[name]
            tps, cpu = statistics.median(s["tps"]), statistics.median(s["cpu_per_token"])
            print(f"{name:7s} {tps:8.1f} tok/s ({tps / base_tps:.2f}x)  {1e3 * cpu:.3f} CPU ms/token "
                  f"({base_cpu / cpu:.2f}x)  fallback {statistics.median(s['fallback']):.3f}  expert KiB/token "
                  f"{statistics.median(s['expert_bytes_per_token']) / 1024:.1f}  hit rate "
                  f"{statistics.median(s['hit_rate']):.3f}")
        with open(os.path.join(args.out_dir, "speed.json"), "w") as f:
            json.dump(samples, f, indent=1)


if __name__ == "__main__":
    main()
