#!/usr/bin/env python3
"""Models bigger than memory, measured the way issue #21 asks; prints a Markdown report.

    bench/streaming.py SPILLWAY_BINARY [--work DIR] [--quick] [--models 1b,3b]
                       [--fraction 0.5] [--threads N] [--batch-sweep] [--sweeps]

For each model (1.1B and 2.4B parameters, Q8_0, TinyLlama- and 2-3B-shaped random weights
written by `spillway make-demo-model`), with a memory cgroup limit of `--fraction` of the
model file, arms in this order, each in a FRESH child cgroup of the caller's cgroup v1
memory controller (created, limited, removed) and each after evicting the model file from
the page cache (posix_fadvise DONTNEED, checked with fincore):

  disk   `dd iflag=direct` over the model file, one and 4 concurrent (16 MiB requests), before
         and after the engines: the device's read bandwidth in this run (the best counts:
         virtual disks reward requests in flight, as the kernel's readahead keeps them);
  mmap   a plain-mmap reader (a stand-in for llama.cpp): maps the file and touches every
         byte once per "token" in the same limit; its tok/s is an upper bound for an mmap
         engine (it does no arithmetic);
  spillway  `spillway bench --memory-budget auto --batch B` in the same limit: decode tok/s,
         as a fraction of disk bandwidth / bytes streamed per step, batch-B aggregate tok/s,
         the plan's resident layers, those at the end, and shed / re-admit events.

--quick: a ~0.6 GB model only, fewer tokens, batch 4 (a smoke run of every arm).
--batch-sweep: aggregate tok/s vs sequences decoding together (1, 2, 4, 8, 16) with the
   first model streamed (the "beyond one sequence" question).
--sweeps: the older sections (residency sweep, machinery on vs off, prefetch depth) on an
   F16 model, no limit.
Needs a writable cgroup v1 memory controller for the limited arms (skipped otherwise).
"""
import argparse
import datetime
import json
import mmap
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

MODELS = {
    # name: (label, make-demo-model flags)
    "quick": ("0.6B Q8_0 (quick: 12 TinyLlama layers)", ["--layers", "12", "--dim", "2048", "--ff", "5632",
                                                         "--heads", "32", "--kv-heads", "4", "--vocab", "16000",
                                                         "--type", "q8_0"]),
    "1b": ("1.1B Q8_0 (TinyLlama shape)", ["--layers", "22", "--dim", "2048", "--ff", "5632", "--heads", "32",
                                           "--kv-heads", "4", "--vocab", "32000", "--type", "q8_0"]),
    "3b": ("2.4B Q8_0 (32 x 2560, ff 6912)", ["--layers", "32", "--dim", "2560", "--ff", "6912", "--heads", "32",
                                               "--kv-heads", "8", "--vocab", "32000", "--type", "q8_0"]),
}

MIB = 2**20


# ---------------------------------------------------------------- cgroups and page cache

def own_memory_cgroup():
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if "memory" in controllers.split(","):
            d = "/sys/fs/cgroup/memory" + path
            return d if os.access(d, os.W_OK) else None
    return None


class Cgroup:
    """A fresh child cgroup with a memory limit, removed on exit."""

    def __init__(self, parent, name, limit_bytes):
        self.path = os.path.join(parent, f"spillway-bench-{name}-{os.getpid()}")
        os.mkdir(self.path)
        self.write("memory.limit_in_bytes", limit_bytes)

    def write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def read(self, name):
        return open(os.path.join(self.path, name)).read()

    def oom_kills(self):
        m = re.search(r"^oom_kill (\d+)", self.read("memory.oom_control"), re.M)
        return int(m.group(1)) if m else 0

    def peak_bytes(self):
        return int(self.read("memory.max_usage_in_bytes"))

    def run(self, cmd, **kw):
        """Runs cmd inside the cgroup (the child joins it before exec)."""
        procs = os.path.join(self.path, "cgroup.procs")

        def join():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        return subprocess.run(cmd, preexec_fn=join, capture_output=True, text=True, **kw)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for _ in range(20):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.25)


def cached_bytes(path):
    """Bytes of the file in the page cache (fincore), or None where fincore is missing."""
    if not shutil.which("fincore"):
        return None
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True).stdout.strip()
    return int(out) if out.isdigit() else None


