#!/usr/bin/env python3
"""Serving load generator for any OpenAI-compatible server (Spillway, llama-server, vLLM).

N client threads keep N streamed requests in flight until K requests have been sent, then
print the serving latencies and throughput. Standard library only.

What one request is:
  POST {base}/v1/chat/completions (or /v1/completions with --endpoint completions) with
  "stream": true, "stream_options": {"include_usage": true}, "max_tokens": T, a per-request
  "seed" (--seed + request number), "temperature" with --temperature, and, with
  --ignore-eos, "ignore_eos": true (Spillway, vLLM and llama-server all honour it, so every
  request then generates exactly T tokens).
  Each request opens its own HTTP connection, so TTFT includes the TCP connect (negligible
  on loopback).

  The prompt is about P words (--prompt-tokens P) drawn deterministically from a small word
  list with --seed; every request starts with its own number ("Request 7: ..."), so the
  prompts differ from their first token on and a prefix cache cannot serve one request from
  another. (With --endpoint chat the chat template's own prefix is still shared.) The
  prompts depend only on --seed and the request number, so a second run with the same seed
  against the same server is served from its prefix cache: change --seed (or restart the
  server) for cold numbers. Words are not tokens: P words are usually more than P tokens.

What is measured (clock: time.perf_counter):
  TTFT   from just before the request is sent to the first SSE chunk carrying text
         (delta.content / delta.reasoning_content for chat, choices[].text for completions).
  ITL    the gaps between successive text-carrying chunks, pooled over all requests (a chunk
         carrying text counts as one token arrival, even if the server packed several).
  e2e    from sending to reading "data: [DONE]".
  tokens usage.completion_tokens of the include_usage chunk, else the number of text chunks.
  errors a non-200 status, a connection error, an error event in the stream, a stream that
         ends without [DONE], or --timeout exceeded (per socket read, and for the whole
         request). Errors are counted, the first one's message is kept; the run goes on.
Percentiles use the nearest-rank method: the p-th percentile of n sorted values is the
value at 1-based rank ceil(p/100 * n). Only successful requests enter the latency and token
figures. Generated tok/s = completion tokens of successful requests / wall time of the run;
req/s = successful requests / wall time; wall time runs from the first send to the last end.
Exit status: 0 when every request succeeded, 1 when any failed, 2 for usage errors.

Examples:
  build/dev/server/spillway serve --port 8099 &      # no --model: the small demo model
  bench/load.py --base-url http://127.0.0.1:8099 --concurrency 4 --requests 16 \\
      --max-tokens 32 --ignore-eos
  bench/load.py --base-url http://127.0.0.1:8099/v1 --endpoint completions --json
The same commands work against llama-server (`llama-server -m model.gguf --port 8099`) and
vLLM (`vllm serve MODEL --port 8099`); pass --api-key when the server requires one.
"""
import argparse
import http.client
import json
import math
import random
import socket
import sys
import threading
import time
import urllib.parse

WORDS = ("the a little girl boy dog cat sun tree house ran saw happy big red blue played "
         "with ball park friend mother day time once upon went said looked found garden "
         "bird flower water sky small tall green jumped laughed book home together").split()


