#!/usr/bin/env python3
"""Layer streaming and residency, measured in one run; prints a Markdown report.

    bench/streaming.py SPILLWAY_BINARY [--work DIR] [--limit-mb 1024]

1. A model ~2x a memory cgroup's limit: decode and prefill speed inside the cgroup with
   --memory-budget auto, as fractions of the disk bound (bytes streamed per forward step /
   disk read bandwidth, both measured in the same run). Needs a writable cgroup v1 memory
   controller (skipped otherwise).
2. A residency sweep (0, 25, 50, 75, 100% of the layers resident): tok/s, resident weights,
   and the share of forward time spent waiting on I/O.
3. Everything resident, streaming machinery on (--resident-layers all) vs off
   (--no-streaming: weights read through the file mapping), interleaved, median of 5. On
   retiles resident weights for the kernels, off reads the file's row-major layout, so a
   third arm (on with --file-layout) separates the machinery's cost from the layout's gain.
4. The prefetch depth (1, 2, 4) with every layer streamed.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

LAYERS = 24


def bench(spillway, model, *flags, gen=8, cgroup=None):
    cmd = [spillway, "bench", "--model", model, "--prompt-tokens", "128", "--gen-tokens", str(gen),
           "--batch", "1", "--repeat", "1", "--threads", "2", "--json", "--no-probe", *flags]
    if cgroup:
        cmd = ["bash", "-c", 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"', "_", cgroup, *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def io_wait_share(r):
    """Share of the measured forward time spent blocked on streamed layers."""
    seconds = r["prompt_tokens"] / r["pp_tokens_per_second"] + r["gen_tokens"] / r["tg_tokens_per_second"]
    return r["residency"]["io_stall_seconds_total"] / seconds


def own_memory_cgroup():
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if "memory" in controllers.split(","):
            d = "/sys/fs/cgroup/memory" + path
            return d if os.access(d, os.W_OK) else None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spillway")
    ap.add_argument("--work", default="build/bench")
    ap.add_argument("--limit-mb", type=int, default=1024)
    a = ap.parse_args()
    spillway = os.path.realpath(a.spillway)
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "streaming-bench.gguf")
    if not os.path.exists(model):
        # ~2.3 GB of F16 weights: 24 layers of ~88 MB (d 2048, ff 5632, GQA 32/8) + embeddings.
        subprocess.run([spillway, "make-demo-model", "--out", model, "--layers", str(LAYERS), "--dim", "2048",
                        "--ff", "5632", "--heads", "32", "--kv-heads", "8", "--vocab", "32000",
                        "--context", "1024"], check=True, stdout=subprocess.DEVNULL)
    model_mb = os.path.getsize(model) / 2**20
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    print(f"# Layer streaming: {datetime.date.today()}, {cpu}\n")
    print(f"Model: {os.path.basename(model)}, {model_mb:.0f} MiB, {LAYERS} layers (F16); 2 threads; "
          f"128-token prompt, 8 decoded tokens.\n")

    parent = own_memory_cgroup()
    if parent:
        cg = os.path.join(parent, f"spillway-bench-{os.getpid()}")
        os.mkdir(cg)
        try:
            with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
                f.write(str(a.limit_mb * 2**20))
            r = bench(spillway, model, "--memory-budget", "auto", cgroup=cg)
            peak = int(open(os.path.join(cg, "memory.max_usage_in_bytes")).read()) / 2**20
        finally:
            os.rmdir(cg)
        res = r["residency"]
        print(f"## A {model_mb:.0f} MiB model in a {a.limit_mb} MiB cgroup (--memory-budget auto)\n")
        print("| resident layers | streamed per step | disk bandwidth | decode tok/s | decode / disk bound "
              "| prefill tok/s | prefill / disk bound | peak cgroup memory |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {res['resident_layers']} / {LAYERS} | {res['streamed_bytes_per_step']/1e6:.0f} MB "
              f"| {res['disk_read_bytes_per_second']/1e6:.0f} MB/s | {r['tg_tokens_per_second']:.3f} "
              f"| {100*res['tg_fraction_of_disk']:.1f}% | {r['pp_tokens_per_second']:.1f} "
              f"| {100*res['pp_fraction_of_disk']:.1f}% | {peak:.0f} MiB |\n")
    else:
        print("(Part 1 skipped: no writable cgroup v1 memory controller.)\n")

    print("## Residency sweep (no memory limit)\n")
    print("| resident | decode tok/s | prefill tok/s | resident weights | streamed per step | decode / disk bound "
          "| I/O wait share |")
    print("|---|---|---|---|---|---|---|")
    for pct in (0, 25, 50, 75, 100):
        n = LAYERS * pct // 100
        r = bench(spillway, model, "--resident-layers", str(n))
        res = r["residency"]
        disk = f"{100*res['tg_fraction_of_disk']:.1f}%" if "tg_fraction_of_disk" in res else "-"
        print(f"| {pct}% ({n}) | {r['tg_tokens_per_second']:.3f} | {r['pp_tokens_per_second']:.1f} "
              f"| {res['resident_weight_bytes']/1e6:.0f} MB | {res['streamed_bytes_per_step']/1e6:.0f} MB "
              f"| {disk} | {100*io_wait_share(r):.0f}% |")
    print()

    print("## Everything resident: streaming machinery on vs off (interleaved, median of 5)\n")
    on, on_file, off = [], [], []
    for _ in range(5):
        on.append(bench(spillway, model, "--resident-layers", "all", gen=32))
        on_file.append(bench(spillway, model, "--resident-layers", "all", "--file-layout", gen=32))
        off.append(bench(spillway, model, "--no-streaming", gen=32))
    med = lambda runs, key: statistics.median(r[key] for r in runs)
    print("| | on (--resident-layers all) | on, file layout (--file-layout) | off (--no-streaming) "
          "| on / off | on, file layout / off |")
    print("|---|---|---|---|---|---|")
    for key, label in (("tg_tokens_per_second", "decode tok/s"), ("pp_tokens_per_second", "prefill tok/s")):
        a, b, c = med(on, key), med(on_file, key), med(off, key)
        print(f"| {label} | {a:.2f} | {b:.2f} | {c:.2f} | {a/c:.3f} | {b/c:.3f} |")
    print()

    print("## Prefetch depth (every layer streamed)\n")
    print("| depth | staging buffers | decode tok/s | decode / disk bound | I/O wait share |")
    print("|---|---|---|---|---|")
    for depth in (1, 2, 4):
        r = bench(spillway, model, "--resident-layers", "0", "--prefetch-depth", str(depth))
        res = r["residency"]
        print(f"| {depth} | {depth+1} | {r['tg_tokens_per_second']:.3f} | {100*res['tg_fraction_of_disk']:.1f}% "
              f"| {100*io_wait_share(r):.0f}% |")


if __name__ == "__main__":
    sys.exit(main())
