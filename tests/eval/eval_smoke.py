#!/usr/bin/env python3
"""CTest smoke: bench/eval.py on the dense evaluation model through a real `spillway serve`.

50 items per task (the first 50 of the 500 the model card's reference accuracy was measured
on, with the PyTorch implementation in tools/train). It fails when
  1. a task's accuracy is below reference - margin, margin = 3 * sqrt(p(1-p)/50) + 1/50
     (p = the reference accuracy): were the 50 items a fresh random sample and the server
     computing the same model, a task would land below this less than ~0.2% of the time
     (normal approximation, with one item of slack for rounding); a broken forward, tokenizer,
     stop or template path drops far below it;
  2. more than 2% of the items' completions differ from PyTorch's greedy completions
     (models/eval/llama/reference-outputs.jsonl; F32 logits agree to ~1e-6, so only an exact
     near-tie may flip a token);
  3. bench/eval.py --paired (exact McNemar) finds Spillway significantly worse than PyTorch.
Environment: SPILLWAY_BIN (the spillway executable).
"""
import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL_DIR = os.path.join(ROOT, "models", "eval", "llama")
MODEL = os.path.join(MODEL_DIR, "llama-tasks-f32.gguf")
N = 50


def start_server():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPILLWAY_")}
    proc = subprocess.Popen([os.environ.get("SPILLWAY_BIN", "spillway"), "serve", "--model", MODEL,
                             "--port", "0", "--log-format", "json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr] + [lines.put(None)],
                     daemon=True).start()
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            raise RuntimeError("spillway exited before listening")
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("message") == "listening":
            port = int(rec["port"])
            wait_ready(proc, port, deadline)
            return proc, port
    proc.kill()
    raise RuntimeError("spillway did not log its port")


def wait_ready(proc, port, deadline):
    """/health answers 200 once the model is loaded (503 while loading)."""
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("spillway exited while loading")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("spillway did not become healthy")


def main():
    with open(os.path.join(MODEL_DIR, "eval.json")) as f:
        card = json.load(f)["reference"]
    ref_path = os.path.join(MODEL_DIR, "reference-outputs.jsonl")
    ref_items = {}
    if os.path.exists(ref_path):  # checks 2 and 3 need PyTorch's per-item outputs
        with open(ref_path) as f:
            ref_items = {(r["task"], r["id"]): r for r in map(json.loads, f)}
    proc, port = start_server()
    failures = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "spillway.jsonl")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "eval.py"),
                                "--base-url", f"http://127.0.0.1:{port}", "--task", "all",
                                "--n", str(N), "--out", out], capture_output=True, text=True)
            print(r.stdout, r.stderr)
            if r.returncode != 0:
                failures.append(f"bench/eval.py exited {r.returncode}")
            got = [json.loads(l) for l in open(out)]
            by_task = {}
            for g in got:
                by_task.setdefault(g["task"], []).append(g)
            differ = 0
            for task, items in by_task.items():
                acc = sum(g["correct"] for g in items) / len(items)
                p = card[task]["accuracy"]
                margin = 3 * math.sqrt(p * (1 - p) / N) + 1 / N
                print(f"{task}: spillway {acc:.3f} on {len(items)}, reference {p:.3f} on "
                      f"{card[task]['n']}, minimum {p - margin:.3f}")
                if acc < p - margin:
                    failures.append(f"{task}: accuracy {acc:.3f} < {p:.3f} - {margin:.3f}")
                for g in items:
                    ref = ref_items.get((task, g["id"]))
                    if ref is None:
                        continue
                    assert ref["prompt"] == g["prompt"], "evaluation items differ from the reference"
                    if ref["output"] != g["output"].strip():
                        differ += 1
                        print(f"  differs from PyTorch: {g['prompt']!r} torch {ref['output']!r} "
                              f"spillway {g['output']!r}")
            if differ > 0.02 * len(got):
                failures.append(f"{differ} of {len(got)} completions differ from PyTorch's")
            if ref_items and all((g["task"], g["id"]) in ref_items for g in got):
                torch_out = os.path.join(tmp, "torch.jsonl")
                with open(torch_out, "w") as f:
                    for g in got:
                        f.write(json.dumps(ref_items[(g["task"], g["id"])]) + "\n")
                r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "eval.py"),
                                    "--paired", torch_out, out], capture_output=True, text=True)
                print(r.stdout, r.stderr)
                if r.returncode != 0:
                    failures.append("McNemar: spillway significantly worse than PyTorch")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
