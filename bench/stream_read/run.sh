#!/usr/bin/env bash
# The streamer's read bandwidth vs dd on the same file, interleaved in the same run (the
# virtual disk's bandwidth drifts by 2x within minutes: only same-round ratios mean
# anything). Usage:
#   bench/stream_read/run.sh BUILD_DIR MODEL [ROUNDS] [STEPS]
# Each round: dd iflag=direct bs=4M, then bench_stream_read (4 threads x 2 MiB requests)
# with O_DIRECT and buffered + DONTNEED, each as served (retiled) and in the file's layout
# (pure I/O), and with the read mode measured at start; each line gives MB/s and the ratio
# to that round's dd.
set -euo pipefail
build=$1 model=$2 rounds=${3:-3} steps=${4:-2}
evict() { python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$model"; }
rate() {  # MB/s consumed from bench_stream_read's last line
  sed -n 's/.*: \([0-9]*\) MB\/s consumed.*/\1/p' | tail -1
}
for r in $(seq "$rounds"); do
  evict
  dd_bytes_s=$(dd if="$model" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1 |
               awk '{print $1 / $(NF-3)}')
  dd=$(awk -v b="$dd_bytes_s" 'BEGIN{printf "%d", b / 1e6}')
  line="round $r: dd $dd MB/s"
  for cfg in "direct tiled" "buffered tiled" "direct file" "buffered file" "auto tiled"; do
    set -- $cfg
    evict
    mbs=$("$build/bench/bench_stream_read" "$model" "$steps" 4 2 "$1" "$2" | rate)
    line+=" | $1/$2 $mbs MB/s ($(awk -v a="$mbs" -v b="$dd" 'BEGIN{printf "%.2f", a / b}')x dd)"
  done
  echo "$line"
done