def evict(path):
    """Drops the file's pages from the page cache; returns the bytes still cached."""
    left = None
    for _ in range(3):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left = cached_bytes(path)
        if left is not None and left < os.path.getsize(path) // 100:
            break
    return left


# ---------------------------------------------------------------- arms

def disk_bandwidth(path, cg, max_bytes, streams=1):
    """`streams` concurrent `dd iflag=direct` over distinct parts of (at most max_bytes of)
    the file inside cg, 16 MiB requests; bytes per second of all of them together."""
    bs = 16 * MIB
    blocks = max(streams, min(os.path.getsize(path), max_bytes) // bs)
    per = blocks // streams
    procs = os.path.join(cg.path, "cgroup.procs")

    def join():
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    t = time.perf_counter()
    running = [subprocess.Popen(["dd", f"if={path}", "of=/dev/null", f"bs={bs}", f"skip={i * per}", f"count={per}",
                                 "iflag=direct"], preexec_fn=join, stderr=subprocess.PIPE, text=True)
               for i in range(streams)]
    total = 0
    for p in running:
        _, err = p.communicate()
        m = re.search(r"^(\d+) bytes .* copied", err, re.M)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"dd failed: {err.strip()}")
        total += int(m.group(1))
    return total / (time.perf_counter() - t)


MMAP_READER = r"""
import mmap, os, sys, time, json
import numpy as np
path, tokens = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(path) // 8 * 8
with open(path, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    words = np.frombuffer(m, dtype=np.uint64, count=size // 8)
    chunk = (64 << 20) // 8
    times, disk, sink = [], [], 0
    def read_bytes():  # what this process made the block layer read (page faults included)
        for line in open("/proc/self/io"):
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
        return 0
    for _ in range(tokens):
        t, b = time.perf_counter(), read_bytes()
        for i in range(0, words.size, chunk):
            sink ^= int(np.bitwise_xor.reduce(words[i:i + chunk]))
        times.append(time.perf_counter() - t)
        disk.append(read_bytes() - b)
    del words
    m.close()
print(json.dumps({"seconds": times, "disk_bytes": disk, "sink": sink}))
"""


def mmap_arm(path, cg, tokens):
    """Touches every byte of the mapped file once per token, inside cg; per-token seconds."""
    r = cg.run([sys.executable, "-c", MMAP_READER, path, str(tokens)])
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
    return json.loads(r.stdout), None


def spillway_arm(spillway, path, cg, args, read_mode="auto", extra=()):
    cmd = [spillway, "bench", "--model", path, "--memory-budget", "auto", "--prompt-tokens", str(args.prompt),
           "--gen-tokens", str(args.gen), "--batch", str(args.batch), "--repeat", "1", "--threads",
           str(args.threads), "--json", "--no-probe", "--read-mode", read_mode, *extra]
    r = cg.run(cmd)
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {r.stderr.strip()[-400:]}"
    out = json.loads(r.stdout)
    # The start-up log's read-mode line (what `auto` chose, and the probe's figures).
    out["reads_line"] = next((l.split("] ", 2)[-1] if "] " in l else l for l in r.stderr.splitlines()
                              if "reads: " in l), "")
    return out, None


def bench_plain(spillway, model, *flags, gen=8, threads=2):
    cmd = [spillway, "bench", "--model", model, "--prompt-tokens", "128", "--gen-tokens", str(gen),
           "--batch", "1", "--repeat", "1", "--threads", str(threads), "--json", "--no-probe", *flags]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


# ---------------------------------------------------------------- report

def make_model(spillway, work, key):
    path = os.path.join(work, f"streaming-{key}.gguf")
    if not os.path.exists(path):
        print(f"(writing {MODELS[key][0]} to {path})", file=sys.stderr)
        subprocess.run([spillway, "make-demo-model", "--out", path, "--context", "2048", *MODELS[key][1]],
                       check=True, stdout=subprocess.DEVNULL)
    return path


def fmt_left(left):
    return "unchecked (no fincore)" if left is None else f"{left / MIB:.1f} MiB"


