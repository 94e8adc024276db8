#!/usr/bin/env python3
"""What a server's first concurrent requests pay for memory it has not touched yet: waves of
C concurrent 1-token completions (distinct prompts, so no prefix-cache hits) against a fresh
server, each wave's wall time and the server's minor page faults during it. Prints one
Markdown table.

    bench/first_waves.py SPILLWAY_BINARY --model M.gguf [--baseline OTHER_BINARY] [--rounds 3]
                         [--waves 3] [--concurrency 8]

With --baseline, each round starts a server of each binary in turn (alternated, so the
machine's noise hits both alike). Later waves reuse what the first ones faulted in (state
slots, snapshots, KV blocks), so wave 1 minus the last wave is the cold-start cost.
Linux only (the faults are field 10 of /proc/PID/stat).
"""
import argparse
import http.client
import json
import sys
import threading
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from hybrid_prefix import start  # noqa: E402  (the same server start-up)


def minor_faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # field 10: minflt


def complete(port, model_id, prompt, errors):
    """One 1-token completion; a failure is appended to `errors` (it runs on its own thread)."""
    try:
        body = json.dumps({"model": model_id, "prompt": prompt, "max_tokens": 1, "temperature": 0})
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = c.getresponse()
        text = response.read()
        if response.status != 200:
            errors.append(f"HTTP {response.status}: {text[:200]!r}")
    except OSError as e:
        errors.append(str(e))


def run_server(binary, model, waves, concurrency):
    proc, port = start(binary, model, max_running=None)  # the server's default
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/v1/models")
        model_id = json.loads(c.getresponse().read())["data"][0]["id"]
        rows = []
        for w in range(waves):
            before = minor_faults(proc.pid)
            errors = []
            t0 = time.perf_counter()
            threads = [threading.Thread(target=complete,
                                        args=(port, model_id, f"wave {w} request {r} of {concurrency}", errors))
                       for r in range(concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise RuntimeError(f"wave {w + 1}: {len(errors)} requests failed, e.g. {errors[0]}")
            rows.append((time.perf_counter() - t0, minor_faults(proc.pid) - before))
        return rows
    finally:
        proc.terminate()
        proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spillway")
    parser.add_argument("--model", required=True)
    parser.add_argument("--baseline", help="a second binary, alternated with the first")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    a = parser.parse_args()
    binaries = [("baseline", a.baseline)] if a.baseline else []
    binaries.append(("this", a.spillway))
    header = " | ".join(f"wave {w + 1}: s (faults)" for w in range(a.waves))
    print(f"| binary | round | {header} |")
    print("|---|---|" + "---|" * a.waves)
    for r in range(a.rounds):
        for name, binary in binaries:
            rows = run_server(binary, a.model, a.waves, a.concurrency)
            cells = " | ".join(f"{s:.3f} ({faults})" for s, faults in rows)
            print(f"| {name} | {r + 1} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