class Target:
    """Where the server is: scheme, host, port and the path prefix in front of /v1."""

    def __init__(self, base_url, api_key, timeout):
        url = urllib.parse.urlsplit(base_url if "://" in base_url else "http://" + base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("--base-url must look like http://HOST:PORT[/v1], got %r" % base_url)
        prefix = url.path.rstrip("/")
        if prefix.endswith("/v1"):
            prefix = prefix[:-3]
        self.https = url.scheme == "https"
        self.host, self.port = url.hostname, url.port or (443 if self.https else 80)
        self.prefix, self.api_key, self.timeout = prefix, api_key, timeout

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = "Bearer " + self.api_key
        return h

    def path(self, endpoint):
        return self.prefix + "/v1/" + endpoint


def http_error_message(status, payload):
    """'HTTP 401: <error.message>' from an OpenAI-style error body, else the body's start."""
    text = payload.decode("utf-8", "replace").strip()
    try:
        err = json.loads(text).get("error")
        if isinstance(err, dict) and err.get("message"):
            text = err["message"]
        elif isinstance(err, str):
            text = err
    except (ValueError, AttributeError):
        pass
    return "HTTP %d: %s" % (status, text[:300])


def first_model_id(target):
    """The first id of GET /v1/models; raises RuntimeError with a message on any failure."""
    conn = target.connect()
    try:
        conn.request("GET", target.path("models"), headers=target.headers())
        resp = conn.getresponse()
        payload = resp.read()
        if resp.status != 200:
            raise RuntimeError("GET /v1/models: " + http_error_message(resp.status, payload))
        return json.loads(payload)["data"][0]["id"]
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as e:
        raise RuntimeError("GET /v1/models: %s: %s" % (type(e).__name__, e)) from None
    finally:
        conn.close()


def build_prompt(number, words, seed):
    """About `words` words, deterministic in seed; the request number comes first."""
    rng = random.Random(seed)
    return "Request %d: " % number + " ".join(rng.choice(WORDS) for _ in range(max(words, 1)))


def request_body(args, number):
    prompt = build_prompt(number, args.prompt_tokens, args.seed)
    body = {"model": args.model, "max_tokens": args.max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "seed": args.seed + number}
    if args.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if args.ignore_eos:
        body["ignore_eos"] = True
    if args.temperature is not None:
        body["temperature"] = args.temperature
    return body


def chunk_text(chunk, endpoint):
    """The text a streamed chunk carries ('' for role-only, usage and finish chunks)."""
    text = ""
    for choice in chunk.get("choices") or []:
        if endpoint == "chat":
            delta = choice.get("delta") or {}
            text += (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        else:
            text += choice.get("text") or ""
    return text


class Result:
    """One request's outcome. Times are seconds; ttft is None when no text arrived."""

    def __init__(self):
        self.error = None
        self.ttft = None
        self.itls = []
        self.e2e = None
        self.tokens = 0


def run_one(target, args, number):
    """Sends request `number` and reads its stream to the end; never raises."""
    res = Result()
    body = json.dumps(request_body(args, number)).encode()
    path = target.path("chat/completions" if args.endpoint == "chat" else "completions")
    conn = target.connect()
    start = time.perf_counter()
    deadline = start + args.timeout
    try:
        conn.request("POST", path, body=body, headers=target.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            res.error = http_error_message(resp.status, resp.read())
            return res
        last, chunks, usage_tokens, done = None, 0, None, False
        while True:
            raw = resp.readline()
            now = time.perf_counter()
            if now > deadline:
                raise socket.timeout("request exceeded --timeout %gs" % args.timeout)
            if not raw:
                break
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue  # blank separators, ': keepalive' comments, event:/id: fields
            data = line[5:].strip()
            if data == "[DONE]":
                done, res.e2e = True, now - start
                break
            event = json.loads(data)
            if not isinstance(event, dict):
                raise ValueError("SSE data is not a JSON object: %s" % data[:100])
            if event.get("error") or event.get("object") == "error":
                err = event.get("error", event)
                res.error = "error event: %s" % (err.get("message", err) if isinstance(err, dict) else err)
                return res
            if event.get("usage"):
                usage_tokens = event["usage"].get("completion_tokens")
            if chunk_text(event, args.endpoint):
                if last is None:
                    res.ttft = now - start
                else:
                    res.itls.append(now - last)
                last = now
                chunks += 1
        if not done:
            res.error = "stream ended before data: [DONE]"
            return res
        res.tokens = usage_tokens if usage_tokens is not None else chunks
    except socket.timeout as e:
        res.error = "timeout: %s" % (e if str(e) not in ("", "timed out") else
                                      "no data for --timeout %gs" % args.timeout)
    except (OSError, http.client.HTTPException, ValueError) as e:
        res.error = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
    return res


def run_load(target, args):
    """Runs args.requests requests with args.concurrency in flight: (results, wall seconds)."""
    results = [None] * args.requests
    next_number = iter(range(args.requests))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                number = next(next_number, None)
            if number is None:
                return
            results[number] = run_one(target, args, number)

    threads = [threading.Thread(target=client, daemon=True)
               for _ in range(min(args.concurrency, args.requests))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - start


def percentile(values, p):
    """Nearest rank: the value at 1-based rank ceil(p/100 * n) of the sorted values; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100.0 * len(ordered))) - 1]


def summarize(args, results, wall, first_error=None):
    """The report as a dict (the --json object). first_error overrides the requests' own."""
    ok = [r for r in results if r is not None and r.error is None]
    errors = ["not sent" if r is None else r.error for r in results if r is None or r.error]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    itls = [gap for r in ok for gap in r.itls]
    e2es = [r.e2e for r in ok]
    tokens = sum(r.tokens for r in ok)
    report = {
        "requests": args.requests, "ok": len(ok), "errors": len(errors),
        "first_error": first_error or next((e for e in errors if e), None),
        "ttft_p50_s": percentile(ttfts, 50), "ttft_p99_s": percentile(ttfts, 99),
        "itl_p50_s": percentile(itls, 50), "itl_p99_s": percentile(itls, 99),
        "e2e_p50_s": percentile(e2es, 50), "e2e_p99_s": percentile(e2es, 99),
        "generated_tokens": tokens,
        "generated_tokens_per_second": tokens / wall if wall > 0 else 0.0,
        "requests_per_second": len(ok) / wall if wall > 0 else 0.0,
        "wall_seconds": wall,
    }
    report.update({"base_url": args.base_url, "model": args.model, "endpoint": args.endpoint,
                   "concurrency": args.concurrency, "prompt_tokens": args.prompt_tokens,
                   "max_tokens": args.max_tokens, "ignore_eos": args.ignore_eos,
                   "seed": args.seed, "temperature": args.temperature, "timeout_s": args.timeout})
    return report


def print_table(r):
    def sec(v):  # 3 significant digits, at least 3 decimals: 0.000822, 0.0110, 1.234
        if v is None:
            return "-"
        return "%.*f" % (max(3, 2 - math.floor(math.log10(v))) if v > 0 else 3, v)

    rows = [
        ("target", "%s  model=%s  endpoint=%s" % (r["base_url"], r["model"], r["endpoint"])),
        ("load", "concurrency=%d  requests=%d  prompt~%d words  max_tokens=%d%s" % (
            r["concurrency"], r["requests"], r["prompt_tokens"], r["max_tokens"],
            "  ignore_eos" if r["ignore_eos"] else "")),
        ("requests ok / errors", "%d / %d" % (r["ok"], r["errors"])),
    ]
    if r["first_error"]:
        rows.append(("first error", r["first_error"]))
    rows += [
        ("TTFT p50 / p99 (s)", "%s / %s" % (sec(r["ttft_p50_s"]), sec(r["ttft_p99_s"]))),
        ("ITL p50 / p99 (s)", "%s / %s" % (sec(r["itl_p50_s"]), sec(r["itl_p99_s"]))),
        ("e2e p50 / p99 (s)", "%s / %s" % (sec(r["e2e_p50_s"]), sec(r["e2e_p99_s"]))),
        ("generated tokens", "%d" % r["generated_tokens"]),
        ("generated tok/s", "%.1f" % r["generated_tokens_per_second"]),
        ("requests/s", "%.3f" % r["requests_per_second"]),
        ("wall time (s)", "%.3f" % r["wall_seconds"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print("%-*s  %s" % (width, name, value))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:8080",
                    help="server URL, with or without a trailing /v1 (default %(default)s)")
    ap.add_argument("--api-key", help="sent as 'Authorization: Bearer KEY'")
    ap.add_argument("--model", help="model name to send (default: the first id of GET /v1/models)")
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight (default 1)")
    ap.add_argument("--requests", type=int, default=8, help="requests in total (default 8)")
    ap.add_argument("--prompt-tokens", type=int, default=128,
                    help="approximate prompt length in words (default 128)")
    ap.add_argument("--max-tokens", type=int, default=64, help="output tokens per request (default 64)")
    ap.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    ap.add_argument("--ignore-eos", action="store_true",
                    help='send "ignore_eos": true, so each request generates exactly --max-tokens')
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds per request, and per socket read (default 600)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--seed", type=int, default=0, help="prompt words and per-request sampling seed")
    ap.add_argument("--temperature", type=float,
                    help="sent as \"temperature\" (default: not sent, the server's default)")
    args = ap.parse_args(argv)
    for name in ("concurrency", "requests", "max_tokens"):
        if getattr(args, name) < 1:
            ap.error("--%s must be at least 1" % name.replace("_", "-"))
    if args.prompt_tokens < 0:
        ap.error("--prompt-tokens must not be negative")
    if args.timeout <= 0:
        ap.error("--timeout must be positive")
    try:
        target = Target(args.base_url, args.api_key, args.timeout)
    except ValueError as e:
        ap.error(str(e))
    return args, target


def main(argv=None):
    args, target = parse_args(argv)
    first_error = None
    if args.model:
        results, wall = run_load(target, args)
    else:
        try:
            args.model = first_model_id(target)
            results, wall = run_load(target, args)
        except RuntimeError as e:  # no model to ask for: every request counts as failed
            first_error, results, wall = str(e), [None] * args.requests, 0.0
    report = summarize(args, results, wall, first_error)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0 if report["errors"] == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