def spillway_arms(args):
    """One Spillway arm per --read-modes entry: "spillway" for auto, "spillway-MODE" otherwise."""
    arms = ["spillway" if m == "auto" else f"spillway-{m}" for m in args.read_modes]
    # --baseline: another build's binary (e.g. main's) with --read-mode auto, alternated with the others.
    return arms + (["baseline"] if args.baseline else [])


def read_mode_of(arm):
    return arm.split("-", 1)[1] if "-" in arm else "auto"


def limited_arms(spillway, parent, key, path, args):
    label = MODELS[key][0]
    size = os.path.getsize(path)
    limit = int(size * args.fraction) // MIB * MIB
    rows = {}
    print(f"### {label}: {size / MIB:.0f} MiB file, cgroup limit {limit / MIB:.0f} MiB "
          f"({100 * args.fraction:.0f}%)\n")
    for rep in range(args.rounds):
        # dd before and after the engines: the virtual disks these runs see change speed
        # within minutes, so the bound is the better of the two.
        for arm in ("disk", "disk4", "mmap", *spillway_arms(args), "disk", "disk4"):
            left = evict(path)
            with Cgroup(parent, f"{key}-{arm}", limit) as cg:
                oom0 = cg.oom_kills()
                t0 = time.time()
                if arm.startswith("disk"):
                    out, err = disk_bandwidth(path, cg, args.dd_bytes, 4 if arm == "disk4" else 1), None
                elif arm == "mmap":
                    out, err = mmap_arm(path, cg, args.gen)
                else:
                    if arm == "baseline":
                        out, err = spillway_arm(args.baseline, path, cg, args, args.baseline_read_mode,
                                                args.baseline_args.split())
                    else:
                        out, err = spillway_arm(spillway, path, cg, args, read_mode_of(arm))
                rows.setdefault(arm, []).append({"out": out, "err": err, "left": left, "peak": cg.peak_bytes(),
                                                 "oom": cg.oom_kills() - oom0, "wall": time.time() - t0})
            print(f"(round {rep + 1}: {arm} done in {time.time() - t0:.0f} s; page cache before it "
                  f"{fmt_left(left)})", file=sys.stderr)
    return limit, rows


def report_model(key, limit, rows, args):
    disk = max(r["out"] for r in rows["disk"] + rows["disk4"])
    print(f"Page cache of the model before each arm (after eviction): "
          f"{', '.join(sorted({fmt_left(r['left']) for a in rows.values() for r in a}))}.\n")
    print("| arm | decode tok/s | bound: disk / bytes per step | decode / bound | batch-"
          f"{args.batch} aggregate tok/s | resident layers (plan → end) | sheds / re-admits | peak cgroup memory "
          "| OOM kills |")
    print("|---|---|---|---|---|---|---|---|---|")
    for arm, what in (("disk", "one `dd iflag=direct`"), ("disk4", "4 concurrent `dd iflag=direct`")):
        dds = ", ".join(f"{r['out'] / 1e6:.0f}" for r in rows[arm])
        print(f"| disk: {what}, {args.dd_bytes / MIB:.0f} MiB (before, after the engines) | | {dds} MB/s | | | | | "
              f"{max(r['peak'] for r in rows[arm]) / MIB:.0f} MiB | {sum(r['oom'] for r in rows[arm])} |")
    mm = [r for r in rows["mmap"] if r["out"]]
    mmap_tps, mmap_read_rate = None, 0
    if mm:
        # Every pass after the first (cold) one; the file does not fit, so each pass re-reads it.
        per_token = statistics.median(t for r in mm for t in (r["out"]["seconds"][1:] or r["out"]["seconds"]))
        read = statistics.median(b for r in mm for b in (r["out"]["disk_bytes"][1:] or r["out"]["disk_bytes"]))
        mmap_tps = 1 / per_token
        mmap_read_rate = read * mmap_tps
        size = args.model_bytes[key]
        print(f"| plain mmap reader (touches every byte per token; {read / 1e6:.0f} MB read from disk per token "
              f"after the first, {read * mmap_tps / 1e6:.0f} MB/s) | {mmap_tps:.3f} | {disk / size:.3f} "
              f"({disk / 1e6:.0f} MB/s / {size / 1e6:.0f} MB per token) | {100 * mmap_tps * size / disk:.0f}% | | | | "
              f"{max(r['peak'] for r in mm) / MIB:.0f} MiB | {sum(r['oom'] for r in rows['mmap'])} |")
    else:
        print(f"| plain mmap reader | failed: {rows['mmap'][0]['err']} | | | | | | | |")
    result = {"disk": disk, "mmap_tps": mmap_tps}
    notes = []
    for arm in spillway_arms(args):
        result[arm], arm_notes = report_spillway_arm(arm, rows[arm], disk, mmap_tps, mmap_read_rate, args)
        notes += arm_notes
    print()
    for line in notes:
        print(line)
    print()
    return result


