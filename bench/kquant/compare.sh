#!/usr/bin/env bash
# Tiled vs row-major K-quant matmul, two builds of bench_gemv_count alternated in one run:
# single-thread CPU time per call at 5632x2048 (m = 1 and 16 streaming from ~512 MiB of
# weight copies, m = 512 from one copy), then AVX2 instruction counts (callgrind, 2048x2048,
# m = 1, 4 calls + 1 warm-up) of each.
#   bench/kquant/compare.sh OLD_BIN NEW_BIN [ISA]     (ISA: avx512 (default) | avx2)
set -euo pipefail
old=$1 new=$2 isa=${3:-avx512}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in Q4_K Q5_K Q6_K; do
  for m in 1 16 512; do
    case $m in 1) it=200 mib=512;; 16) it=40 mib=512;; 512) it=2 mib=0;; esac
    for round in 1 2; do
      for layout in tiled rows; do
        for bin in "$old" "$new"; do
          [ "$layout" = rows ] && [ "$bin" = "$old" ] && continue  # the row kernels are unchanged
          tag=$([ "$bin" = "$old" ] && echo before || echo after)
          printf '%s %s m=%s %s/%s: ' "$t" "$layout" "$m" "$tag" "$round"
          SPILLWAY_ISA=$isa "$bin" "$t" "$layout" 5632 2048 "$m" "$it" "$mib" | sed 's/.*: //; s/ (checksum.*//'
        done
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v valgrind > /dev/null; then
  out=$(mktemp -d)
  for t in Q4_K Q5_K Q6_K; do
    for spec in "$old tiled before" "$new tiled after" "$new rows rows"; do
      read -r bin layout tag <<< "$spec"
      SPILLWAY_ISA=avx2 valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" "$t" "$layout" 2048 2048 1 4 > /dev/null 2>&1
      printf '%s %s (%s) avx2 instructions per 2048x2048 GEMV: ' "$t" "$layout" "$tag"
      callgrind_annotate --inclusive=yes "$out/cg" | grep -m1 'kernels::matmul(' | awk '{gsub(",", "", $1); printf "%d\n", $1 / 5}'
    done
  done
  rm -rf "$out"
fi
