#!/usr/bin/env python3
"""What 16-sequence batched decode can reach on this CPU, per weight type, from one run.

    python3 bench/batch_bound.py [--bench-kernels build/rel/bench/bench_kernels] [--threads 2]

Runs bench_kernels once (one process, so the figures share the machine's minute) for the
AVX2 issue-rate loops (bench/bench_issue_rate.cpp) and, per weight type, the 5632x2048 matmul
with 1 activation row (the GEMV: one sequence's decode) and 16 (batched decode). Prints, per
type: the GEMV and m = 16 times, the m = 16 floor (16 x 5632 x 2048 multiply-accumulates at
the issue rate of the instruction mix that type's GEMM is built from, operands in L1), and
what a batch-16 step of 6x one sequence's tok/s would need: the m = 16 GEMM within 16/6 of the
GEMV's time (less what the rest of the step takes). Where the floor is above that, no kernel
built from these instructions reaches 6x on this machine (bench/README.md, "What batched
decode can reach without VNNI").
"""
import argparse
import json
import os
import subprocess
import sys

ROWS, COLS, M = 5632, 2048, 16
# The instruction mix each weight type's m = 16 GEMM is built from on AVX2.
MIX = {
    "F16": "fp32_fma",
    "Q8_0": "int8_q8_0",
    "Q4_0": "int8_int16_sums",
    "Q4_K": "int8_int16_sums",
    "Q5_K": "int8_int16_sums",
    "Q6_K": "int8_int16_sums",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench-kernels", default="build/rel/bench/bench_kernels")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-time", default="0.5")
    args = parser.parse_args()

    types = "|".join(MIX)
    pattern = f"issue/avx2/|matmul/({types})/avx2/m:(1|{M})/{ROWS}x{COLS}/"
    env = dict(os.environ, SPILLWAY_BENCH_THREADS=str(args.threads))
    run = subprocess.run(
        [args.bench_kernels, f"--benchmark_filter={pattern}", "--benchmark_format=json",
         f"--benchmark_min_time={args.min_time}"],
        env=env, check=True, capture_output=True, text=True)
    results = {b["name"].removesuffix("/real_time"): b for b in json.loads(run.stdout)["benchmarks"]}

    rate = {}
    for mix in set(MIX.values()):
        bench = results.get(f"issue/avx2/{mix}")
        if bench is None:
            print("this CPU lacks AVX2 + FMA: no issue-rate loops to compare with", file=sys.stderr)
            return 1
        rate[mix] = bench["macs/s"]
    macs = ROWS * COLS * M
    print(f"{args.threads} threads, {ROWS}x{COLS}; issue rates (GMAC/s): " +
          ", ".join(f"{mix} {rate[mix] / 1e9:.1f}" for mix in sorted(rate)))
    print("| type | GEMV us | m=16 us | m=16 / GEMV | m=16 floor us (mix) | m=16 at % of floor "
          "| 6x needs m=16 <= us | floor / need |")
    print("|---|---|---|---|---|---|---|---|")
    for dtype, mix in MIX.items():
        gemv = results[f"matmul/{dtype}/avx2/m:1/{ROWS}x{COLS}"]["real_time"]
        gemm = results[f"matmul/{dtype}/avx2/m:{M}/{ROWS}x{COLS}"]["real_time"]
        floor = macs / rate[mix] * 1e6
        need = gemv * M / 6
        print(f"| {dtype} | {gemv:.0f} | {gemm:.0f} | {gemm / gemv:.2f} | {floor:.0f} ({mix}) | "
              f"{100 * floor / gemm:.0f}% | {need:.0f} | {floor / need:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
