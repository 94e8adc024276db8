#!/usr/bin/env bash
# The streaming kernels' software prefetch is in the machine code. It changes no result, so
# no other test notices when the compiler drops it, and it did: GCC 12 deleted the K-quant
# tiles' prefetch behind an early return, the Q8_0 / Q4_0 tiles' when the address was
# computed inside the flag test, and every _mm_prefetch loop of the attention kernels' KV
# prefetch helper (bench/README.md). Without it the AVX2 Q8_0 / Q4_0 GEMV streams from DRAM
# at about half speed, and attention over a long context waits on DRAM.
#   prefetch_emitted.sh LIBSPILLWAY_KERNELS_A
# Checked: in dot_avx2.cpp.o, kquant_tiles_avx2.cpp.o, dot_avx512.cpp.o and
# q8_tiles_avx512.cpp.o every tile kernel function (tile_dot, tile_dot_pair, tile_dot_block,
# tile2_dot_block: Q8_0 / Q4_0; kquant_tile_dot, q45k_tile_rows, q4k_tile_rows,
# q6k_tile_rows_single, q5k_tile_rows, q6k_tile_rows: K-quants; float_dot_block<..., true>,
# float_tile_pair: the tiled F32 / F16 / BF16 groups, AVX-512 only); in ops_avx2.cpp.o and
# ops_avx512.cpp.o the attention kernels (attention_typed: K; weighted_values: V); in
# kquant_unpacked_avx2.cpp.o the K-quant unpacking (q45k_unpack, q6k_unpack: both ISAs' table
# entry; without its prefetch unpacking a 5632x2048 Q6_K matrix took ~1 ms instead of ~0.4 on
# one thread, bench/README.md). Each such function of more than 60 instructions must contain
# a prefetch instruction; one with none that calls others is a dispatcher of row passes and
# is let through (the shorter ones are dispatchers that jump to the others), except
# attention_typed, which prefetches K itself whatever it calls. Exit 77 (skipped) when
# objdump is missing or the library has no such objects.
set -euo pipefail
lib=$1
command -v objdump > /dev/null || { echo "objdump not found: skipped"; exit 77; }
objdump -d -C --no-show-raw-insn "$lib" | awk '
  BEGIN {
    split("dot_avx2.cpp.o kquant_tiles_avx2.cpp.o dot_avx512.cpp.o q8_tiles_avx512.cpp.o ops_avx2.cpp.o ops_avx512.cpp.o kquant_unpacked_avx2.cpp.o", w, " ")
    for (i in w) want[w[i]] = 1
  }
  /^[A-Za-z0-9_.]+\.o:[ \t]+file format/ { obj = $1; sub(/:$/, "", obj); fn = ""; next }
  /^[0-9a-f]+ <.*>:$/ {
    fn = ""
    if (!(obj in want)) next
    if (match($0, /[(]anonymous namespace[)]::(tile_dot|tile_dot_pair|tile_dot_block|tile2_dot_block|float_tile_pair|kquant_tile_dot|q45k_tile_rows|q4k_tile_rows|q5k_tile_rows|q6k_tile_rows|q6k_tile_rows_single|attention_typed|weighted_values|q45k_unpack|q6k_unpack)(<[^>]*>)?[(]/) ||
        match($0, /[(]anonymous namespace[)]::float_dot_block<[^>]*, true>[(]/)) {
      fn = obj " " substr($0, RSTART + 23, RLENGTH - 24); ins[fn] = 0; n[fn] = 0; files[obj] = 1
    }
    next
  }
  fn != "" && /^ +[0-9a-f]+:/ { ins[fn]++ }
  fn != "" && /prefetch/ { n[fn]++ }
  fn != "" && /[ \t]call[ \t]/ { calls[fn]++ }
  END {
    if (length(files) == 0) { print "no streaming kernels in the library: skipped"; exit 77 }
    bad = 0; checked = 0
    for (f in ins) {
      if (ins[f] <= 60) continue
      checked++
      printf "%s: %d instructions, %d prefetch\n", f, ins[f], n[f]
      if (n[f] == 0 && calls[f] > 0 && f !~ / attention_typed</) { print "  (a dispatcher: it calls the kernels)"; continue }
      if (n[f] == 0) { print "  ^ no prefetch instruction (dropped by the compiler, or never written)"; bad = 1 }
    }
    if (checked < 10) { print "only " checked " kernel functions found"; exit 1 }
    for (o in want) if (!(o in files)) { print "no checked function found in " o; bad = 1 }
    exit bad
  }'
