#!/usr/bin/env bash
# The streamer's read bandwidth vs dd on the same file, in the same run (the device's
# bandwidth drifts: only same-run ratios mean anything). Usage:
#   bench/stream_read/run.sh BUILD_DIR MODEL [STEPS]
# Prints dd (O_DIRECT, 4 MiB), then bench_stream_read in each read mode, then dd again.
set -euo pipefail
build=$1 model=$2 steps=${3:-2}
dd_rate() {
  # Drop the file from the page cache first so buffered figures are the device's too.
  python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$model"
  dd if="$model" of=/dev/null bs=4M iflag=direct 2>&1 | tail -1
}
echo "dd iflag=direct bs=4M: $(dd_rate)"
for mode in direct buffered; do
  python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$model"
  echo "== bench_stream_read $mode"
  "$build/bench/bench_stream_read" "$model" "$steps" 4 2 "$mode"
done
echo "== bench_stream_read auto (probe at start)"
"$build/bench/bench_stream_read" "$model" "$steps" 4 2 auto
echo "dd iflag=direct bs=4M: $(dd_rate)"
