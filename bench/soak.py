#!/usr/bin/env python3
"""Soak and fault runs against a `spillway serve` this script starts (issue #20).

Modes (one per run):
  soak (default)   --clients N (64) threads send mixed requests for --minutes T (10):
                   streamed and whole, chat and completions, n > 1, temperature / top_p /
                   seed, logprobs, stop strings, max_tokens, some response_format
                   json_object, some invalid requests (a 4xx is expected), and streams the
                   client drops early (after a few chunks; half with a TCP reset).
                   --quick: 16 clients for 1 minute.
  --disconnects K  the clients only open streams (long, ignore_eos) and drop them after 0-4
                   chunks (half with a TCP reset): K/4 (at least 100) to warm up, then K
                   counted; then a greedy request must still give the tokens it gave first.
  --read-faults    every decoder layer streamed (--memory-budget 1G --resident-layers 0)
                   with the debug read-fault injection on (SPILLWAY_DEBUG_READ_FAULTS, see
                   engine/platform/read_fault_injection.h): reads fail with EIO during the
                   second fifth of the run and end short during the fourth; requests failing
                   then with a 500 / an SSE error event naming the injected fault are
                   "failed by the fault"; the same greedy request is compared before the
                   faults and after the last window.

Every response is checked: status (2xx, or the 4xx an invalid request must get), strict SSE
framing (only `data: ` lines, blank lines and comments; JSON chunks of the right object
type; one finish_reason per choice; [DONE] last), choice indices < n, usage (prompt +
completion = total; completion <= n x max_tokens; with logprobs, the logprob entries of
all choices = completion_tokens; with finish_reason "length" on every choice, completion =
n x max_tokens), json_object content that parses when it stopped. Anything else, a 5xx, a
connection error or a timeout is an *unexpected* error.

At the end (clients stopped): /metrics gauges must return to 0 (requests running / waiting,
output paused, KV blocks used, recurrent-state slots used), the server's RSS (VmRSS, every
2 s) is reported as the peak of the warm-up (the first fifth of the run, or longer: until the
prefix cache has touched every KV block, < 1% free, after which RSS plateaus) and of the last
fifth,
and the server must drain on SIGTERM with exit status 0.
Exit status: 0 when there was no unexpected error, gauges were back to 0, RSS grew < 5%
(soak, disconnects; a soak too short to touch every KV block reports the RSS check as
skipped) and the server exited 0; else 1.

Examples (Release build, from the repository root):
  bench/soak.py --bin build/rel/cli/spillway --quick
  bench/soak.py --bin build/rel/cli/spillway                    # 64 clients, 10 minutes
  bench/soak.py --bin build/rel/cli/spillway --disconnects 1000
  bench/soak.py --bin build/rel/cli/spillway --read-faults --minutes 1 --clients 8 \\
      --model ../shared/testdata/models/stories260K.gguf
Without --model, `spillway make-demo-model` writes a small demo model to a temporary folder.
"""
import argparse
import http.client
import json
import os
import queue
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

GAUGES = [("spillway_requests_running", None), ("spillway_requests_waiting", None),
          ("spillway_output_paused_requests", None), ("spillway_kv_cache_blocks", 'state="used"'),
          ("spillway_recurrent_state_slots", 'state="used"')]
WORDS = ("the a little girl boy dog cat sun tree house ran saw happy big red blue played with ball "
         "park friend mother day time once upon went said looked found garden").split()


