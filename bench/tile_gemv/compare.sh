#!/usr/bin/env bash
# Q8_0 / Q4_0 (and F16) tile GEMV, two builds alternated in one run (as bench/kquant/compare.sh):
#   bench/tile_gemv/compare.sh OLD_DIR NEW_DIR [ROUNDS] [ISA]
# OLD_DIR / NEW_DIR each hold a bench_kernels and a bench_gemv_count binary (copies of
# build/rel/bench/ from the two commits). ROUNDS (default 3) rounds of:
#  1. bench_kernels, probe and GEMV interleaved in one process (the pool's threads; set
#     SPILLWAY_BENCH_THREADS), each GEMV's weight read rate and its ratio to that process's
#     DRAM probe (the fastest of its dram_read loops, as `spillway bench` takes):
#     matmul/(F16|Q8_0|Q4_0)/ISA/m:1/5632x2048;
#  2. bench_gemv_count, one thread, CPU time per call (5632x2048, weight copies cycled through
#     512 MiB so they stream from DRAM), Q4_0 and Q8_0 tiled, m = 1 and 16.
# Old and new alternate inside every round. Wall time is meaningless on a loaded machine (the
# threads wait for a CPU); the CPU times and the ratios to the probe of the same process are
# the figures to read. The load average is printed before and after.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} isa=${4:-avx512}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for dir in "$old" "$new"; do
    tag=$([ "$dir" = "$old" ] && echo old || echo new)
    SPILLWAY_ISA=$isa "$dir/bench_kernels" --benchmark_min_time=0.3 \
      --benchmark_filter="dram_read|matmul/(F16|Q8_0|Q4_0)/$isa/m:1/5632" 2> /dev/null |
      awk -v tag="$tag" -v r="$round" '
        /^dram_read/ { match($0, /bytes\/s=[0-9.]+/); v = substr($0, RSTART + 8, RLENGTH - 8) + 0; if (v > probe) probe = v }
        /^matmul/ { split($1, p, "/"); match($0, /weight_bytes\/s=[0-9.]+/); v = substr($0, RSTART + 15, RLENGTH - 15)
                    line = line sprintf(" %s %.1f GB/s (%.0f%%)", p[2], v, 100 * v / probe) }
        END { printf "round %s %s: probe %.1f GB/s,%s\n", r, tag, probe, line }'
  done
  for t in Q4_0 Q8_0; do
    for m in 1 16; do
      it=$([ "$m" = 1 ] && echo 300 || echo 60)
      for dir in "$old" "$new"; do
        tag=$([ "$dir" = "$old" ] && echo old || echo new)
        printf 'round %s %s 1-thread CPU %s m=%s: ' "$round" "$tag" "$t" "$m"
        SPILLWAY_ISA=$isa "$dir/bench_gemv_count" "$t" tiled 5632 2048 "$m" "$it" 512 | sed 's/.*: //; s/ (checksum.*//'
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
