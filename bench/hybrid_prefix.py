#!/usr/bin/env python3
"""Second chat turn on a hybrid (Gated DeltaNet) model: time to first token when the prefix
cache resumes from a recurrent-state snapshot, against the time to prefill only the new
tokens (TTFT measured as the latency of a 1-token completion). Prints one Markdown table.

    bench/hybrid_prefix.py SPILLWAY_BINARY [--model M.gguf] [--work DIR] [--repeat 5] [--answer-tokens 48]

Without --model it writes a Qwen3.5-shaped random model (make-demo-model --arch qwen35,
dim 1024, 8 layers, Q8_0). Per repeat, on one server (interleaved, so machine noise hits
every arm alike):
  turn 1   a long prompt (~900 tokens) alone, answered with --answer-tokens tokens
           (its time is prefill + the answer's decode)                -> T_1
  turn 2   turn 1's prompt + its answer + ~25 new tokens            -> TTFT_2, cached_tokens
  new      a fresh prompt of as many words as turn 2's new message  -> TTFT_new
           (what turn 2 would cost if nothing before the new message were recomputed)
The issue's target: TTFT_2 <= 1.2 x TTFT_new (median over the repeats).
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def start(spillway, model, max_running=4):
    """(server process, port) of `spillway serve` on a free port, once /health answers;
    max_running None: the server's default."""
    limit = ["--max-running", str(max_running)] if max_running is not None else []
    proc = subprocess.Popen([spillway, "serve", "--model", model, "--port", "0", "--log-format", "json"] + limit,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("message") == "listening":
            port = int(rec["port"])
            break
    else:
        raise RuntimeError("server exited")
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server not ready")


def ttft(port, model_id, prompt, max_tokens=1):
    """(seconds to the answer of a max_tokens completion (1: prefill + one step), usage, text)."""
    body = json.dumps({"model": model_id, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    out = json.loads(c.getresponse().read())
    return time.perf_counter() - t0, out["usage"], out["choices"][0]["text"]


def words(n, seed):
    vocab = ["river", "stone", "lantern", "quiet", "harbor", "maple", "ember", "north", "signal", "garden",
             "copper", "window", "meadow", "thunder", "pocket", "silver", "orbit", "candle", "valley", "echo"]
    return " ".join(vocab[(seed * 7 + i * 13 + i * i) % len(vocab)] for i in range(n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spillway")
    ap.add_argument("--model")
    ap.add_argument("--work", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--answer-tokens", type=int, default=48, help="turn 1's answer length")
    a = ap.parse_args()
    model = a.model
    if not model:
        model = os.path.join(a.work, "spillway-bench-qwen35.gguf")
        if not os.path.exists(model):
            subprocess.run([a.spillway, "make-demo-model", "--arch", "qwen35", "--dim", "1024", "--layers", "8",
                            "--type", "q8_0", "--out", model], check=True, capture_output=True)
    proc, port = start(a.spillway, model)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("GET", "/v1/models")
        model_id = json.loads(c.getresponse().read())["data"][0]["id"]
        rows = []
        for r in range(a.repeat):
            long_prompt = words(250, r)
            full, u1, answer = ttft(port, model_id, long_prompt, a.answer_tokens)
            second = long_prompt + answer + " " + words(15, 1000 + r)
            t2, u2, _ = ttft(port, model_id, second)
            cached = u2["prompt_tokens_details"]["cached_tokens"]
            # Only the new message's tokens: as many words as turn 2 added after the answer.
            tnew, u3, _ = ttft(port, model_id, words(15, 5000 + r))
            rows.append((u1["prompt_tokens"], full, u2["prompt_tokens"], cached, t2, u3["prompt_tokens"], tnew))
    finally:
        proc.terminate()
        proc.wait()
    print(f"| turn-1 prompt | turn 1 (prefill + {a.answer_tokens}-token answer) | turn-2 prompt | cached | TTFT turn 2 | new-only prompt | TTFT new only | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for p1, full, p2, cached, t2, p3, tnew in rows:
        print(f"| {p1} | {full*1e3:.1f} ms | {p2} | {cached} | {t2*1e3:.1f} ms | {p3} | {tnew*1e3:.1f} ms | {t2/tnew:.2f} |")
    med = statistics.median(r[4] / r[6] for r in rows)
    print(f"\nmedian TTFT(turn 2) / TTFT(new tokens only) = {med:.2f} (target <= 1.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