def report_spillway_arm(arm, runs, disk, mmap_tps, mmap_read_rate, args):
    """Prints one table row for a Spillway arm's runs; returns its figures and the notes to print
    under the table."""
    sp = [r for r in runs if r["out"]]
    result, notes = {}, []
    if sp:
        tg = statistics.median(r["out"]["tg_tokens_per_second"] for r in sp)
        res = [r["out"]["residency"] for r in sp]
        streamed = statistics.median(x["streamed_bytes_per_step"] for x in res)
        bound = disk / streamed if streamed else float("inf")
        batch = statistics.median(r["out"].get("batch_tg_tokens_per_second", tg) for r in sp)
        resident = ", ".join(f"{x['planned_resident_layers']} → {x['resident_layers']}" for x in res)
        sheds = ", ".join(f"{x['residency_shed_total']} / {x['residency_readmit_total']}" for x in res)
        own_disk = statistics.median(x.get("disk_read_bytes_per_second", 0) for x in res)
        who = f"baseline `{args.baseline}`" if arm == "baseline" else "spillway"
        mode = (f"{args.baseline_read_mode} {args.baseline_args}".strip() if arm == "baseline"
                else read_mode_of(arm))
        print(f"| {who} `--memory-budget auto --read-mode {mode}` | {tg:.3f} | {bound:.3f} ({disk / 1e6:.0f} MB/s / {streamed / 1e6:.0f} MB "
              f"streamed per step) "
              f"| **{100 * tg / bound:.0f}%** | {batch:.3f} | {resident} of {sp[0]['out']['layers']} | {sheds} "
              f"| {max(r['peak'] for r in sp) / MIB:.0f} MiB | {sum(r['oom'] for r in runs)} |")
        notes.append(f"{arm}: spillway's own start-up disk probe: {own_disk / 1e6:.0f} MB/s; budget "
              f"{res[0]['budget_bytes'] / MIB:.0f} MiB (available at start "
              f"{res[0]['memory_available_bytes_at_start'] / MIB:.0f} MiB less the pressure floor "
              f"{res[0]['pressure_floor_bytes'] / MIB:.0f} MiB).")
        for r in sp:
            if r["out"].get("reads_line"):
                notes.append(f"{arm}: {r['out']['reads_line'].strip()}")
        if mmap_read_rate > disk:
            notes.append(f"{arm}: against the fastest disk read seen in this run (the mmap reader's readahead, "
                  f"{mmap_read_rate / 1e6:.0f} MB/s): decode at {100 * tg * streamed / mmap_read_rate:.0f}% of "
                  f"{mmap_read_rate / streamed:.3f} tok/s.")
        if mmap_tps:
            notes.append(f"{arm}: spillway / plain mmap decode: **{tg / mmap_tps:.2f}×**.")
        events = [e for x in res for e in x["residency_events"]]
        for e in events:
            notes.append(f"- {arm}: event at {e['seconds']:.1f} s (step {e['step']}): {e['reason']}, shed {e['layers_shed']}, "
                  f"re-admitted {e['layers_readmitted']}, {e['resident_layers_after']} resident, "
                  f"{e['available_bytes'] / MIB:.0f} MiB available (floor {e['floor_bytes'] / MIB:.0f} MiB)")
        result.update(tg=tg, bound=bound, batch=batch)
    else:
        print(f"| {arm} | failed: {runs[0]['err']} | | | | | | | |")
    return result, notes