class Server:
    def __init__(self, args, env):
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
        self.port = None
        self.tail = []
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.time() + 300
        while self.port is None and time.time() < deadline:
            try:
                rec = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if rec is None:
                raise SystemExit("spillway exited before listening: %s" % self.tail[-10:])
            if rec.get("message") == "listening":
                self.port = int(rec["port"])
        while time.time() < deadline:
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("spillway did not become healthy")

    def _read(self):
        for line in self.proc.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                rec = {"message": line.rstrip()}
            self.tail = (self.tail + [rec])[-50:]
            self.lines.put(rec)
        self.lines.put(None)

    def request(self, method, path, body=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    def gauges(self):
        status, text = self.request("GET", "/metrics")
        out = {}
        for line in text.decode().splitlines():
            for name, label in GAUGES:
                if line.startswith(name + ("{" if label else " ")) and (label is None or label in line):
                    out[name + ("{%s}" % label if label else "")] = float(line.rsplit(" ", 1)[1])
        return out

    def kv_blocks(self):
        """{state: blocks} of spillway_kv_cache_blocks."""
        _, text = self.request("GET", "/metrics")
        blocks = {}
        for line in text.decode().splitlines():
            if line.startswith("spillway_kv_cache_blocks{"):
                blocks[line.split('state="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
        return blocks

    def gauges_cached(self):
        return self.kv_blocks().get("cached")

    def kv_free_fraction(self):
        blocks = self.kv_blocks()
        total = sum(blocks.values())
        return blocks.get("free", 0) / total if total else 1.0


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = {}
        self.unexpected = []
        self.completion_tokens = 0

    def add(self, outcome, message=None, tokens=0):
        with self.lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            self.completion_tokens += tokens
            if outcome == "UNEXPECTED" and len(self.unexpected) < 20:
                self.unexpected.append(message)


class Unexpected(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Unexpected(what)


def prompt(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 24)))


def invalid_request(rng, model):
    """(path, raw body bytes, accepted statuses): requests the server must refuse with a 4xx."""
    chat = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    cases = [
        ("/v1/chat/completions", dict(chat, temperature=-1)),
        ("/v1/chat/completions", dict(chat, n=0)),
        ("/v1/chat/completions", dict(chat, max_tokens=-3)),
        ("/v1/chat/completions", dict(chat, top_p=7)),
        ("/v1/chat/completions", {"model": model}),
        ("/v1/chat/completions", dict(chat, model="no-such-model")),
        ("/v1/completions", {"model": model, "prompt": "x", "logprobs": 99}),
        ("/v1/completions", {"model": model, "prompt": "x", "max_tokens": 10 ** 9}),
        ("/v1/chat/completions", dict(chat, response_format={"type": "json_schema"})),
        ("/v1/chat/completions", b'{"model": "x", "messages": ['),
        ("/v1/chat/completions", b"\x00\x01 not json"),
    ]
    path, body = rng.choice(cases)
    return path, body if isinstance(body, bytes) else json.dumps(body).encode()


def make_request(rng, model, max_tokens_cap):
    """A random valid request: (path, body dict)."""
    chat = rng.random() < 0.6
    body = {"model": model, "max_tokens": rng.randint(1, max_tokens_cap)}
    if chat:
        msgs = [{"role": "user", "content": prompt(rng)}]
        if rng.random() < 0.2:
            msgs = [{"role": "system", "content": "Be brief."}] + msgs
        body["messages"] = msgs
    else:
        body["prompt"] = prompt(rng)
    if rng.random() < 0.3:
        body["n"] = rng.randint(2, 3)
    r = rng.random()
    if r < 0.3:
        body["temperature"] = 0
    elif r < 0.9:
        body["temperature"] = round(rng.uniform(0.2, 1.5), 2)
        if rng.random() < 0.5:
            body["top_p"] = round(rng.uniform(0.5, 1.0), 2)
    if rng.random() < 0.5:
        body["seed"] = rng.randint(0, 1 << 30)
    if rng.random() < 0.25:
        if chat:
            body["logprobs"] = True
            body["top_logprobs"] = rng.randint(0, 5)
        else:
            body["logprobs"] = rng.randint(0, 5)
    if rng.random() < 0.2:
        body["stop"] = rng.sample(["the", ".", "\n", "dog", "ball"], rng.randint(1, 3))
    if rng.random() < 0.2:
        body["ignore_eos"] = True
    if chat and rng.random() < 0.08:
        body["response_format"] = {"type": "json_object"}
    body["stream"] = rng.random() < 0.7
    if body["stream"] and rng.random() < 0.7:
        body["stream_options"] = {"include_usage": True}
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def choice_tokens_from_logprobs(choice, chat):
    lp = choice.get("logprobs")
    if not lp:
        return 0
    return len(lp.get("content") or []) if chat else len(lp.get("tokens") or [])


def check_usage(usage, body, n, finishes, logprob_tokens):
    check(isinstance(usage, dict), "no usage")
    p, c, t = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
    check(isinstance(p, int) and isinstance(c, int) and p > 0 and c >= 0 and p + c == t, "bad usage %r" % usage)
    check(c <= n * body["max_tokens"], "completion_tokens %d > n x max_tokens %d" % (c, n * body["max_tokens"]))
    if finishes and all(f == "length" for f in finishes):
        check(c == n * body["max_tokens"], "all choices 'length' but completion_tokens %d != %d" %
              (c, n * body["max_tokens"]))
    if logprob_tokens is not None:
        check(logprob_tokens == c, "logprob entries %d != completion_tokens %d" % (logprob_tokens, c))
    return c


def check_json_object(body, text, finish):
    # A stop string ends the text anywhere (finish_reason "stop" too): only EOS means complete.
    if body.get("response_format") and finish == "stop" and not body.get("stop"):
        try:
            check(isinstance(json.loads(text), dict), "json_object content is not an object: %r" % text[:200])
        except ValueError:
            raise Unexpected("json_object content does not parse: %r" % text[:200])


class Client:
    def __init__(self, server, args, stats, rng):
        self.server, self.args, self.stats, self.rng = server, args, stats, rng

    def connect(self):
        return http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=self.args.timeout)

    def drop(self, conn):
        if conn.sock is not None and self.rng.random() < 0.5:
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        conn.close()

    def fault_error(self, message):
        """An error the injected read faults explain (only in --read-faults mode)."""
        return self.args.read_faults and "injected fault" in (message or "")

    def run_one(self):
        args, rng = self.args, self.rng
        if args.disconnects:
            path = "/v1/completions" if rng.random() < 0.5 else "/v1/chat/completions"
            body = {"model": args.model_id, "max_tokens": 200, "ignore_eos": True, "stream": True,
                    "n": rng.choice([1, 1, 2]), "temperature": 0.8}
            body.update({"prompt": prompt(rng)} if path == "/v1/completions" else
                        {"messages": [{"role": "user", "content": prompt(rng)}]})
            return self.stream(path, body, drop_after=rng.randint(0, 4))
        if rng.random() < args.invalid_fraction:
            path, raw = invalid_request(rng, args.model_id)
            conn = self.connect()
            try:
                conn.request("POST", path, body=raw, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                payload = resp.read()
                check(400 <= resp.status < 500, "invalid request to %s got %d: %r" % (path, resp.status, payload[:200]))
                err = json.loads(payload)
                check(isinstance(err.get("error", {}).get("message"), str), "4xx without an OpenAI error body")
                return "rejected as expected (4xx)", 0
            finally:
                conn.close()
        path, body = make_request(rng, args.model_id, args.max_tokens)
        if body["stream"]:
            drop = rng.randint(0, 6) if rng.random() < args.drop_fraction else None
            return self.stream(path, body, drop_after=drop)
        return self.whole(path, body)

    def status_outcome(self, status, payload):
        if status == 429:
            return "overloaded (429)"
        if status >= 500:
            msg = payload[:300].decode(errors="replace")
            if self.fault_error(msg):
                return "failed by the injected fault"
            raise Unexpected("status %d: %s" % (status, msg))
        raise Unexpected("status %d: %r" % (status, payload[:300]))

    def whole(self, path, body):
        chat = path.endswith("chat/completions")
        conn = self.connect()
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            if resp.status != 200:
                return self.status_outcome(resp.status, payload), 0
            r = json.loads(payload)
            n = body.get("n", 1)
            check(r.get("object") == ("chat.completion" if chat else "text_completion"), "object %r" % r.get("object"))
            check(sorted(c["index"] for c in r["choices"]) == list(range(n)), "choice indices")
            finishes = [c["finish_reason"] for c in r["choices"]]
            check(all(f in ("stop", "length") for f in finishes), "finish reasons %r" % finishes)
            lp = None
            if body.get("logprobs") is not None and body.get("logprobs") is not False:
                lp = sum(choice_tokens_from_logprobs(c, chat) for c in r["choices"])
            tokens = check_usage(r.get("usage"), body, n, finishes, lp)
            for c in r["choices"]:
                check_json_object(body, c["message"]["content"] if chat else c["text"], c["finish_reason"])
            return ("whole ok", tokens)
        finally:
            conn.close()

    def stream(self, path, body, drop_after=None):
        chat = path.endswith("chat/completions")
        conn = self.connect()
        n = body.get("n", 1)
        try:
            conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                return self.status_outcome(resp.status, resp.read()), 0
            check(resp.getheader("Content-Type", "").startswith("text/event-stream"), "not an event stream")
            finishes, texts, lp_tokens, usage, done, chunks = {}, {}, 0, None, False, 0
            while True:
                if drop_after is not None and chunks >= drop_after:
                    self.drop(conn)
                    return "dropped mid-stream", 0
                raw = resp.readline()
                if not raw:
                    break
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "" or line.startswith(":"):
                    continue
                check(line.startswith("data: "), "not an SSE data line: %r" % line[:200])
                check(not done, "data after [DONE]")
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    continue
                chunk = json.loads(data)
                if "error" in chunk:
                    msg = chunk["error"].get("message", "")
                    if self.fault_error(msg):
                        return "failed by the injected fault", 0
                    raise Unexpected("SSE error event: %s" % msg)
                chunks += 1
                check(chunk.get("object") == ("chat.completion.chunk" if chat else "text_completion"),
                      "chunk object %r" % chunk.get("object"))
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for c in chunk.get("choices", []):
                    i = c["index"]
                    check(0 <= i < n, "choice index %d >= n %d" % (i, n))
                    check(i not in finishes, "chunk for choice %d after its finish_reason" % i)
                    texts[i] = texts.get(i, "") + ((c.get("delta") or {}).get("content") or "" if chat else c.get("text", ""))
                    lp_tokens += choice_tokens_from_logprobs(c, chat)
                    if c.get("finish_reason"):
                        finishes[i] = c["finish_reason"]
            check(done, "stream ended without [DONE]")
            check(sorted(finishes) == list(range(n)), "finish_reason for choices %r of %d" % (sorted(finishes), n))
            check(all(f in ("stop", "length") for f in finishes.values()), "finish reasons %r" % finishes)
            tokens = 0
            if body.get("stream_options", {}).get("include_usage"):
                with_lp = body.get("logprobs") is not None and body.get("logprobs") is not False
                tokens = check_usage(usage, body, n, list(finishes.values()), lp_tokens if with_lp else None)
            else:
                check(usage is None, "usage chunk without include_usage")
            for i, f in finishes.items():
                check_json_object(body, texts.get(i, ""), f)
            return "stream ok", tokens
        finally:
            conn.close()

    def loop(self, stop, budget):
        while not stop.is_set():
            if budget is not None:
                with budget[1]:
                    if budget[0][0] <= 0:
                        return
                    budget[0][0] -= 1
            try:
                outcome, tokens = self.run_one()
                self.stats.add(outcome, tokens=tokens)
            except Unexpected as e:
                self.stats.add("UNEXPECTED", str(e))
            except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError) as e:
                self.stats.add("UNEXPECTED", "%s: %s" % (type(e).__name__, e))


def greedy(server, model_id):
    status, payload = server.request("POST", "/v1/completions", {
        "model": model_id, "prompt": "Once upon a time", "max_tokens": 16, "temperature": 0, "ignore_eos": True})
    return status, (json.loads(payload)["choices"][0]["text"] if status == 200 else payload[:300])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="spillway")
    ap.add_argument("--model", help="GGUF model (default: a `spillway make-demo-model` model)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--quick", action="store_true", help="16 clients, 1 minute")
    ap.add_argument("--disconnects", type=int, default=0, help="mid-stream disconnect mode: this many")
    ap.add_argument("--read-faults", action="store_true", help="fault-injecting reader mode")
    ap.add_argument("--max-tokens", type=int, default=48, help="max_tokens drawn from 1..this")
    ap.add_argument("--drop-fraction", type=float, default=0.15, help="streams dropped early")
    ap.add_argument("--invalid-fraction", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=120.0, help="per socket read, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the report here too")
    ap.add_argument("server_args", nargs="*", help="after --: more `spillway serve` flags")
    args = ap.parse_args(argv)
    if args.quick:
        args.clients, args.minutes = 16, 1.0
    if args.disconnects:
        args.clients = min(args.clients, 32)

    tmp = tempfile.TemporaryDirectory()
    model = args.model
    if not model:
        model = os.path.join(tmp.name, "demo.gguf")
        subprocess.run([args.bin, "make-demo-model", "--out", model], check=True, stdout=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPILLWAY_") or k == "SPILLWAY_ISA"}
    serve = [args.bin, "serve", "--model", model, "--port", "0", "--log-format", "json"]
    control = os.path.join(tmp.name, "read-faults")
    if args.read_faults:
        serve += ["--memory-budget", "1G", "--resident-layers", "0", "--read-mode", "buffered"]
        env["SPILLWAY_DEBUG_READ_FAULTS"] = control
    server = Server(serve + args.server_args, env)
    report = {"mode": "disconnects" if args.disconnects else "read-faults" if args.read_faults else "soak",
              "clients": args.clients, "model": os.path.basename(model)}
    try:
        _, payload = server.request("GET", "/v1/models")
        args.model_id = json.loads(payload)["data"][0]["id"]
        before = greedy(server, args.model_id)
        stats = Stats()
        stop = threading.Event()
        # Disconnect mode: a warm-up quarter (until the KV pool's blocks were all touched
        # once, RSS grows with them) before the counted disconnects.
        warmup_count = max(100, args.disconnects // 4) if args.disconnects else 0
        budget = ([args.disconnects + warmup_count], threading.Lock()) if args.disconnects else None
        rng = random.Random(args.seed)
        clients = [Client(server, args, stats, random.Random(rng.random())) for _ in range(args.clients)]
        threads = [threading.Thread(target=c.loop, args=(stop, budget), daemon=True) for c in clients]
        start = time.time()
        duration = args.minutes * 60 if not args.disconnects else None
        for t in threads:
            t.start()
        samples = []  # (seconds, rss MB, requests done)
        windows = [(0.2, 0.4, "eio"), (0.6, 0.8, "short")] if args.read_faults else []
        fault_log = []
        kv_full_at = None
        while True:
            time.sleep(0.5 if args.disconnects else 2)
            now = time.time() - start
            done = sum(stats.outcomes.values())
            samples.append((now, server.rss_mb(), done))
            if kv_full_at is None and server.kv_free_fraction() <= 0.01:
                kv_full_at = now  # the prefix cache has touched every KV block: RSS plateaus
            if args.read_faults:
                word = next((w for a, b, w in windows if a * duration <= now < b * duration), None)
                if word and not os.path.exists(control):
                    open(control, "w").write(word)
                    fault_log.append((round(now, 1), word, done))
                elif not word and os.path.exists(control):
                    os.unlink(control)
                    fault_log.append((round(now, 1), "off", done))
            if duration is not None and now >= duration:
                break
            if budget is not None and not any(t.is_alive() for t in threads):
                break
            if server.proc.poll() is not None:
                break
        stop.set()
        for t in threads:
            t.join(timeout=args.timeout + 10)
        wall = time.time() - start
        if os.path.exists(control):
            os.unlink(control)
        alive = server.proc.poll() is None
        report.update(seconds=round(wall, 1), outcomes=stats.outcomes, completion_tokens=stats.completion_tokens,
                      unexpected_errors=stats.outcomes.get("UNEXPECTED", 0), first_unexpected=stats.unexpected[:5],
                      server_alive=alive)
        ok = alive and not stats.outcomes.get("UNEXPECTED")
        if alive:
            deadline, gauges = time.time() + 30, {}
            while time.time() < deadline:
                gauges = server.gauges()
                if all(v == 0 for v in gauges.values()):
                    break
                time.sleep(0.2)
            report["gauges_at_end"] = gauges
            ok &= all(v == 0 for v in gauges.values())
            after = greedy(server, args.model_id)
            report["greedy_before_after_equal"] = before == after and before[0] == 200
            ok &= report["greedy_before_after_equal"]
            span = samples[-1][0] if samples else 0
            # Warm-up: the first fifth of the run, or longer until every KV block was touched.
            warm_end = max(0.2 * span, kv_full_at or 0)
            if args.disconnects:
                warm_end = next((t for t, _, d in samples if d >= warmup_count), span)
                report["warmup_disconnects"] = warmup_count
            report["warmup_seconds"] = round(warm_end, 1)
            warm = [s[1] for s in samples if s[0] <= warm_end] or [samples[0][1]]
            last = [s[1] for s in samples if s[0] >= 0.8 * span] or [samples[-1][1]]
            report["rss_mb"] = {"warmup_peak": round(max(warm), 1), "last_fifth_peak": round(max(last), 1),
                                "idle_end": round(server.rss_mb(), 1), "max": round(max(s[1] for s in samples), 1)}
            growth = max(last) / max(warm) - 1
            report["rss_growth_pct"] = round(100 * growth, 2)
            step = max(1, len(samples) // 10)
            report["rss_timeline"] = [(round(t), round(r, 1), d) for t, r, d in samples[::step]]
            report["kv_cache_blocks_cached_at_end"] = server.gauges_cached()
            _, text = server.request("GET", "/metrics")
            report["server_finish_reasons"] = {
                line.split('finish_reason="')[1].split('"')[0]: int(float(line.rsplit(" ", 1)[1]))
                for line in text.decode().splitlines() if line.startswith("spillway_requests_finished_total{")}
            if args.read_faults:
                pass
            elif not args.disconnects and kv_full_at is None:
                # RSS still grows with the KV blocks the prefix cache touches: not a leak.
                report["rss_check"] = ("skipped: the KV pool was never fully touched (run longer, or pass "
                                       "-- --kv-cache-bytes SMALLER)")
            else:
                report["rss_check"] = "pass" if growth < 0.05 else "FAIL: grew 5% or more after warm-up"
                ok &= growth < 0.05
        if args.read_faults:
            report["fault_windows"] = fault_log
            ok &= stats.outcomes.get("failed by the injected fault", 0) > 0
        server.proc.send_signal(signal.SIGTERM)
        try:
            code = server.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            code = "timeout"
        report["exit_status"] = code
        ok &= code == 0
        report["pass"] = bool(ok)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        tmp.cleanup()
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if report.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
