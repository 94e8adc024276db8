#!/usr/bin/env python3
"""A MoE model bigger than memory, streamed by expert vs by layer (issue #16); prints Markdown.

    bench/moe_streaming.py SPILLWAY_BINARY [--work DIR] [--layers 8] [--type q4_k]
                           [--fraction 0.5] [--rounds 2] [--prompt 16] [--gen 8] [--threads N]

The model: `spillway make-demo-model --shape qwen3-30b-a3b --layers N` (Qwen3-30B-A3B's
layout: hidden 2048, 32 / 4 heads of 128, 128 routed experts of hidden size 768, top-8,
vocabulary 151,936; random weights), written once under --work. Each arm runs in a FRESH
child cgroup of the caller's cgroup v1 memory controller, limited to --fraction of the
model file, after evicting the file from the page cache (bench/streaming.py's helpers:
Cgroup, evict, disk_bandwidth; nothing copied). Arms, alternated --rounds times:

  disk     one `dd iflag=direct` over the model file (16 MiB requests): the device's
           sequential read bandwidth in this run;
  experts  `spillway bench --memory-budget auto` (the expert tier: everything but the
           routed experts resident, experts in a RAM cache, misses read by expert);
  small    the expert tier with its cache forced to --small-cache (`--expert-cache SIZE`):
           the random weights' routing reuses few experts (hybrid-moe.md §7C), so the auto
           cache hits more than a trained model's would; a small cache shows the misses;
  layers   the same with `--expert-cache off --prefetch-depth 1`: whole-layer streaming,
           every expert of a streamed layer read each step (at the default depth the staging
           of whole-layer expert pieces alone exceeds the budget and bench refuses to start).

Reported per arm: decode tok/s (median of rounds), and from `bench --json`'s
experts.decode (the timed decode steps only): hit rate, routed-expert bytes the tokens
asked for, expert bytes read per token, (1 - hit rate) x requested (the bound reads must
not exceed), stall fraction, and the decode speed the disk bandwidth allows for those
reads; for layers, bytes streamed per step and its disk bound. Last, where layer 0's expert
tensors start mod 4096 (from the GGUF header: O_DIRECT widens reads that do not start on a
4 KiB boundary). Needs a writable cgroup v1 memory controller (exits with a message otherwise).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from importing streaming.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from streaming import MIB, Cgroup, disk_bandwidth, evict, fmt_left, own_memory_cgroup  # noqa: E402


def make_model(spillway, work, layers, qtype):
    path = os.path.join(work, f"qwen3-30b-a3b-shape-{layers}l-{qtype}.gguf")
    if not os.path.exists(path):
        print(f"(writing the Qwen3-30B-A3B-shaped model, {layers} layers, {qtype}, to {path})", file=sys.stderr)
        tmp = path + ".tmp"
        subprocess.run([spillway, "make-demo-model", "--out", tmp, "--shape", "qwen3-30b-a3b", "--layers",
                        str(layers), "--type", qtype, "--context", "1024"], check=True, stdout=subprocess.DEVNULL)
        os.rename(tmp, path)
    return path


def expert_alignment(path):
    """[(tensor name, shape, file offset mod 4096)] of layer 0's routed-expert tensors, from the
    GGUF header (v2/v3): whether O_DIRECT can read an expert without widening to 4 KiB."""
    import struct
    f = open(path, "rb")

    def rd(fmt):
        return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

    def rstr():
        return f.read(rd("Q")).decode()
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def rval(t):
        if t == 8:
            return rstr()
        if t == 9:
            et, n = rd("I"), rd("Q")
            for _ in range(n):
                rval(et)
            return None
        return rd(scalar[t])
    if f.read(4) != b"GGUF":
        return []
    rd("I")
    n_tensors, n_kv = rd("Q"), rd("Q")
    align = 32
    for _ in range(n_kv):
        key, t = rstr(), rd("I")
        v = rval(t)
        if key == "general.alignment":
            align = v
    infos = []
    for _ in range(n_tensors):
        name = rstr()
        dims = [rd("Q") for _ in range(rd("I"))]
        rd("I")
        infos.append((name, dims, rd("Q")))
    base = (f.tell() + align - 1) // align * align
    return [(n, d, (base + o) % 4096) for n, d, o in infos if n.startswith("blk.0.") and "_exps" in n]


def bench_arm(spillway, path, cg, args, *flags):
    cmd = [spillway, "bench", "--model", path, "--memory-budget", "auto", "--prompt-tokens", str(args.prompt),
           "--gen-tokens", str(args.gen), "--batch", "1", "--repeat", "1", "--threads", str(args.threads),
           "--json", "--no-probe", *flags]
    r = cg.run(cmd)
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {r.stderr.strip()[-400:]}"
    return json.loads(r.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spillway")
    ap.add_argument("--work", default="build/bench", help="where the model is written (not tmpfs: O_DIRECT)")
    ap.add_argument("--layers", type=int, default=8, help="decoder layers of the 48 (file size scales with it)")
    ap.add_argument("--type", default="q4_k", help="weight type (make-demo-model --type)")
    ap.add_argument("--fraction", type=float, default=0.5, help="cgroup limit as a fraction of the model file")
    ap.add_argument("--rounds", type=int, default=2, help="the arms alternated this many times (medians)")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    ap.add_argument("--gen", type=int, default=8, help="decoded tokens")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dd-bytes", type=int, default=1 << 30, help="bytes dd reads for the disk bandwidth")
    ap.add_argument("--small-cache", default="256M", help="the small arm's --expert-cache SIZE ('' skips it)")
    a = ap.parse_args()
    parent = own_memory_cgroup()
    if not parent:
        sys.exit("bench/moe_streaming.py: no writable cgroup v1 memory controller; nothing measured")
    spillway = os.path.realpath(a.spillway)
    os.makedirs(a.work, exist_ok=True)
    path = make_model(spillway, a.work, a.layers, a.type)
    size = os.path.getsize(path)
    limit = int(size * a.fraction) // MIB * MIB
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    load = open("/proc/loadavg").read().split()[:3]

    rows = {}
    for rep in range(a.rounds):
        arms = ("disk", "experts", "small", "layers", "disk") if a.small_cache else ("disk", "experts", "layers", "disk")
        for arm in arms:
            left = evict(path)
            with Cgroup(parent, f"moe-{arm}", limit) as cg:
                oom0 = cg.oom_kills()
                t0 = time.time()
                if arm == "disk":
                    out, err = disk_bandwidth(path, cg, a.dd_bytes), None
                elif arm == "experts":
                    out, err = bench_arm(spillway, path, cg, a)
                elif arm == "small":
                    out, err = bench_arm(spillway, path, cg, a, "--expert-cache", a.small_cache)
                else:
                    out, err = bench_arm(spillway, path, cg, a, "--expert-cache", "off", "--prefetch-depth", "1")
                rows.setdefault(arm, []).append({"out": out, "err": err, "left": left, "peak": cg.peak_bytes(),
                                                 "oom": cg.oom_kills() - oom0, "wall": time.time() - t0})
            with open(os.path.join(a.work, "moe_streaming_rows.json"), "w") as f:  # partial results survive
                json.dump(rows, f)
            print(f"(round {rep + 1}: {arm} done in {time.time() - t0:.0f} s; page cache before it "
                  f"{fmt_left(left)}; {err or 'ok'})", file=sys.stderr)
    load_after = open("/proc/loadavg").read().split()[:3]

    print(f"# MoE streaming: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu}, "
          f"{a.threads} threads, load average {' '.join(load)} before / {' '.join(load_after)} after\n")
    print(f"`bench/moe_streaming.py {' '.join(sys.argv[2:])}`: {os.path.basename(path)} "
          f"({size / MIB:.0f} MiB, Qwen3-30B-A3B layout, {a.layers} of its 48 layers, {a.type}); each arm in a "
          f"fresh cgroup limited to {limit / MIB:.0f} MiB ({100 * a.fraction:.0f}% of the file) after evicting the "
          f"file from the page cache; {a.prompt}-token prompt, {a.gen} decoded tokens, arms alternated "
          f"{a.rounds}x (medians).\n")
    print(f"Page cache of the model before each arm: "
          f"{', '.join(sorted({fmt_left(r['left']) for v in rows.values() for r in v}))}.\n")
    disk = max(r["out"] for r in rows["disk"])
    print(f"Disk (`dd iflag=direct`, 16 MiB requests, {a.dd_bytes / MIB:.0f} MiB): "
          f"{', '.join('%.0f' % (r['out'] / 1e6) for r in rows['disk'])} MB/s; the best, {disk / 1e6:.0f} MB/s, "
          f"is the bound below.\n")

    def ok(arm):
        return [r for r in rows[arm] if r["out"]]

    def med(values):
        values = list(values)
        return statistics.median(values) if values else float("nan")

    print("| arm | decode tok/s (per round) | hit rate | routed-expert bytes asked / token | read / token "
          "| (1 − hit) × asked | stall fraction | disk bound tok/s | peak cgroup memory | OOM kills |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for arm in ("experts", "small", "layers"):
        if arm not in rows:
            continue
        good = ok(arm)
        if not good:
            print(f"| {arm} | failed: {rows[arm][0]['err']} | | | | | | | | |")
            continue
        tps = [r["out"]["tg_tokens_per_second"] for r in good]
        peak = max(r["peak"] for r in rows[arm]) / MIB
        ooms = sum(r["oom"] for r in rows[arm])
        summary[arm] = med(tps)
        tps_s = f"**{med(tps):.3f}** ({', '.join(f'{t:.3f}' for t in tps)})"
        if arm in ("experts", "small"):
            dec = [r["out"]["experts"]["decode"] for r in good]
            hit = med(d["hit_rate"] for d in dec)
            asked = med(d["requested_expert_bytes_per_token"] for d in dec)
            read = med(d["expert_bytes_read_per_token"] for d in dec)
            bound = med(d["miss_bytes_bound_per_token"] for d in dec)
            stall = med(d["stall_fraction"] for d in dec)
            label = "experts (`--memory-budget auto`)" if arm == "experts" else f"experts, `--expert-cache {a.small_cache}`"
            print(f"| {label} | {tps_s} | {100 * hit:.1f}% | {asked / 1e6:.1f} MB "
                  f"| {read / 1e6:.1f} MB | {bound / 1e6:.1f} MB | {100 * stall:.0f}% "
                  f"| {disk / read if read else float('inf'):.2f} | {peak:.0f} MiB | {ooms} |")
            within = all(d["expert_bytes_read_per_token"] <= d["miss_bytes_bound_per_token"] * (1 + 1e-9) for d in dec)
            summary["within"] = summary.get("within", True) and within
            x = good[0]["out"]
            e = x["experts"]
            summary["cache_" + arm] = (f"cache {e['moe_cache_slots']} slots, {e['moe_cache_bytes'] / MIB:.0f} MiB "
                                f"({e['moe_resident_experts']} experts resident at the end, of "
                                f"{128 * a.layers}); {med(d['experts_per_layer_step'] for d in dec):.1f} distinct "
                                f"experts per layer and decode step; a miss took "
                                f"{1e3 * med(d['read_seconds_per_expert'] for d in dec):.1f} ms to arrive (mean); "
                                f"budget {x['residency']['budget_bytes'] / MIB:.0f} MiB")
        else:
            res = [r["out"]["residency"] for r in good]
            streamed = med(x["streamed_bytes_per_step"] for x in res)
            resident = ", ".join(f"{x['planned_resident_layers']} → {x['resident_layers']}" for x in res)
            print(f"| layers (`--expert-cache off --prefetch-depth 1`) | {tps_s} | — | — | {streamed / 1e6:.1f} MB streamed per step "
                  f"| — | — | {disk / streamed if streamed else float('inf'):.2f} | {peak:.0f} MiB | {ooms} |")
            summary["layers_resident"] = resident
    print()
    if "experts" in summary and "layers" in summary:
        print(f"Expert tier / whole-layer streaming, decode: **{summary['experts'] / summary['layers']:.2f}×**.")
    if "small" in summary and "layers" in summary:
        print(f"Expert tier with the small cache / whole-layer streaming: **{summary['small'] / summary['layers']:.2f}×**.")
    for arm in ("experts", "small"):
        if "cache_" + arm in summary:
            print(f"- {arm}: {summary['cache_' + arm]}.")
    if "layers_resident" in summary:
        print(f"Whole-layer streaming: resident layers (plan → end) {summary['layers_resident']} of {a.layers}.")
    if "within" in summary:
        print(f"Decode reads ≤ (1 − hit rate) × routed-expert bytes asked, every round of both expert arms: "
              f"**{'yes' if summary['within'] else 'no'}**.")
    for name, dims, mod in expert_alignment(path):
        print(f"- {name} {dims}: data starts at {mod} mod 4096.")
    print()


if __name__ == "__main__":
    sys.exit(main())
