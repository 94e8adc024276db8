#!/usr/bin/env python3
"""What 16-sequence batched decode can reach on this CPU, per weight type, from one run.

    python3 bench/batch_bound.py [--bench-kernels build/rel/bench/bench_kernels] [--threads 2] [--isa avx2|avx512]

Runs bench_kernels once (one process, so the figures share the machine's minute) for the
ISA's issue-rate loops (bench/bench_issue_rate.cpp; the ISA defaults to AVX-512 where the CPU
has AVX-512 VNNI, else AVX2) and, per weight type, that ISA's 5632x2048 matmul
with 1 activation row (the GEMV: one sequence's decode) and 16 (batched decode). Prints, per
type: the GEMV and m = 16 times, the m = 16 floor (16 x 5632 x 2048 multiply-accumulates at
the issue rate of the instruction mix that type's GEMM is built from, operands in L1; or the
GEMV's time where that is longer, as the GEMM reads the same weights from DRAM), and
what a batch-16 step of 6x one sequence's tok/s would need: the m = 16 GEMM within 16/6 of the
GEMV's time (less what the rest of the step takes). Where the floor is above that, no kernel
built from these instructions reaches 6x on this machine (bench/README.md, "What batched
decode can reach without VNNI" and "... with VNNI").
"""
import argparse
import json
import os
import subprocess
import sys

ROWS, COLS, M = 5632, 2048, 16
# The instruction mix each weight type's m = 16 GEMM is built from, per ISA (AVX-512: every
# integer type's dot is vpdpbusd on unsigned codes; the K-quants' unpacking and scale products
# come on top, so for them the mix is a floor that leaves those out).
MIX = {
    "avx2": {
        "F16": "fp32_fma",
        "Q8_0": "int8_q8_0",
        "Q4_0": "int8_int16_sums",
        "Q4_K": "int8_int16_sums",
        "Q5_K": "int8_int16_sums",
        "Q6_K": "int8_int16_sums",
    },
    "avx512": {
        "F16": "fp32_fma",
        "Q8_0": "int8_vpdpbusd",
        "Q4_0": "int8_vpdpbusd",
        "Q4_K": "int8_vpdpbusd",
        "Q5_K": "int8_vpdpbusd",
        "Q6_K": "int8_vpdpbusd",
    },
}


def cpu_has_avx512_vnni() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return {"avx512f", "avx512bw", "avx512_vnni"} <= set(flags)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench-kernels", default="build/rel/bench/bench_kernels")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-time", default="0.5")
    parser.add_argument("--isa", choices=sorted(MIX), help="default: avx512 where the CPU has VNNI, else avx2")
    args = parser.parse_args()

    isa = args.isa or ("avx512" if cpu_has_avx512_vnni() else "avx2")
    mix_of = MIX[isa]
    types = "|".join(mix_of)
    pattern = f"issue/{isa}/|matmul/({types})/{isa}/m:(1|{M})/{ROWS}x{COLS}/"
    env = dict(os.environ, SPILLWAY_BENCH_THREADS=str(args.threads))
    run = subprocess.run(
        [args.bench_kernels, f"--benchmark_filter={pattern}", "--benchmark_format=json",
         f"--benchmark_min_time={args.min_time}"],
        env=env, check=True, capture_output=True, text=True)
    results = {b["name"].removesuffix("/real_time"): b for b in json.loads(run.stdout)["benchmarks"]}

    rate = {}
    for mix in set(mix_of.values()):
        bench = results.get(f"issue/{isa}/{mix}")
        if bench is None:
            print(f"this CPU lacks {isa}: no issue-rate loops to compare with", file=sys.stderr)
            return 1
        rate[mix] = bench["macs/s"]
    macs = ROWS * COLS * M
    print(f"{isa}, {args.threads} threads, {ROWS}x{COLS}; issue rates (GMAC/s): " +
          ", ".join(f"{mix} {rate[mix] / 1e9:.1f}" for mix in sorted(rate)))
    print("| type | GEMV us | m=16 us | m=16 / GEMV | m=16 floor us (mix or GEMV) | m=16 at % of floor "
          "| 6x needs m=16 <= us | floor / need |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype, mix in mix_of.items():
        gemv = results[f"matmul/{dtype}/{isa}/m:1/{ROWS}x{COLS}"]["real_time"]
        gemm = results[f"matmul/{dtype}/{isa}/m:{M}/{ROWS}x{COLS}"]["real_time"]
        floor = max(macs / rate[mix] * 1e6, gemv)
        need = gemv * M / 6
        print(f"| {dtype} | {gemv:.0f} | {gemm:.0f} | {gemm / gemv:.2f} | {floor:.0f} ({mix if floor > gemv else 'GEMV'}) | "
              f"{100 * floor / gemm:.0f}% | {need:.0f} | {floor / need:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