def batch_sweep(spillway, parent, path, args):
    size = os.path.getsize(path)
    limit = int(size * args.fraction) // MIB * MIB
    print(f"## Beyond one sequence: aggregate decode tok/s vs sequences per step ({os.path.basename(path)}, "
          f"limit {limit / MIB:.0f} MiB, cold cache per arm)\n")
    print("| sequences | aggregate tok/s | per sequence | × one sequence | streamed per step |")
    print("|---|---|---|---|---|")
    one = None
    for b in (1, 2, 4, 8, 16):
        evict(path)
        a = argparse.Namespace(**{**vars(args), "batch": b})
        with Cgroup(parent, f"sweep{b}", limit) as cg:
            out, err = spillway_arm(spillway, path, cg, a)
        if not out:
            print(f"| {b} | failed: {err[-200:]} | | | |")
            continue
        agg = out["tg_tokens_per_second"] if b == 1 else out["batch_tg_tokens_per_second"]
        one = one or agg
        print(f"| {b} | {agg:.3f} | {agg / b:.3f} | {agg / one:.2f} | "
              f"{out['residency']['streamed_bytes_per_step'] / 1e6:.0f} MB |")
    print()


def old_sweeps(spillway, work, threads):
    layers = 24
    model = os.path.join(work, "streaming-bench.gguf")
    if not os.path.exists(model):
        subprocess.run([spillway, "make-demo-model", "--out", model, "--layers", str(layers), "--dim", "2048",
                        "--ff", "5632", "--heads", "32", "--kv-heads", "8", "--vocab", "32000",
                        "--context", "1024"], check=True, stdout=subprocess.DEVNULL)

    def io_wait_share(r):
        seconds = r["prompt_tokens"] / r["pp_tokens_per_second"] + r["gen_tokens"] / r["tg_tokens_per_second"]
        return r["residency"]["io_stall_seconds_total"] / seconds

    print(f"## Residency sweep (no memory limit; {os.path.basename(model)}, F16, {layers} layers)\n")
    print("| resident | decode tok/s | prefill tok/s | resident weights | streamed per step | decode / disk bound "
          "| I/O wait share |")
    print("|---|---|---|---|---|---|---|")
    for pct in (0, 25, 50, 75, 100):
        n = layers * pct // 100
        r = bench_plain(spillway, model, "--resident-layers", str(n), threads=threads)
        res = r["residency"]
        disk = f"{100*res['tg_fraction_of_disk']:.1f}%" if "tg_fraction_of_disk" in res else "-"
        print(f"| {pct}% ({n}) | {r['tg_tokens_per_second']:.3f} | {r['pp_tokens_per_second']:.1f} "
              f"| {res['resident_weight_bytes']/1e6:.0f} MB | {res['streamed_bytes_per_step']/1e6:.0f} MB "
              f"| {disk} | {100*io_wait_share(r):.0f}% |")
    print()
    print("## Everything resident: streaming machinery on vs off (interleaved, median of 5)\n")
    on, on_file, off = [], [], []
    for _ in range(5):
        on.append(bench_plain(spillway, model, "--resident-layers", "all", gen=32, threads=threads))
        on_file.append(bench_plain(spillway, model, "--resident-layers", "all", "--file-layout", gen=32,
                                   threads=threads))
        off.append(bench_plain(spillway, model, "--no-streaming", gen=32, threads=threads))
    med = lambda runs, key: statistics.median(r[key] for r in runs)
    print("| | on (--resident-layers all) | on, file layout (--file-layout) | off (--no-streaming) "
          "| on / off | on, file layout / off |")
    print("|---|---|---|---|---|---|")
    for key, label in (("tg_tokens_per_second", "decode tok/s"), ("pp_tokens_per_second", "prefill tok/s")):
        a, b, c = med(on, key), med(on_file, key), med(off, key)
        print(f"| {label} | {a:.2f} | {b:.2f} | {c:.2f} | {a/c:.3f} | {b/c:.3f} |")
    print()
    print("## Prefetch depth (every layer streamed)\n")
    print("| depth | decode tok/s | decode / disk bound | I/O wait share |")
    print("|---|---|---|---|")
    for depth in (1, 2, 4):
        r = bench_plain(spillway, model, "--resident-layers", "0", "--prefetch-depth", str(depth), threads=threads)
        res = r["residency"]
        print(f"| {depth} | {r['tg_tokens_per_second']:.3f} | {100*res['tg_fraction_of_disk']:.1f}% "
              f"| {100*io_wait_share(r):.0f}% |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spillway")
    ap.add_argument("--work", default="build/bench", help="where the models are written (not tmpfs: O_DIRECT)")
    ap.add_argument("--models", default="1b,3b", help="comma-separated: quick, 1b, 3b")
    ap.add_argument("--fraction", type=float, default=0.5, help="cgroup limit as a fraction of the model file")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    ap.add_argument("--gen", type=int, default=8, help="decoded tokens (and mmap reader passes)")
    ap.add_argument("--batch", type=int, default=16, help="sequences in the batched-decode measurement")
    ap.add_argument("--rounds", type=int, default=1, help="the arms alternated this many times (medians)")
    ap.add_argument("--dd-bytes", type=int, default=1 << 30, help="bytes dd reads for the disk bandwidth")
    ap.add_argument("--quick", action="store_true", help="a ~0.6 GB model, 4 tokens, batch 4")
    ap.add_argument("--batch-sweep", action="store_true", help="aggregate tok/s vs sequences per step")
    ap.add_argument("--sweeps", action="store_true", help="the older unlimited sweeps (F16 model)")
    ap.add_argument("--read-modes", default="auto",
                    help="comma-separated Spillway arms by --read-mode: auto, direct, buffered "
                         "(e.g. direct,buffered to compare O_DIRECT with buffered reads in one run)")
    ap.add_argument("--baseline", default=None,
                    help="a second spillway binary (e.g. main's build) run as one more arm with --read-mode auto")
    ap.add_argument("--baseline-read-mode", default="auto", choices=("auto", "direct", "buffered"),
                    help="the baseline arm's --read-mode (e.g. direct for both arms, when auto's start-up "
                         "probe would pick differently per arm)")
    ap.add_argument("--baseline-args", default="",
                    help="more flags for the baseline arm (e.g. '--row-piece-size 0': the same binary "
                         "with whole-matrix staging as the baseline)")
    a = ap.parse_args()
    if a.baseline:
        a.baseline = os.path.realpath(a.baseline)
    a.read_modes = [m for m in a.read_modes.split(",") if m]
    if not a.read_modes or any(m not in ("auto", "direct", "buffered") for m in a.read_modes):
        sys.exit("--read-modes: a comma-separated list of auto, direct, buffered")
    try:
        import numpy  # noqa: F401  (the mmap reader's child process uses it)
    except ImportError:
        sys.exit("bench/streaming.py needs numpy for the mmap reader: run it with /usr/bin/python3")
    if a.quick:
        a.models, a.gen, a.batch, a.prompt, a.dd_bytes = "quick", 4, 4, 16, 256 << 20
    spillway = os.path.realpath(a.spillway)
    os.makedirs(a.work, exist_ok=True)
    keys = [k for k in a.models.split(",") if k]
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    print(f"# Models bigger than memory: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{cpu}, {a.threads} threads\n")
    print(f"`bench/streaming.py {' '.join(sys.argv[2:])}`: each arm in a fresh memory cgroup limited to "
          f"{100 * a.fraction:.0f}% of the model file, after evicting the file from the page cache; "
          f"{a.prompt}-token prompt, {a.gen} decoded tokens, batch {a.batch}.\n")
    parent = own_memory_cgroup()
    if not parent:
        print("(Limited arms skipped: no writable cgroup v1 memory controller.)\n")
    else:
        paths = {k: make_model(spillway, a.work, k) for k in keys}
        a.model_bytes = {k: os.path.getsize(p) for k, p in paths.items()}
        print("## Cold cache, half the model in memory\n")
        for k in keys:
            limit, rows = limited_arms(spillway, parent, k, paths[k], a)
            report_model(k, limit, rows, a)
        if a.batch_sweep:
            batch_sweep(spillway, parent, paths[keys[0]], a)
    if a.sweeps:
        old_sweeps(spillway, a.work, a.threads)


if __name__ == "__main__":
    sys.exit(main())
